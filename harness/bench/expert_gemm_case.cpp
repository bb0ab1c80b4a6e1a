#include "harness/bench/expert_gemm_case.hpp"

namespace moebench {

ExpertGemmCase::ExpertGemmCase(Compute& c, const GroupedGemmCase& g, std::uint64_t seed)
    : c_(c),
      g_(g),
      a_(c.alloc(g.count * g.a_rows(), g.a_cols())),
      b_(c.alloc(g.count * g.b_rows(), g.b_cols())),
      out_(c.alloc(g.count * g.m, g.n)) {
  c.fill_random(a_, seed, 1, 1.0f);
  c.fill_random(b_, seed, 2, 1.0f);
  for (std::int64_t i = 0; i < g.count; ++i) {
    problems_.push_back({a_.view().row_slice(i * g.a_rows(), g.a_rows()),
                         b_.view().row_slice(i * g.b_rows(), g.b_rows()),
                         out_.view().row_slice(i * g.m, g.m)});
  }
}

void ExpertGemmCase::run() {
  c_.linear_grouped_gemm(g_.trans_a, g_.trans_b, 1.0f, problems_, 0.0f);
}

}  // namespace moebench
