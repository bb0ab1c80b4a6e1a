#include "harness/device/nvml_library.hpp"

#include <dlfcn.h>

namespace moebench {

namespace {
using InitFn = int (*)();  // nvmlInit_v2, nvmlShutdown: 0 is NVML_SUCCESS
}  // namespace

NvmlLibrary::NvmlLibrary() {
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    why_ = "libnvidia-ml.so.1 (NVML, part of the driver) cannot be loaded";
    return;
  }
  const auto init = symbol<InitFn>("nvmlInit_v2");
  initialised_ = init != nullptr && init() == 0;
  if (!initialised_) why_ = "NVML did not initialise";
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_) {
    if (const auto shutdown = symbol<InitFn>("nvmlShutdown")) shutdown();
  }
  if (lib_ != nullptr) dlclose(lib_);
}

void* NvmlLibrary::lookup(const char* name) const {
  return lib_ == nullptr ? nullptr : dlsym(lib_, name);
}

}  // namespace moebench
