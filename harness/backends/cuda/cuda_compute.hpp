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

// The backend's extra surface for host code that knows it runs on CUDA (the nccl communicator,
// the report, the performance probe). make_cuda_compute returns one of these.
class CudaComputeApi : public Compute {
 public:
  bool memory_is_host() const override { return false; }
  std::string memory_domain() const override { return device_info()->pci_bus_id; }
  virtual int device() const = 0;
  // The one stream every op of this backend is ordered on (a cudaStream_t).
  virtual void* stream_handle() const = 0;
  // Attention keeps a chunk of heads' seq x seq scores in scratch, as many heads as fit this
  // budget (default 1 GiB; at least one head whatever the budget). Smaller saves memory, larger
  // batches more heads per GEMM.
  virtual void set_attention_score_budget(std::size_t bytes) = 0;
  // The GEMM plans' algorithm choices since construction: cuBLASLt heuristic queries, and new
  // shapes that reused their size class's algorithm instead (gemm.cu).
  virtual std::int64_t gemm_heuristic_queries() const = 0;
  virtual std::int64_t gemm_algo_reuses() const = 0;
};

// The device local_rank runs on: local_rank modulo the visible devices (CUDA_VISIBLE_DEVICES is
// applied by the runtime before that). UsageError when no device is visible.
int cuda_device_for_rank(int local_rank);
DeviceInfo cuda_device_info(int ordinal);

// Selects the device for local_rank, makes it current, creates the stream and library handles.
std::unique_ptr<Compute> make_cuda_compute(int local_rank);

}  // namespace moebench
