#include "harness/backends/registry/device_plugin.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <system_error>
#include <vector>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

using Entry = const DevicePluginApi* (*)();

const DevicePluginApi* loaded = nullptr;

// Where the plugin may be: beside the running binary, then the build folder this one was built
// in (test binaries live in subfolders of it).
std::vector<std::filesystem::path> plugin_paths() {
  std::vector<std::filesystem::path> paths;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back(self.parent_path() / kDevicePluginFile);
#if defined(MOEBENCH_PLUGIN_DIR)
  paths.push_back(std::filesystem::path(MOEBENCH_PLUGIN_DIR) / kDevicePluginFile);
#endif
  return paths;
}

const DevicePluginApi* load() {
  // A binary linking the device backends itself exports the entry.
  if (void* own = dlsym(RTLD_DEFAULT, kDevicePluginEntry)) {
    return reinterpret_cast<Entry>(own)();
  }
  std::string tried;
  for (const std::filesystem::path& p : plugin_paths()) {
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) {
      tried += (tried.empty() ? "" : "; ") + p.string() + ": not there";
      continue;
    }
    // RTLD_NOW: every symbol resolved here, not at some later call.
    void* handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      throw UsageError("the cuda backend's plugin " + p.string() +
                       " cannot be loaded: " + (why ? why : "unknown") +
                       " (it needs the CUDA libraries it was built with: cuBLAS, cuDNN, NCCL)");
    }
    void* entry = dlsym(handle, kDevicePluginEntry);
    if (entry == nullptr) {
      throw UsageError("the cuda backend's plugin " + p.string() + " has no entry " +
                       kDevicePluginEntry + ": not a moebench plugin");
    }
    const DevicePluginApi* api = reinterpret_cast<Entry>(entry)();
    if (api == nullptr || api->abi != kDevicePluginAbi) {
      throw UsageError("the cuda backend's plugin " + p.string() +
                       " is from another moebench build; rebuild moebench (cmake --build)");
    }
    return api;
  }
  throw UsageError(std::string("the cuda backend is a plugin, ") + kDevicePluginFile +
                   ", which must be beside the moebench binary (" + tried +
                   "); copy it with the binary, or rebuild");
}

}  // namespace

const DevicePluginApi& device_plugin() {
  static std::once_flag once;
  std::call_once(once, [] { loaded = load(); });
  return *loaded;
}

bool device_plugin_loaded() {
  return loaded != nullptr;
}

}  // namespace moebench
