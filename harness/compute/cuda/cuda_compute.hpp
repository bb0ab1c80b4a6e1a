// The `cuda` compute backend, as host C++ sees it: no CUDA header is needed to include this, so
// the factory, the report and the communication backends stay ordinary C++ (the kernels and
// library calls live in the .cu files beside it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "harness/compute/compute.hpp"

namespace moebench {

// The device a rank runs on, for the run report's meta.devices[] (plain data).
struct CudaDeviceInfo {
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

// The backend's extra surface for host code that knows it runs on CUDA (the nccl communicator,
// the report, the performance probe). make_cuda_compute returns one of these.
class CudaComputeApi : public Compute {
 public:
  bool memory_is_host() const override { return false; }
  std::string memory_domain() const override { return device_info().pci_bus_id; }
  virtual const CudaDeviceInfo& device_info() const = 0;
  virtual int device() const = 0;
  // The one stream every op of this backend is ordered on (a cudaStream_t).
  virtual void* stream_handle() const = 0;
  // --precision fp8: the linear GEMMs that ran in FP8, and those that fell back to BF16 because
  // cuBLASLt has no FP8 algorithm for their shape or alignment (counted since construction).
  virtual std::int64_t fp8_gemms() const = 0;
  virtual std::int64_t fp8_fallbacks() const = 0;
  // Attention keeps a chunk of heads' seq x seq scores in scratch, as many heads as fit this
  // budget (default 1 GiB; at least one head whatever the budget). Smaller saves memory, larger
  // batches more heads per GEMM.
  virtual void set_attention_score_budget(std::size_t bytes) = 0;
  // Raw byte copies between host and device memory, ordered on the stream and complete on
  // return (for a communicator that stages device buffers through the host).
  virtual void copy_to_host(const void* device_src, void* host_dst, std::size_t bytes) = 0;
  virtual void copy_to_device(const void* host_src, void* device_dst, std::size_t bytes) = 0;
};

// The device local_rank runs on: local_rank modulo the visible devices (CUDA_VISIBLE_DEVICES is
// applied by the runtime before that). UsageError when no device is visible.
int cuda_device_for_rank(int local_rank);
CudaDeviceInfo cuda_device_info(int ordinal);

// Selects the device for local_rank, makes it current, creates the stream and library handles.
std::unique_ptr<Compute> make_cuda_compute(int local_rank);

// The roofline reference: seconds per C = A B of n x n x n BF16 matrices (FP32 accumulation)
// through the backend's own GEMM path, the mean over `iterations` after `warmup` untimed calls,
// timed with CUDA events on the backend's stream. `compute` must be a cuda backend.
double time_bf16_gemm_seconds(Compute& compute, std::int64_t n, int warmup, int iterations);

}  // namespace moebench
