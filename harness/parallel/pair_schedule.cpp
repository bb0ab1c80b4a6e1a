#include "harness/parallel/pair_schedule.hpp"

#include "harness/core/error.hpp"

namespace moebench {

std::vector<PairRound> all_pairs_rounds(int n) {
  MB_CHECK(n >= 1, "a pair schedule of " << n << " ranks");
  // The circle method on m = n (even) or n + 1 (odd: the extra seat is the idle one): seat 0
  // stays, the others rotate; in round k seat i faces seat m - 1 - i.
  const int m = n % 2 == 0 ? n : n + 1;
  std::vector<PairRound> rounds;
  if (n == 1) return rounds;  // nobody to pair with
  for (int k = 0; k < m - 1; ++k) {
    PairRound round(static_cast<std::size_t>(n), -1);
    const auto at = [&](int seat) { return seat == 0 ? 0 : 1 + (seat - 1 + k) % (m - 1); };
    for (int i = 0; i < m / 2; ++i) {
      const int a = at(i), b = at(m - 1 - i);
      if (a >= n || b >= n) continue;  // facing the empty seat: idle
      round[static_cast<std::size_t>(a)] = b;
      round[static_cast<std::size_t>(b)] = a;
    }
    rounds.push_back(std::move(round));
  }
  return rounds;
}

std::vector<PairRound> node_level_rounds(int nodes, int ranks_per_node) {
  MB_CHECK(nodes >= 1 && ranks_per_node >= 1,
           "a node-level schedule of " << nodes << " nodes of " << ranks_per_node << " ranks");
  const int n = nodes * ranks_per_node;
  std::vector<PairRound> rounds;
  if (nodes > 1) {
    for (const PairRound& by_node : all_pairs_rounds(nodes)) {
      PairRound round(static_cast<std::size_t>(n), -1);
      for (int node = 0; node < nodes; ++node) {
        const int other = by_node[static_cast<std::size_t>(node)];
        if (other < 0) continue;
        for (int l = 0; l < ranks_per_node; ++l) {
          round[static_cast<std::size_t>(node * ranks_per_node + l)] = other * ranks_per_node + l;
        }
      }
      rounds.push_back(std::move(round));
    }
  }
  if (ranks_per_node > 1) {
    for (const PairRound& local : all_pairs_rounds(ranks_per_node)) {
      PairRound round(static_cast<std::size_t>(n), -1);
      for (int node = 0; node < nodes; ++node) {
        for (int l = 0; l < ranks_per_node; ++l) {
          const int other = local[static_cast<std::size_t>(l)];
          if (other >= 0) {
            round[static_cast<std::size_t>(node * ranks_per_node + l)] =
                node * ranks_per_node + other;
          }
        }
      }
      rounds.push_back(std::move(round));
    }
  }
  return rounds;
}

}  // namespace moebench
