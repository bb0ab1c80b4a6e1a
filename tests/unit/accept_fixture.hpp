// Ranks for accept's judgement tests: `n` H100 ranks, two a node (hosts "a", then "b").
#pragma once

#include <vector>

#include "harness/cli/accept_checks.hpp"

namespace moebench {

inline std::vector<AcceptRank> accept_ranks(int n) {
  std::vector<AcceptRank> r;
  for (int i = 0; i < n; ++i) r.push_back({i, i / 2, i < 2 ? "a" : "b", "H100", "s"});
  return r;
}

}  // namespace moebench
