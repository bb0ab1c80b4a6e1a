// The one place that knows which backends this binary holds: `cpu` always and `cuda` when built
// with a CUDA toolkit; `mpi` everywhere (staged through host memory when the compute backend's
// tensors live on a device) and `nccl` with the cuda backend when built with NCCL. Nothing else
// tests MOEBENCH_HAVE_CUDA or MOEBENCH_HAVE_NCCL.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/parallel/topology.hpp"

namespace moebench {

// How long a collective or the communicator setup may take before the run is aborted (--timeout).
constexpr double kDefaultCommTimeoutS = 600.0;

// The compute backends built into this binary, cpu first.
std::vector<ComputeBackend> compute_backends();
// Creates the compute backend; local_rank picks the device. UsageError when it is not built into
// this binary or cannot run here (no visible GPU).
std::unique_ptr<Compute> make_compute(ComputeBackend backend, int local_rank, int blas_threads);

// The communication backends built into this binary, mpi first.
std::vector<CommBackend> comm_backends();
// The NCCL library this process runs with ("2.28.9"), empty when built without NCCL.
std::string nccl_library_version();

// UsageError unless `comm` is built into this binary and can serve compute backend `backend`
// (nccl moves device memory: it needs --backend cuda). Pure: every rank reaches the same verdict.
void check_comm_backend(CommBackend comm, ComputeBackend backend);

// The communicator over `world`, split into the groups of `topo`. Collective over `world`.
// timeout_s bounds every wait of a backend that can hang on a dead peer (nccl).
std::unique_ptr<Communicator> make_communicator(CommBackend comm, MPI_Comm world,
                                                const Topology& topo, Compute& compute,
                                                double timeout_s);

}  // namespace moebench
