// Where a rank sits: its place in the parallel grid and its node. A pure function of (grid, rank,
// node layout), so it is unit-tested without MPI.
#pragma once

#include <string>
#include <vector>

#include "harness/parallel/grid.hpp"

namespace moebench {

struct Topology {
  ParallelGrid grid;
  int rank = 0;
  int nodes = 1;
  int node = 0;
  int ranks_per_node = 1;  // ranks on this rank's node
  int local_rank = 0;

  int world() const { return grid.world(); }
  GroupInfo group(Group g) const { return grid.info(g, rank); }
  // The routed experts this rank holds: a contiguous block, by its place in the expert group.
  int local_experts(int experts) const { return experts / grid.ep(); }
  int first_local_expert(int experts) const {
    return group(Group::expert).rank * local_experts(experts);
  }
};

// node/local_rank/ranks_per_node/nodes come from the caller (MPI shared-memory split or
// --ranks-per-node).
Topology make_topology(const ParallelGrid& grid, int rank, int node, int nodes, int local_rank,
                       int ranks_per_node);

// Emulated nodes: with K ranks per node, rank r is on node r / K (world % K == 0 required, a
// UsageError naming the valid K otherwise).
Topology make_topology_emulated(const ParallelGrid& grid, int rank, int ranks_per_node_override);

// One process holding everything (the --verify reference, the probe, tests).
inline Topology single_process_topology() {
  return Topology{};
}

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
