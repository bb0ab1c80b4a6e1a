#include <string>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/registry/device_plugin.hpp"
#include "harness/backends/registry/registry.hpp"

namespace moebench {

std::vector<ComputeBackend> compute_backends() {
#if defined(MOEBENCH_HAVE_CUDA)
  return {ComputeBackend::cpu, ComputeBackend::cuda};
#else
  return {ComputeBackend::cpu};
#endif
}

std::unique_ptr<Compute> make_compute(ComputeBackend backend, [[maybe_unused]] int local_rank,
                                      int blas_threads) {
  switch (backend) {
    case ComputeBackend::cpu:
      return std::make_unique<CpuCompute>(blas_threads);
    case ComputeBackend::cuda:
#if defined(MOEBENCH_HAVE_CUDA)
      return device_plugin().make_cuda_compute(local_rank);
#else
      throw UsageError(
          "--backend cuda is not built into this binary (configure with a CUDA toolkit); "
          "available: cpu");
#endif
  }
  throw UsageError("no such compute backend");
}

}  // namespace moebench
