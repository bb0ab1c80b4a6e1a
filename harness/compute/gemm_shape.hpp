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

// The size class of a GEMM dimension, for choosing an algorithm once per class rather than once
// per shape: the smallest power of two >= v (v <= 1: 1). The experts' token counts change with
// the routing (an expert's m in its forward and data-gradient GEMMs, its k in its weight
// gradient), so a device backend asks its library's heuristic once per class and reuses that
// algorithm for another count in the class, after checking that the algorithm takes it.
std::int64_t gemm_size_class(std::int64_t v);

}  // namespace moebench
