// The one place that knows which compute backends this binary holds.
#include <sstream>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/registry/registry.hpp"
#if defined(MOEBENCH_HAVE_CUDA)
#include "harness/backends/cuda/cuda_compute.hpp"
#endif

namespace moebench {

namespace {

std::string available() {
  std::ostringstream os;
  const std::vector<std::string> names = compute_backends();
  for (std::size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << names[i];
  return os.str();
}

}  // namespace

std::vector<std::string> compute_backends() {
#if defined(MOEBENCH_HAVE_CUDA)
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<Compute> make_compute(const std::string& name, [[maybe_unused]] int local_rank,
                                      int blas_threads) {
  if (name == "cpu") return std::make_unique<CpuCompute>(blas_threads);
  if (name == "cuda") {
#if defined(MOEBENCH_HAVE_CUDA)
    return make_cuda_compute(local_rank);
#else
    throw UsageError(
        "backend 'cuda' is not built into this binary (configure with a CUDA toolkit; available: " +
        available() + ")");
#endif
  }
  throw UsageError("unknown compute backend '" + name + "' (available: " + available() + ")");
}

}  // namespace moebench
