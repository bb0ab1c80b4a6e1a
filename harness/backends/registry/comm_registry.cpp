#include <string>
#include <utility>

#include "harness/backends/mpi/mpi_communicator.hpp"
#include "harness/backends/registry/device_plugin.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/backends/staged/staged_communicator.hpp"
#include "harness/core/error.hpp"

namespace moebench {

std::vector<CommBackend> comm_backends() {
#if defined(MOEBENCH_HAVE_NCCL)
  return {CommBackend::mpi, CommBackend::nccl};
#else
  return {CommBackend::mpi};
#endif
}

std::string nccl_library_version() {
#if defined(MOEBENCH_HAVE_NCCL)
  return device_plugin().nccl_version();
#else
  return "";
#endif
}

void check_comm_backend(CommBackend comm, ComputeBackend backend) {
  switch (comm) {
    case CommBackend::mpi:
      return;
    case CommBackend::nccl:
#if defined(MOEBENCH_HAVE_NCCL)
      if (backend == ComputeBackend::cuda) return;
      throw UsageError(
          "--comm nccl needs --backend cuda (NCCL moves GPU memory); use --comm mpi with "
          "--backend " +
          std::string(to_string(backend)));
#else
      throw UsageError(
          "--comm nccl is not built into this binary (configure with a CUDA toolkit and NCCL; "
          "available: mpi)");
#endif
    case CommBackend::local:
      break;
  }
  throw UsageError(std::string("--comm ") + to_string(comm) +
                   ": not a communication backend of moebench run (valid: mpi, nccl)");
}

std::unique_ptr<Communicator> make_communicator(CommBackend comm, MPI_Comm world,
                                                const Topology& topo, Compute& compute,
                                                double timeout_s) {
  check_comm_backend(comm, compute.kind());
  if (!(timeout_s > 0)) {
    throw UsageError("--timeout " + std::to_string(timeout_s) + ": must be > 0 seconds");
  }
#if defined(MOEBENCH_HAVE_NCCL)
  if (comm == CommBackend::nccl) {
    // check_comm_backend made sure of the cuda backend.
    return device_plugin().make_nccl_communicator(world, topo, compute, timeout_s);
  }
#endif
  auto mpi = make_mpi_communicator(world, topo, timeout_s);
  if (compute.memory_is_host()) return mpi;
  return make_staged_communicator(std::move(mpi), compute);
}

}  // namespace moebench
