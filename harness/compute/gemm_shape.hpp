// The shape of C = op(A) op(B), checked once for every backend.
#pragma once

#include <cstdint>

#include "harness/core/tensor.hpp"

namespace moebench {

struct GemmShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
};

// m x n from C, k from op(A); RuntimeError naming every dimension when op(A), op(B) and C do not
// fit together.
GemmShape gemm_shape(bool trans_a, bool trans_b, const Mat& a, const Mat& b, const Mat& c);

}  // namespace moebench
