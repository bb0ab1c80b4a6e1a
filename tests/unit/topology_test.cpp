#include "harness/parallel/topology.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

using namespace moebench;

namespace {
ParallelGrid grid(int world, int ep, int pp = 1) {
  return ParallelGrid(world, GridShape{1, 1, ep, pp});
}
}  // namespace

TEST_CASE("topology: a rank's groups and experts come from the grid") {
  const Topology t = make_topology(grid(8, 4), 5, 0, 1, 5, 8);
  CHECK(t.world() == 8);
  CHECK(t.group(Group::expert).rank == 1);
  CHECK(t.group(Group::expert).size == 4);
  CHECK(t.group(Group::expert_data).rank == 1);
  CHECK(t.group(Group::expert_data).size == 2);
  CHECK(t.group(Group::data).rank == 5);
  CHECK(t.local_experts(256) == 64);
  CHECK(t.first_local_expert(256) == 64);
}

TEST_CASE("topology: with pipeline stages the experts are split within a stage") {
  // World 8, pp 2, ep 2: stage 1 is ranks 4..7; rank 7 is expert rank 1 of {6, 7}.
  const Topology t = make_topology(grid(8, 2, 2), 7, 0, 1, 7, 8);
  CHECK(t.group(Group::pipeline).rank == 1);
  CHECK(t.group(Group::data).rank == 3);
  CHECK(t.first_local_expert(16) == 8);
}

TEST_CASE("topology: emulated nodes of K ranks") {
  const Topology t = make_topology_emulated(grid(8, 2), 5, 4);
  CHECK(t.node == 1);
  CHECK(t.nodes == 2);
  CHECK(t.local_rank == 1);
  CHECK(t.ranks_per_node == 4);
  CHECK(t.group(Group::expert).rank == 1);
  CHECK_THROWS_AS(make_topology_emulated(grid(8, 1), 0, 3), UsageError);
  CHECK_THROWS_AS(make_topology_emulated(grid(8, 1), 0, 0), UsageError);
  try {
    make_topology_emulated(grid(6, 1), 0, 4);
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) ==
          "--ranks-per-node 4 does not divide the 6 ranks; valid: 1, 2, 3, 6");
  }
}

TEST_CASE("topology: the single process holds every group alone") {
  const Topology t = single_process_topology();
  for (Group g : kGroups) {
    CHECK(t.group(g).rank == 0);
    CHECK(t.group(g).size == 1);
  }
}

TEST_CASE("shared_gpu_problem names the first two ranks on one GPU of one host") {
  CHECK(shared_gpu_problem({}).empty());
  // The same bus id on two hosts is two GPUs.
  CHECK(shared_gpu_problem({{"a", "0000:19:00.0"}, {"b", "0000:19:00.0"}, {"a", "0000:3b:00.0"}})
            .empty());
  const std::string m = shared_gpu_problem(
      {{"a", "0000:19:00.0"}, {"a", "0000:3b:00.0"}, {"b", "0000:19:00.0"}, {"a", "0000:3b:00.0"}});
  CHECK(m ==
        "--comm nccl needs one GPU per rank: ranks 1 and 3 on host a share GPU 0000:3b:00.0; use "
        "--comm mpi to share a GPU (staged through host memory)");
}
