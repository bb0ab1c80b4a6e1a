// One expert grouped GEMM case on the cpu backend: each expert's output is its own slice's
// product (checked against one plain GEMM on the same slices), and the same seed gives the same
// operands.
#include "harness/bench/expert_gemm_case.hpp"

#include <vector>

#include <doctest/doctest.h>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "tests/unit/cpu_fixture.hpp"

namespace moebench {
namespace {

TEST_CASE("expert gemm case: every expert's slice multiplied, the same for a seed") {
  CpuCompute c(1);
  // forward_down and wgrad_up of 3 experts of 8 rows, h 16, f 12 (a transposed A).
  for (const GroupedGemmCase& g :
       {expert_gemm_cases(3, 8, 16, 12)[1], expert_gemm_cases(3, 8, 16, 12)[5]}) {
    CAPTURE(g.name);
    ExpertGemmCase x(c, g, 5), y(c, g, 5);
    x.run();
    y.run();
    const std::vector<float> out = test::read(c, x.output());
    REQUIRE(out.size() == static_cast<std::size_t>(g.count * g.m * g.n));
    CHECK(out == test::read(c, y.output()));
    // Expert 1's output against one GEMM of its operands, regenerated with the same seed and
    // streams (1e-5 relative: the same BLAS sums, perhaps in another order).
    Tensor a = c.alloc(g.count * g.a_rows(), g.a_cols()),
           b = c.alloc(g.count * g.b_rows(), g.b_cols()), ref = c.alloc(g.m, g.n);
    c.fill_random(a, 5, 1, 1.0f);
    c.fill_random(b, 5, 2, 1.0f);
    c.gemm(g.trans_a, g.trans_b, 1.0f, a.view().row_slice(g.a_rows(), g.a_rows()),
           b.view().row_slice(g.b_rows(), g.b_rows()), 0.0f, ref.view());
    const std::vector<float> want = test::read(c, ref.view());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CHECK(out[static_cast<std::size_t>(g.m * g.n) + i] == doctest::Approx(want[i]).epsilon(1e-5));
    }
  }
}

}  // namespace
}  // namespace moebench
