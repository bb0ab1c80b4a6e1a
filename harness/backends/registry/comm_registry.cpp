#include "harness/backends/registry/registry.hpp"

#include <utility>

#include "harness/backends/mpi/mpi_communicator.hpp"
#include "harness/backends/staged/staged_communicator.hpp"
#include "harness/core/error.hpp"
#if defined(MOEBENCH_HAVE_NCCL)
#include "harness/backends/cuda/cuda_compute.hpp"
#include "harness/backends/nccl/nccl_communicator.hpp"
#endif

namespace moebench {

namespace {

std::string available() {
  std::string s;
  for (const std::string& n : comm_backends()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<std::string> comm_backends() {
#if defined(MOEBENCH_HAVE_NCCL)
  return {"mpi", "nccl"};
#else
  return {"mpi"};
#endif
}

std::string nccl_library_version() {
#if defined(MOEBENCH_HAVE_NCCL)
  return nccl_version();
#else
  return "";
#endif
}

void check_comm_backend(const std::string& comm, const std::string& backend) {
  if (comm == "mpi") return;
  if (comm == "nccl") {
#if defined(MOEBENCH_HAVE_NCCL)
    if (backend == "cuda") return;
    throw UsageError(
        "--comm nccl needs --backend cuda (NCCL moves GPU memory); use --comm mpi "
        "with --backend " +
        backend);
#else
    throw UsageError(
        "--comm nccl is not built into this binary (configure with a CUDA toolkit and NCCL; "
        "available: " +
        available() + ")");
#endif
  }
  throw UsageError("--comm " + comm + ": unknown communication backend (available: " + available() +
                   ")");
}

std::unique_ptr<Communicator> make_communicator(const std::string& name, MPI_Comm world,
                                                const Topology& topo, Compute& compute,
                                                double timeout_s) {
  check_comm_backend(name, compute.name());
  if (!(timeout_s > 0)) {
    throw UsageError("--timeout " + std::to_string(timeout_s) + ": must be > 0 seconds");
  }
#if defined(MOEBENCH_HAVE_NCCL)
  if (name == "nccl") {
    auto* cuda = dynamic_cast<CudaComputeApi*>(&compute);
    MB_CHECK(cuda != nullptr, "--comm nccl with compute backend " << compute.name());
    return make_nccl_communicator(world, topo, *cuda, timeout_s);
  }
#endif
  auto mpi = make_mpi_communicator(world, topo);
  if (compute.memory_is_host()) return mpi;
  return make_staged_communicator(std::move(mpi), compute);
}

}  // namespace moebench
