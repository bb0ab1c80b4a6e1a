// One grouped GEMM call of the experts, with its operands allocated and filled at random: the
// experts' A and B stacked by rows as the training step keeps them (one expert's rows
// contiguous), each problem a slice. What `moebench bench` times and `moebench accept`'s expert
// GEMM probe runs.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/bench/bench.hpp"
#include "harness/compute/compute.hpp"

namespace moebench {

class ExpertGemmCase {
 public:
  ExpertGemmCase(Compute& c, const GroupedGemmCase& g, std::uint64_t seed);
  // The call, through linear_grouped_gemm (the step's precision, --precision).
  void run();
  Mat output() const { return out_.view(); }

 private:
  Compute& c_;
  GroupedGemmCase g_;
  Tensor a_, b_, out_;
  std::vector<GemmProblem> problems_;
};

}  // namespace moebench
