#include "harness/compute/gemm_shape.hpp"

namespace moebench {

GemmShape gemm_shape(bool trans_a, bool trans_b, const Mat& a, const Mat& b, const Mat& c) {
  GemmShape s{c.rows, c.cols, trans_a ? a.rows : a.cols};
  const std::int64_t a_m = trans_a ? a.cols : a.rows;
  const std::int64_t b_k = trans_b ? b.cols : b.rows;
  const std::int64_t b_n = trans_b ? b.rows : b.cols;
  MB_CHECK(a_m == s.m && b_n == s.n && b_k == s.k,
           "gemm shapes: op(A) " << a_m << "x" << s.k << ", op(B) " << b_k << "x" << b_n << ", C "
                                 << s.m << "x" << s.n << " (trans_a " << trans_a << ", trans_b "
                                 << trans_b << ")");
  return s;
}

std::int64_t gemm_size_class(std::int64_t v) {
  std::int64_t c = 1;
  // Stops at 2^62, the largest power of two an int64 holds: no count reaches it.
  while (c < v && c < (std::int64_t{1} << 62)) c <<= 1;
  return c;
}

}  // namespace moebench
