// What the cpu backend's tests share: seeded vectors, tensors made from them and read back, and
// finite-difference checks of a backward against its forward.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/math/random.hpp"

namespace moebench::test {

using Vec = std::vector<float>;

inline Vec random_vec(std::size_t n, std::uint64_t stream, float scale = 1.0f) {
  Vec v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * uniform_pm1(11, stream, i);
  return v;
}

inline Tensor make(CpuCompute& c, std::int64_t rows, std::int64_t cols, const Vec& v) {
  Tensor t = c.alloc(rows, cols);
  c.upload(v.data(), t);
  return t;
}

inline Vec read(CpuCompute& c, Mat m) {
  Vec v(static_cast<std::size_t>(m.numel()));
  c.download(m, v.data());
  return v;
}

inline Tensor make_index(CpuCompute& c, const std::vector<std::int32_t>& idx) {
  Tensor t = c.alloc(static_cast<std::int64_t>(idx.size()), 1, DType::i32);
  c.upload_i32(idx.data(), t);
  return t;
}

// Finite differences in FP32 with h = 1e-2 on O(1) inputs (see elementwise_test.cpp): the
// loss is accumulated in double, truncation (~h^2) and output rounding (~1e-7 * terms / h) stay
// near 1e-4, so 2e-3 absolute plus 1e-2 relative passes a correct gradient and fails a wrong one.
constexpr float kH = 1e-2f;

inline void check_grad(double analytic, double numeric) {
  CHECK(std::abs(analytic - numeric) <= 2e-3 + 1e-2 * std::abs(numeric));
}

// For each element of x: central difference of loss() against grad[i].
inline void check_fd(CpuCompute& c, Tensor& x, const Vec& grad,
                     const std::function<double()>& loss) {
  Vec xv = read(c, x);
  REQUIRE(grad.size() == xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const float x0 = xv[i];
    xv[i] = x0 + kH;
    c.upload(xv.data(), x);
    const double lp = loss();
    xv[i] = x0 - kH;
    c.upload(xv.data(), x);
    const double lm = loss();
    xv[i] = x0;
    c.upload(xv.data(), x);
    check_grad(grad[i], (lp - lm) / (2 * kH));
  }
}

inline double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

}  // namespace moebench::test
