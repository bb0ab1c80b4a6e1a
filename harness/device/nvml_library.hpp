// NVML, which comes with the NVIDIA driver, loaded at run time (never linked) and initialised for
// as long as this object lives: the one loader of the device module's NVML readers (the driver
// version, the GPU fabric, the telemetry).
#pragma once

#include <string>

namespace moebench {

// Which GPU NVML is asked about: the one at `pci_bus_id` where the rank has a CUDA device (NVML
// numbers GPUs its own way, whatever CUDA_VISIBLE_DEVICES renumbered), else NVML's `index` (on a
// host backend, a node's rank i stands for GPU i, as the NVML stand-in the tests build numbers
// them).
struct NvmlGpuId {
  std::string pci_bus_id;
  int index = 0;
  std::string text() const;  // "the GPU at 0000:19:00.0", "GPU 3"
};

class NvmlLibrary {
 public:
  NvmlLibrary();  // loads and initialises; ok() says whether that worked, why() why not
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool ok() const { return initialised_; }
  const std::string& why() const { return why_; }
  // NVML's handle of the GPU `id` names, or nullptr (`why` then says why).
  void* device(const NvmlGpuId& id, std::string& why) const;
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
