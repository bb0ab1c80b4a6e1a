// A compute device's identity, as its backend reads it from the runtime (plain data; no CUDA
// header needed). harness/device/ records and serialises it.
#pragma once

#include <cstdint>
#include <string>

namespace moebench {

// The device a backend computes on (device backends only), as the device module records it.
struct DeviceInfo {
  int ordinal = -1;         // the runtime's index, after CUDA_VISIBLE_DEVICES
  int visible_devices = 0;  // how many the process sees
  std::string name;         // "NVIDIA H200"
  std::string uuid;         // "GPU-8c3a...", as nvidia-smi -L prints it
  std::string pci_bus_id;   // "0000:19:00.0"
  std::int64_t total_memory_bytes = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int multiprocessors = 0;
  std::int64_t l2_cache_bytes = 0;
  // The CUDA version the driver supports ("13.0"; the driver's release number, such as
  // 580.65.06, comes from NVML, which the report side loads at run time).
  std::string driver_cuda_version;
  std::string runtime_version;  // the CUDA runtime this binary runs with
  std::string cublas_version;   // cuBLASLt, "13.0.0"
};

}  // namespace moebench
