// The parallel grid against Megatron-Core's RankGenerator (order "tp-cp-ep-dp-pp", first
// dimension fastest): the group lists below are written out by hand from its rules, not computed.
#include "harness/parallel/grid.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"

using namespace moebench;

namespace {

using Lists = std::vector<std::vector<int>>;

ParallelGrid make(int world, int tp, int cp, int ep, int pp) {
  return ParallelGrid(world, GridShape{tp, cp, ep, pp});
}

Lists singletons(int world) {
  Lists out;
  for (int r = 0; r < world; ++r) out.push_back({r});
  return out;
}

// Every rank's info agrees with the lists: its index in the one group holding it, or none.
void check_membership(const ParallelGrid& g, Group kind) {
  const Lists all = g.groups(kind);
  for (int r = 0; r < g.world(); ++r) {
    CAPTURE(r);
    int holders = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      for (std::size_t j = 0; j < all[i].size(); ++j) {
        if (all[i][j] != r) continue;
        ++holders;
        CHECK(g.group_index(kind, r) == static_cast<int>(i));
        CHECK(g.info(kind, r).rank == static_cast<int>(j));
        CHECK(g.info(kind, r).size == static_cast<int>(all[i].size()));
      }
    }
    CHECK(holders <= 1);
    if (holders == 0) CHECK(!g.info(kind, r).member());
  }
}

}  // namespace

TEST_CASE("grid: world 8, pp 2, ep 2 (dp 4, edp 2)") {
  const ParallelGrid g = make(8, 1, 1, 2, 2);
  CHECK(g.dp() == 4);
  CHECK(g.edp() == 2);
  CHECK(g.groups(Group::world) == Lists{{0, 1, 2, 3, 4, 5, 6, 7}});
  CHECK(g.groups(Group::data) == Lists{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(g.groups(Group::pipeline) == Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(g.groups(Group::embedding) == Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(g.groups(Group::expert) == Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(g.groups(Group::expert_data) == Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(g.groups(Group::tensor) == singletons(8));
  CHECK(g.groups(Group::context) == singletons(8));
  for (Group k : kGroups) check_membership(g, k);
}

TEST_CASE("grid: world 12, pp 3, ep 2: the embedding group is the first and last stage") {
  const ParallelGrid g = make(12, 1, 1, 2, 3);
  CHECK(g.groups(Group::data) == Lists{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}});
  CHECK(g.groups(Group::pipeline) == Lists{{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}});
  CHECK(g.groups(Group::embedding) == Lists{{0, 8}, {1, 9}, {2, 10}, {3, 11}});
  CHECK(g.groups(Group::expert) == Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}});
  CHECK(g.groups(Group::expert_data) == Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}});
  // A middle stage is in no embedding group.
  CHECK(g.group_index(Group::embedding, 5) == -1);
  CHECK(g.members(Group::embedding, 5).empty());
  CHECK(g.info(Group::embedding, 5).size == 0);
  CHECK(g.info(Group::embedding, 9).rank == 1);
  for (Group k : kGroups) check_membership(g, k);
}

TEST_CASE("grid: world 8, pp 1, ep 4: today's layout, data parallel over the world") {
  const ParallelGrid g = make(8, 1, 1, 4, 1);
  CHECK(g.dp() == 8);
  CHECK(g.edp() == 2);
  CHECK(g.groups(Group::data) == Lists{{0, 1, 2, 3, 4, 5, 6, 7}});
  CHECK(g.groups(Group::pipeline) == singletons(8));
  CHECK(g.groups(Group::embedding) == singletons(8));
  CHECK(g.groups(Group::expert) == Lists{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(g.groups(Group::expert_data) == Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  for (Group k : kGroups) check_membership(g, k);
}

TEST_CASE(
    "grid: tp and cp are part of the map (world 8, tp 2, pp 2; world 16, tp 2 cp 2 pp 2 ep 2)") {
  const ParallelGrid a = make(8, 2, 1, 1, 2);
  CHECK(a.groups(Group::tensor) == Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(a.groups(Group::data) == Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(a.groups(Group::pipeline) == Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(a.groups(Group::expert_data) == Lists{{0, 1, 2, 3}, {4, 5, 6, 7}});
  const ParallelGrid b = make(16, 2, 2, 2, 2);
  CHECK(b.dp() == 2);
  CHECK(b.edp() == 4);
  CHECK(b.groups(Group::context) ==
        Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(b.groups(Group::data) ==
        Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  CHECK(b.groups(Group::expert) ==
        Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(b.groups(Group::expert_data) ==
        Lists{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
  for (Group k : kGroups) {
    check_membership(a, k);
    check_membership(b, k);
  }
}

TEST_CASE("grid: sizes that do not fit are usage errors naming the valid values") {
  auto message = [](int world, int ep, int pp) {
    try {
      make(world, 1, 1, ep, pp);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message(6, 4, 1) == "--ep 4 does not divide the 6 ranks; valid: 1, 2, 3, 6");
  CHECK(message(8, 1, 3) == "--pp 3 does not divide the 8 ranks; valid: 1, 2, 4, 8");
  CHECK(message(8, 3, 2) ==
        "--ep 3 does not divide the 4 ranks of a pipeline stage (8 / pp 2); valid: 1, 2, 4");
  CHECK(message(4, 0, 1) == "--ep must be >= 1, got 0");
  CHECK(message(1, 1, 1) == "no error");
}

TEST_CASE("grid: the default is one rank; to_json names the order and every size") {
  const ParallelGrid one;
  for (Group k : kGroups) CHECK(one.groups(k) == Lists{{0}});
  const nlohmann::json j = to_json(make(8, 1, 1, 2, 2));
  CHECK(j.at("order") == "tp-cp-ep-dp-pp");
  CHECK(j.at("dp") == 4);
  CHECK(j.at("edp") == 2);
  CHECK(j.at("pp") == 2);
  CHECK(describe(make(8, 1, 1, 2, 2)) == "tp 1, cp 1, ep 2, dp 4, pp 2 (edp 2)");
  CHECK(std::string(group_name(Group::expert_data)) == "expert_data");
}
