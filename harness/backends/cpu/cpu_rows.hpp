// The cpu backend's row access and CBLAS integer checks, shared by its files.
#pragma once

#include <climits>
#include <cstdint>

#include "harness/compute/compute.hpp"
#include "harness/core/error.hpp"

namespace moebench::cpu {

inline float* row_f32(const Mat& m, std::int64_t r) {
  return m.as<float>() + r * m.ld;
}
inline std::int32_t* row_i32(const Mat& m, std::int64_t r) {
  return m.as<std::int32_t>() + r * m.ld;
}

// A dimension or leading dimension for CBLAS's int arguments: RuntimeError naming it otherwise.
inline int blas_int(std::int64_t v, const char* what) {
  MB_CHECK(v >= 0 && v <= INT_MAX, what << " = " << v << " exceeds the CBLAS integer range");
  return static_cast<int>(v);
}

// Applies f(float* row, r) to every row of an f32 matrix.
template <typename F>
void for_rows(const Mat& m, F&& f) {
  for (std::int64_t r = 0; r < m.rows; ++r) f(row_f32(m, r), r);
}

// One C = alpha op(A) op(B) + beta C straight on the callers' views (cpu_compute.cpp).
void sgemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
           const Mat& c);

}  // namespace moebench::cpu
