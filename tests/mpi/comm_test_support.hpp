// What the communicator test programs (tests/mpi, tests/gpu) share: a per-rank pass/fail
// counter, the world ranks of a group, and the asymmetric row counts of the all-to-all pattern.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/comm/communicator.hpp"
#include "harness/parallel/topology.hpp"

namespace moebench::test {

struct Checker {
  int rank = 0;
  int passed = 0;
  int failed = 0;
  void check(bool ok, const std::string& what) {
    if (ok) {
      ++passed;
    } else {
      ++failed;
      std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
    }
  }
};

// World ranks of the members of this rank's group, in group-rank order.
inline std::vector<int> members(Group g, const Topology& t) {
  std::vector<int> m;
  switch (g) {
    case Group::world:
      for (int r = 0; r < t.world; ++r) m.push_back(r);
      break;
    case Group::expert:
      for (int j = 0; j < t.ep; ++j) m.push_back(t.ep_group * t.ep + j);
      break;
    case Group::expert_data:
      for (int j = 0; j < t.edp; ++j) m.push_back(t.ep_rank + j * t.ep);
      break;
  }
  return m;
}

// Rows group rank s sends to group rank d (zero for some pairs, asymmetric in s and d).
inline std::int64_t rows_between(int s, int d) {
  return (2 * s + d) % 3;
}

}  // namespace moebench::test
