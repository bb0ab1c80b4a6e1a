// What the communicator test programs (tests/mpi, tests/gpu) share: a per-rank pass/fail
// counter, the world ranks of a group, and the asymmetric row counts of the all-to-all pattern.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/comm/communicator.hpp"
#include "harness/parallel/topology.hpp"
#include "harness/runtime/mpi_runtime.hpp"

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

// World ranks of the members of this rank's group, in group-rank order, from the layout's rules
// written out here (tp = cp = 1; pipeline stages of world / pp consecutive ranks, EP consecutive
// ranks inside a stage), not from the grid under test. Empty where the rank is in none.
inline std::vector<int> members(Group g, const Topology& t) {
  const int world = t.world(), pp = t.grid.pp(), ep = t.grid.ep(), r = t.rank;
  const int stage_size = world / pp, stage = r / stage_size, local = r % stage_size;
  std::vector<int> m;
  switch (g) {
    case Group::world:
      for (int j = 0; j < world; ++j) m.push_back(j);
      break;
    case Group::tensor:
    case Group::context:
      m.push_back(r);
      break;
    case Group::data:
      for (int j = 0; j < stage_size; ++j) m.push_back(stage * stage_size + j);
      break;
    case Group::pipeline:
      for (int k = 0; k < pp; ++k) m.push_back(local + k * stage_size);
      break;
    case Group::embedding:
      if (pp == 1) {
        m.push_back(r);
      } else if (stage == 0 || stage == pp - 1) {
        m = {local, local + (pp - 1) * stage_size};
      }
      break;
    case Group::expert:
      for (int j = 0; j < ep; ++j) m.push_back(stage * stage_size + local / ep * ep + j);
      break;
    case Group::expert_data:
      for (int j = 0; j < stage_size / ep; ++j)
        m.push_back(stage * stage_size + local % ep + j * ep);
      break;
    case Group::count:
      break;
  }
  return m;
}

// Rows group rank s sends to group rank d (zero for some pairs, asymmetric in s and d).
inline std::int64_t rows_between(int s, int d) {
  return (2 * s + d) % 3;
}

// Every rank's checks summed; rank 0 prints "[label: ]N passed, M failed". The exit status: 0 only
// when no rank failed a check.
inline int summarize(const MpiRuntime& rt, const Checker& ck, const std::string& label = "") {
  const long long failed = rt.allreduce_sum(static_cast<long long>(ck.failed));
  const long long passed = rt.allreduce_sum(static_cast<long long>(ck.passed));
  if (rt.rank() == 0) {
    std::printf("%s%lld passed, %lld failed\n", label.empty() ? "" : (label + ": ").c_str(), passed,
                failed);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace moebench::test
