// The one place that knows which communication backends this binary holds and which compute
// backends each one can serve: `mpi` everywhere (staged through host memory when the compute
// backend's tensors live on a device), `nccl` with the cuda backend when built with NCCL.
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

// Creates a compute backend by name ("cpu", or "cuda" when built with CUDA). local_rank picks
// the device. UsageError for an unknown or unavailable backend.
std::unique_ptr<Compute> make_compute(const std::string& name, int local_rank, int blas_threads);
std::vector<std::string> compute_backends();

std::vector<std::string> comm_backends();
// The NCCL library this process runs with ("2.28.9"), empty when built without NCCL.
std::string nccl_library_version();

// UsageError unless `comm` is built into this binary and can serve compute backend `backend`
// (nccl moves device memory: it needs --backend cuda). Pure: every rank reaches the same verdict.
void check_comm_backend(const std::string& comm, const std::string& backend);

// The communicator `name` over `world`, split into the groups of `topo`. Collective over `world`.
// timeout_s bounds every wait of a backend that can hang on a dead peer (nccl).
std::unique_ptr<Communicator> make_communicator(const std::string& name, MPI_Comm world,
                                                const Topology& topo, Compute& compute,
                                                double timeout_s);

}  // namespace moebench
