// The shared element-wise arithmetic, checked directly (the cpu backend's loops are checked in
// cpu_compute_test.cpp). Backward functions are compared with central finite differences of
// L = sum(dy * f(x)), accumulated in double.
#include "harness/math/elementwise.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "harness/math/random.hpp"

namespace moebench {
namespace {

std::vector<float> random_vector(std::size_t n, std::uint64_t stream, float scale = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * uniform_pm1(7, stream, i);
  return v;
}

// FP32 central differences with h = 1e-2 on O(1) inputs: truncation ~h^2 and float rounding of
// the perturbed outputs (~1e-7 * n / h) both stay below 1e-3, so 1e-3 absolute plus 1e-2
// relative separates a correct gradient from a wrong one (a missing term is O(0.1..1)).
constexpr float kH = 1e-2f;
constexpr double kAtol = 1e-3;
constexpr double kRtol = 1e-2;

void check_grad(double analytic, double numeric) {
  CHECK(std::abs(analytic - numeric) <= kAtol + kRtol * std::abs(numeric));
}

double rms_loss(const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& dy, float eps) {
  std::vector<float> y(x.size());
  rmsnorm_row_forward(x.data(), w.data(), static_cast<std::int64_t>(x.size()), eps, y.data());
  double l = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) l += static_cast<double>(dy[i]) * y[i];
  return l;
}

TEST_CASE("rmsnorm row forward matches the definition") {
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> w = {0.5f, 1.0f, 2.0f, -1.0f};
  std::vector<float> y(4);
  const float rstd = rmsnorm_row_forward(x.data(), w.data(), 4, 1e-6f, y.data());
  const double want_rstd = 1.0 / std::sqrt((1.0 + 4.0 + 9.0 + 0.25) / 4.0 + 1e-6);
  // One float rounding per operation: 1e-6 relative is several ulps.
  CHECK(rstd == doctest::Approx(want_rstd).epsilon(1e-6));
  for (int i = 0; i < 4; ++i) CHECK(y[i] == doctest::Approx(x[i] * want_rstd * w[i]).epsilon(1e-6));
}

TEST_CASE("rmsnorm row backward matches finite differences, dweight accumulates") {
  const std::size_t n = 9;
  std::vector<float> x = random_vector(n, 1);
  std::vector<float> w = random_vector(n, 2);
  const std::vector<float> dy = random_vector(n, 3);
  const float eps = 1e-5f;
  std::vector<float> y(n), dx(n), dw(n, 0.25f);  // dw starts non-zero: it must accumulate
  const float rstd = rmsnorm_row_forward(x.data(), w.data(), n, eps, y.data());
  rmsnorm_row_backward(dy.data(), x.data(), w.data(), rstd, n, dx.data(), dw.data());
  for (std::size_t i = 0; i < n; ++i) {
    const float x0 = x[i];
    x[i] = x0 + kH;
    const double lp = rms_loss(x, w, dy, eps);
    x[i] = x0 - kH;
    const double lm = rms_loss(x, w, dy, eps);
    x[i] = x0;
    check_grad(dx[i], (lp - lm) / (2 * kH));
    const float w0 = w[i];
    w[i] = w0 + kH;
    const double wp = rms_loss(x, w, dy, eps);
    w[i] = w0 - kH;
    const double wm = rms_loss(x, w, dy, eps);
    w[i] = w0;
    check_grad(dw[i] - 0.25f, (wp - wm) / (2 * kH));
  }
}

TEST_CASE("rope rotates pairs (i, i + dim/2) by pos * theta^(-2i/dim)") {
  const std::int64_t dim = 8;
  const float theta = 10000.0f;
  std::vector<float> x = random_vector(dim, 4);
  const std::vector<float> orig = x;
  rope_rotate(x.data(), dim, 3, theta, false);
  for (std::int64_t i = 0; i < dim / 2; ++i) {
    const double angle = 3.0 * std::pow(10000.0, -2.0 * i / dim);
    const double a = orig[i] * std::cos(angle) - orig[i + dim / 2] * std::sin(angle);
    const double b = orig[i] * std::sin(angle) + orig[i + dim / 2] * std::cos(angle);
    // Float angle and trig: a few ulps of O(1) values.
    CHECK(x[i] == doctest::Approx(a).epsilon(1e-5));
    CHECK(x[i + dim / 2] == doctest::Approx(b).epsilon(1e-5));
  }
  SUBCASE("position 0 is the identity") {
    std::vector<float> y = orig;
    rope_rotate(y.data(), dim, 0, theta, false);
    for (std::int64_t i = 0; i < dim; ++i) CHECK(y[i] == orig[i]);
  }
  SUBCASE("the inverse undoes it") {
    rope_rotate(x.data(), dim, 3, theta, true);
    // Two rotations in float: a few ulps.
    for (std::int64_t i = 0; i < dim; ++i) CHECK(x[i] == doctest::Approx(orig[i]).epsilon(1e-5));
  }
}

TEST_CASE("rope backward (the inverse rotation) matches finite differences") {
  const std::int64_t dim = 6;
  const std::int64_t pos = 5;
  std::vector<float> x = random_vector(dim, 5);
  const std::vector<float> dy = random_vector(dim, 6);
  std::vector<float> dx = dy;
  rope_rotate(dx.data(), dim, pos, 500.0f, true);
  auto loss = [&](const std::vector<float>& in) {
    std::vector<float> y = in;
    rope_rotate(y.data(), dim, pos, 500.0f, false);
    double l = 0.0;
    for (std::int64_t i = 0; i < dim; ++i) l += static_cast<double>(dy[i]) * y[i];
    return l;
  };
  for (std::int64_t i = 0; i < dim; ++i) {
    const float x0 = x[i];
    x[i] = x0 + kH;
    const double lp = loss(x);
    x[i] = x0 - kH;
    const double lm = loss(x);
    x[i] = x0;
    check_grad(dx[i], (lp - lm) / (2 * kH));
  }
}

TEST_CASE("silu and swiglu backward match finite differences") {
  for (float g : {-6.0f, -1.5f, -0.2f, 0.0f, 0.7f, 3.0f}) {
    CHECK(silu(g) == doctest::Approx(g / (1.0 + std::exp(-g))).epsilon(1e-6));
    const float up = 0.8f;
    const float dout = -1.3f;
    float dgate = 0.0f;
    float dup = 0.0f;
    swiglu_backward(g, up, dout, &dgate, &dup);
    const double ng =
        dout * (double{swiglu_forward(g + kH, up)} - swiglu_forward(g - kH, up)) / (2 * kH);
    const double nu =
        dout * (double{swiglu_forward(g, up + kH)} - swiglu_forward(g, up - kH)) / (2 * kH);
    check_grad(dgate, ng);
    check_grad(dup, nu);
  }
  // Large magnitudes saturate without NaN.
  CHECK(silu(-200.0f) == doctest::Approx(0.0));
  CHECK(silu(200.0f) == doctest::Approx(200.0));
  CHECK(std::isfinite(silu_grad(-200.0f)));
}

TEST_CASE("cross_entropy row: the loss is -log softmax[label], the gradient its derivative") {
  const std::int64_t n = 37;
  const std::vector<float> z0 = random_vector(n, 60, 5.0f);
  for (std::int64_t label : {std::int64_t{0}, std::int64_t{11}, n - 1}) {
    CAPTURE(label);
    // The definition in double: log(sum exp z) - z_label.
    double sum = 0.0;
    for (float v : z0) sum += std::exp(static_cast<double>(v));
    const double want = std::log(sum) - z0[static_cast<std::size_t>(label)];
    std::vector<float> z = z0;
    const float loss = cross_entropy_row(z.data(), n, label, 0.5f);
    CHECK(loss == doctest::Approx(want).epsilon(1e-5));
    // z now holds 0.5 * d loss / d z: against central differences of the loss.
    double grad_sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      std::vector<float> up = z0, down = z0;
      up[static_cast<std::size_t>(i)] += kH;
      down[static_cast<std::size_t>(i)] -= kH;
      const double lp = cross_entropy_row(up.data(), n, label, 1.0f);
      const double lm = cross_entropy_row(down.data(), n, label, 1.0f);
      check_grad(2.0 * z[static_cast<std::size_t>(i)], (lp - lm) / (2.0 * kH));
      grad_sum += z[static_cast<std::size_t>(i)];
    }
    // softmax sums to one, so the gradient sums to zero.
    CHECK(std::abs(grad_sum) < 1e-6);
  }
  // Large logits do not overflow (the max is subtracted first).
  std::vector<float> big = {1000.0f, 999.0f, -1000.0f};
  const float l = cross_entropy_row(big.data(), 3, 1, 1.0f);
  CHECK(l == doctest::Approx(1.0 + std::log(1.0 + std::exp(-1.0))).epsilon(1e-5));
}

TEST_CASE("adamw element update matches a hand-computed step") {
  AdamWStep s;
  s.lr = 0.01f;
  s.beta1 = 0.9f;
  s.beta2 = 0.95f;
  s.eps = 1e-8f;
  s.weight_decay = 0.1f;
  s.grad_scale = 0.5f;
  s.step = 3;
  float p = 1.0f;
  float m = 0.1f;
  float v = 0.2f;
  adamw_update(adamw_coeffs(s), &p, 0.5f, &m, &v);
  // Computed in double by hand (python): g = 0.25, m = 0.115, v = 0.193125,
  // p = 1 - 0.01 * (m / (1 - 0.9^3) / (sqrt(v / (1 - 0.95^3)) + 1e-8) + 0.1 * 1).
  // FP32 arithmetic on O(1) values: 1e-6 relative.
  CHECK(m == doctest::Approx(0.115).epsilon(1e-6));
  CHECK(v == doctest::Approx(0.193125).epsilon(1e-6));
  CHECK(p == doctest::Approx(0.9953532404740754).epsilon(1e-6));
  SUBCASE("without decay and with step 1 the update is lr * sign(g)") {
    s.weight_decay = 0.0f;
    s.step = 1;
    s.grad_scale = 1.0f;
    float p1 = 2.0f, m1 = 0.0f, v1 = 0.0f;
    adamw_update(adamw_coeffs(s), &p1, -3.0f, &m1, &v1);
    CHECK(p1 == doctest::Approx(2.01).epsilon(1e-6));
  }
}

}  // namespace
}  // namespace moebench
