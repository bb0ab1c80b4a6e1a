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
#include "harness/runtime/topology.hpp"

namespace moebench {

// How long a collective or the communicator setup may take before the run is aborted (--timeout).
constexpr double kDefaultCommTimeoutS = 600.0;

std::vector<std::string> comm_backends();

// UsageError unless `comm` is built into this binary and can serve compute backend `backend`
// (nccl moves device memory: it needs --backend cuda). Pure: every rank reaches the same verdict.
void check_comm_backend(const std::string& comm, const std::string& backend);

// The communicator `name` over `world`, split into the groups of `topo`. Collective over `world`.
// timeout_s bounds every wait of a backend that can hang on a dead peer (nccl).
std::unique_ptr<Communicator> make_communicator(const std::string& name, MPI_Comm world,
                                                const Topology& topo, Compute& compute,
                                                double timeout_s);

// One rank's GPU as NCCL identifies it.
struct RankGpu {
  std::string host;
  std::string pci_bus_id;
};

// Empty when every rank has a GPU of its own; otherwise the UsageError line naming the first two
// ranks (in rank order) that share one. NCCL does not support two ranks of a communicator on one
// GPU (ncclInvalidUsage, or a hang), so this is checked before its setup.
std::string shared_gpu_problem(const std::vector<RankGpu>& ranks);

}  // namespace moebench
