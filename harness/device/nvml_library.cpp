#include "harness/device/nvml_library.hpp"

#include <dlfcn.h>

namespace moebench {

namespace {
using InitFn = int (*)();  // nvmlInit_v2, nvmlShutdown: 0 is NVML_SUCCESS
using ByPciFn = int (*)(const char*, void**);
using ByIndexFn = int (*)(unsigned, void**);
}  // namespace

std::string NvmlGpuId::text() const {
  return pci_bus_id.empty() ? "GPU " + std::to_string(index) : "the GPU at " + pci_bus_id;
}

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

void* NvmlLibrary::device(const NvmlGpuId& id, std::string& why) const {
  if (!initialised_) {
    why = why_;
    return nullptr;
  }
  void* d = nullptr;
  int rc = -1;
  if (!id.pci_bus_id.empty()) {
    if (const auto f = symbol<ByPciFn>("nvmlDeviceGetHandleByPciBusId_v2")) {
      rc = f(id.pci_bus_id.c_str(), &d);
    }
  } else if (id.index >= 0) {
    if (const auto f = symbol<ByIndexFn>("nvmlDeviceGetHandleByIndex_v2")) {
      rc = f(static_cast<unsigned>(id.index), &d);
    }
  }
  if (rc != 0 || d == nullptr) {
    why = "NVML does not know " + id.text();
    return nullptr;
  }
  return d;
}

void* NvmlLibrary::lookup(const char* name) const {
  return lib_ == nullptr ? nullptr : dlsym(lib_, name);
}

}  // namespace moebench
