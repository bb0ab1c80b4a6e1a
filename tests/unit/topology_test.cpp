#include "harness/parallel/topology.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"

using namespace moebench;

TEST_CASE("topology: expert groups are consecutive ranks, expert-data groups stride ep") {
  const Topology t = make_topology(8, 5, 4, 0, 1, 5, 8);
  CHECK(t.ep_rank == 1);
  CHECK(t.ep_group == 1);
  CHECK(t.edp == 2);
  CHECK(t.edp_rank == 1);
  CHECK(t.local_experts(256) == 64);
  CHECK(t.first_local_expert(256) == 64);
}

TEST_CASE("topology: every rank lands in exactly one (ep_group, ep_rank) cell") {
  const int world = 12;
  const int ep = 3;
  std::vector<int> seen(world, 0);
  for (int r = 0; r < world; ++r) {
    const Topology t = make_topology(world, r, ep, 0, 1, r, world);
    CHECK(t.ep_group * ep + t.ep_rank == r);
    CHECK(t.edp_rank == t.ep_group);
    ++seen[t.ep_group * ep + t.ep_rank];
  }
  for (int count : seen) CHECK(count == 1);
}

TEST_CASE("topology: ep that does not divide the world is a usage error listing divisors") {
  CHECK_THROWS_AS(make_topology(6, 0, 4, 0, 1, 0, 6), UsageError);
  try {
    make_topology(6, 0, 4, 0, 1, 0, 6);
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) == "--ep 4 does not divide the 6 ranks; valid: 1, 2, 3, 6");
  }
  CHECK_THROWS_AS(make_topology(4, 0, 0, 0, 1, 0, 4), UsageError);
  CHECK_THROWS_AS(make_topology(4, 0, 8, 0, 1, 0, 4), UsageError);
}

TEST_CASE("topology: emulated nodes of K ranks") {
  const Topology t = make_topology_emulated(8, 5, 2, 4);
  CHECK(t.node == 1);
  CHECK(t.nodes == 2);
  CHECK(t.local_rank == 1);
  CHECK(t.ranks_per_node == 4);
  CHECK(t.ep_rank == 1);
  CHECK_THROWS_AS(make_topology_emulated(8, 0, 1, 3), UsageError);
  CHECK_THROWS_AS(make_topology_emulated(8, 0, 1, 0), UsageError);
}

TEST_CASE("topology: json names every field") {
  const nlohmann::json j = to_json(make_topology_emulated(4, 3, 2, 2));
  CHECK(j.at("world") == 4);
  CHECK(j.at("rank") == 3);
  CHECK(j.at("ep_rank") == 1);
  CHECK(j.at("ep_group") == 1);
  CHECK(j.at("node") == 1);
  CHECK(j.at("nodes") == 2);
  CHECK(j.at("local_rank") == 1);
  CHECK(j.size() == 11);
}
