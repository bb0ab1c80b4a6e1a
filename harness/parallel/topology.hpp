// Where a rank sits: its groups and its node. A pure function of (world, rank, ep, node layout),
// so it is unit-tested without MPI.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace moebench {

struct Topology {
  int world = 1;
  int rank = 0;
  int ep = 1;        // expert-parallel group size
  int ep_rank = 0;   // rank inside the expert-parallel group (rank % ep)
  int ep_group = 0;  // which expert-parallel group (rank / ep)
  int edp = 1;       // expert-data-parallel group size (world / ep)
  int edp_rank = 0;  // rank inside it (rank / ep)
  int nodes = 1;
  int node = 0;
  int ranks_per_node = 1;  // ranks on this rank's node
  int local_rank = 0;

  int local_experts(int experts) const { return experts / ep; }
  int first_local_expert(int experts) const { return ep_rank * local_experts(experts); }
};

// Checks world % ep == 0 (UsageError naming valid EP values otherwise) and builds the topology.
// node/local_rank/ranks_per_node/nodes come from the caller (MPI shared-memory split or
// --ranks-per-node).
Topology make_topology(int world, int rank, int ep, int node, int nodes, int local_rank,
                       int ranks_per_node);

// Emulated nodes: with K ranks per node, rank r is on node r / K (world % K == 0 required).
Topology make_topology_emulated(int world, int rank, int ep, int ranks_per_node_override);

// One process holding everything (the --verify reference, the probe, tests).
inline Topology single_process_topology() {
  return Topology{};
}

nlohmann::json to_json(const Topology& t);

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
