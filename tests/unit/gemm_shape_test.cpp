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

TEST_CASE("gemm_size_class: the next power of two, so nearby token counts share a class") {
  CHECK(gemm_size_class(-5) == 1);
  CHECK(gemm_size_class(0) == 1);
  CHECK(gemm_size_class(1) == 1);
  CHECK(gemm_size_class(2) == 2);
  CHECK(gemm_size_class(3) == 4);
  CHECK(gemm_size_class(4096) == 4096);
  CHECK(gemm_size_class(4097) == 8192);
  // Every count in (2^(j-1), 2^j] lands in 2^j, and no class is smaller than its count.
  for (std::int64_t v = 1; v <= 5000; ++v) {
    const std::int64_t c = gemm_size_class(v);
    CHECK((c & (c - 1)) == 0);
    CHECK(c >= v);
    CHECK(c / 2 < v);
  }
  CHECK(gemm_size_class(std::int64_t{1} << 40) == std::int64_t{1} << 40);
  CHECK(gemm_size_class((std::int64_t{1} << 40) + 1) == std::int64_t{1} << 41);
}
