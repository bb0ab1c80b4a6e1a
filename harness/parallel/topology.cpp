#include "harness/parallel/topology.hpp"

#include <map>
#include <string>
#include <utility>

#include "harness/core/error.hpp"
#include "harness/core/human.hpp"

namespace moebench {

Topology make_topology(const ParallelGrid& grid, int rank, int node, int nodes, int local_rank,
                       int ranks_per_node) {
  MB_CHECK(rank >= 0 && rank < grid.world(), "rank " << rank << " of " << grid.world());
  MB_CHECK(nodes >= 1 && node >= 0 && node < nodes, "node " << node << " of " << nodes);
  MB_CHECK(ranks_per_node >= 1 && local_rank >= 0 && local_rank < ranks_per_node,
           "local rank " << local_rank << " of " << ranks_per_node);
  Topology t;
  t.grid = grid;
  t.rank = rank;
  t.nodes = nodes;
  t.node = node;
  t.ranks_per_node = ranks_per_node;
  t.local_rank = local_rank;
  return t;
}

Topology make_topology_emulated(const ParallelGrid& grid, int rank, int ranks_per_node_override) {
  const int k = ranks_per_node_override;
  const int world = grid.world();
  if (k < 1 || world % k != 0) {
    throw UsageError("--ranks-per-node " + std::to_string(k) + " does not divide the " +
                     std::to_string(world) + " ranks; valid: " + common_divisors(world, {world}));
  }
  return make_topology(grid, rank, rank / k, world / k, rank % k, k);
}

std::string shared_gpu_problem(const std::vector<RankGpu>& ranks) {
  std::map<std::pair<std::string, std::string>, std::size_t> first_rank;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto [it, fresh] = first_rank.emplace(std::pair(ranks[r].host, ranks[r].pci_bus_id), r);
    if (fresh) continue;
    return "--comm nccl needs one GPU per rank: ranks " + std::to_string(it->second) + " and " +
           std::to_string(r) + " on host " + ranks[r].host + " share GPU " + ranks[r].pci_bus_id +
           "; use --comm mpi to share a GPU (staged through host memory)";
  }
  return "";
}

}  // namespace moebench
