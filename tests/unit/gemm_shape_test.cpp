#include "harness/compute/gemm_shape.hpp"

#include <doctest/doctest.h>

using namespace moebench;

namespace {
Mat shape(std::int64_t rows, std::int64_t cols) {
  return Mat{nullptr, rows, cols, cols};
}
}  // namespace

TEST_CASE("gemm_shape reads m, n, k through the transposes") {
  const GemmShape nn = gemm_shape(false, false, shape(3, 5), shape(5, 7), shape(3, 7));
  CHECK(nn.m == 3);
  CHECK(nn.n == 7);
  CHECK(nn.k == 5);
  const GemmShape tt = gemm_shape(true, true, shape(5, 3), shape(7, 5), shape(3, 7));
  CHECK(tt.m == 3);
  CHECK(tt.n == 7);
  CHECK(tt.k == 5);
  CHECK(gemm_shape(true, false, shape(5, 3), shape(5, 7), shape(3, 7)).k == 5);
  CHECK(gemm_shape(false, true, shape(3, 5), shape(7, 5), shape(3, 7)).k == 5);
}

TEST_CASE("gemm_shape names every dimension when they do not fit") {
  CHECK_THROWS_WITH_AS(gemm_shape(false, false, shape(3, 5), shape(4, 7), shape(3, 7)),
                       doctest::Contains("op(A) 3x5, op(B) 4x7, C 3x7"), RuntimeError);
  CHECK_THROWS_AS(gemm_shape(false, true, shape(3, 5), shape(5, 7), shape(3, 7)), RuntimeError);
}
