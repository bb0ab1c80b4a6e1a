// NVML, which comes with the NVIDIA driver, loaded at run time (never linked) and initialised for
// as long as this object lives: the one loader of the device module's NVML readers (the driver
// version, the GPU fabric, the telemetry).
#pragma once

#include <string>

namespace moebench {

class NvmlLibrary {
 public:
  NvmlLibrary();  // loads and initialises; ok() says whether that worked, why() why not
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool ok() const { return initialised_; }
  const std::string& why() const { return why_; }
  // The function `name` as type F, or nullptr (an older driver lacks newer functions).
  template <typename F>
  F symbol(const char* name) const {
    return reinterpret_cast<F>(lookup(name));
  }

 private:
  void* lookup(const char* name) const;
  void* lib_ = nullptr;
  bool initialised_ = false;
  std::string why_;
};

}  // namespace moebench
