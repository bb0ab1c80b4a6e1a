// One MLA attention case on the cpu backend: its output and its query's gradient are finite and
// the same for the same seed (every rank of accept's probe computes the same thing), and another
// seed gives another output.
#include "harness/compute/mla_attention_case.hpp"

#include <cmath>
#include <vector>

#include <doctest/doctest.h>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "tests/unit/cpu_fixture.hpp"

namespace moebench {
namespace {

TEST_CASE("mla attention case: finite, the same for a seed, another for another seed") {
  CpuCompute c(1);
  const MlaDims d{4, 32, 16, 32};  // the tiny preset's heads and head dimensions
  MlaAttentionCase a(c, d, 32, 7), b(c, d, 32, 7), other(c, d, 32, 8);
  CHECK(a.shape().seq_len == 32);
  CHECK(a.shape().heads == 4);
  for (MlaAttentionCase* x : {&a, &b, &other}) x->forward_backward();
  const std::vector<float> out = test::read(c, a.output()),
                           grad = test::read(c, a.query_gradient());
  for (float v : out) REQUIRE(std::isfinite(v));
  for (float v : grad) REQUIRE(std::isfinite(v));
  CHECK(out == test::read(c, b.output()));
  CHECK(grad == test::read(c, b.query_gradient()));
  CHECK(out != test::read(c, other.output()));
  // forward() alone gives forward_backward()'s output.
  MlaAttentionCase f(c, d, 32, 7);
  f.forward();
  CHECK(test::read(c, f.output()) == out);
}

}  // namespace
}  // namespace moebench
