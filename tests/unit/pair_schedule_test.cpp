// The link test's rounds: every rank in at most one pair a round, every pair exactly once, and the
// round counts that make --level node the quick one.
#include "harness/parallel/pair_schedule.hpp"

#include <doctest/doctest.h>

#include <set>
#include <utility>

namespace moebench {
namespace {

// Each round is an involution without fixed points (partners agree); returns every pair seen.
std::multiset<std::pair<int, int>> pairs_of(const std::vector<PairRound>& rounds, int n) {
  std::multiset<std::pair<int, int>> seen;
  for (const PairRound& round : rounds) {
    REQUIRE(static_cast<int>(round.size()) == n);
    for (int r = 0; r < n; ++r) {
      const int p = round[static_cast<std::size_t>(r)];
      if (p < 0) continue;
      REQUIRE(p != r);
      REQUIRE(round[static_cast<std::size_t>(p)] == r);
      if (r < p) seen.insert({r, p});
    }
  }
  return seen;
}

TEST_CASE("all pairs: every pair once in n - 1 rounds (even n) or n rounds (odd n)") {
  for (int n : {2, 3, 4, 5, 8, 9, 16, 33}) {
    CAPTURE(n);
    const std::vector<PairRound> rounds = all_pairs_rounds(n);
    CHECK(static_cast<int>(rounds.size()) == (n % 2 == 0 ? n - 1 : n));
    const auto seen = pairs_of(rounds, n);
    CHECK(static_cast<int>(seen.size()) == n * (n - 1) / 2);
    CHECK(std::set<std::pair<int, int>>(seen.begin(), seen.end()).size() == seen.size());
    if (n % 2 == 0) {  // nobody idles
      for (const PairRound& round : rounds) {
        for (int p : round) CHECK(p >= 0);
      }
    }
  }
  CHECK(all_pairs_rounds(1).empty());
  CHECK(all_pairs_rounds(1024).size() == 1023);
}

TEST_CASE("node level: node pairs rank by rank, then every pair within each node") {
  const int nodes = 4, per = 3, n = nodes * per;
  const std::vector<PairRound> rounds = node_level_rounds(nodes, per);
  CHECK(rounds.size() == 3 + 3);  // 4 nodes: 3 rounds; 3 ranks a node: 3 rounds (one idle)
  const auto seen = pairs_of(rounds, n);
  for (const auto& [a, b] : seen) {
    const bool same_node = a / per == b / per;
    CHECK((same_node || a % per == b % per));  // across nodes: the same local rank only
  }
  // Every pair of nodes is met by every local rank, and every pair within a node once.
  CHECK(seen.size() == 6 * per + nodes * 3);
  CHECK(seen.count({0, 3}) == 1);
  CHECK(seen.count({0, 4}) == 0);
  CHECK(seen.count({4, 5}) == 1);
  // 1,024 GPUs of 8 a node: minutes, not the 1,023 rounds of every pair.
  CHECK(node_level_rounds(128, 8).size() == 127 + 7);
  CHECK(node_level_rounds(1, 4).size() == 3);
}

}  // namespace
}  // namespace moebench
