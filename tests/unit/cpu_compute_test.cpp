// The cpu backend against naive references and finite differences. Values come from
// uniform_pm1, so every input is O(1) and reproducible.
#include "harness/backends/cpu/cpu_compute.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "harness/math/elementwise.hpp"
#include "harness/math/fp8.hpp"
#include "harness/math/random.hpp"
#include "harness/math/route.hpp"
#include "tests/unit/cpu_fixture.hpp"

namespace moebench {
namespace {

using namespace test;

TEST_CASE("gemm matches a naive product for every transpose, on strided views") {
  CpuCompute c(1);
  const std::int64_t m = 5, n = 7, k = 6, pad = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const std::int64_t ar = ta ? k : m, ac = ta ? m : k;
      const std::int64_t br = tb ? n : k, bc = tb ? k : n;
      // Each operand is a column slice of a wider tensor, so ld > cols.
      Tensor a = make(c, ar, ac + pad, random_vec(ar * (ac + pad), 1));
      Tensor b = make(c, br, bc + pad, random_vec(br * (bc + pad), 2));
      Tensor cc = make(c, m, n + pad, random_vec(m * (n + pad), 3));
      const Vec a_all = read(c, a), b_all = read(c, b), c_before = read(c, cc);
      c.gemm(ta, tb, 0.7f, a.view().col_slice(0, ac), b.view().col_slice(pad, bc), 0.3f,
             cc.view().col_slice(1, n));
      const Vec got = read(c, cc);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n + pad; ++j) {
          const std::size_t at = i * (n + pad) + j;
          if (j < 1 || j > n) {
            CHECK(got[at] == c_before[at]);  // outside the view: untouched
            continue;
          }
          double s = 0.0;
          for (std::int64_t p = 0; p < k; ++p) {
            const double av = ta ? a_all[p * (ac + pad) + i] : a_all[i * (ac + pad) + p];
            const double bv =
                tb ? b_all[(j - 1) * (bc + pad) + pad + p] : b_all[p * (bc + pad) + pad + (j - 1)];
            s += av * bv;
          }
          // FP32 accumulation of k = 6 O(1) products: 1e-5 absolute is tens of ulps.
          CHECK(got[at] == doctest::Approx(0.7 * s + 0.3 * c_before[at]).epsilon(1e-5));
        }
      }
    }
  }
  SUBCASE("inconsistent shapes are rejected") {
    Tensor a = c.alloc(4, 3), b = c.alloc(4, 2), out = c.alloc(4, 2);
    CHECK_THROWS_AS(c.gemm(false, false, 1.0f, a, b, 0.0f, out), RuntimeError);
  }
}

TEST_CASE("grouped_gemm runs each problem, skips empty ones, and zeroes empty sums") {
  CpuCompute c(1);
  const std::int64_t k = 4, n = 3;
  Tensor w0 = make(c, k, n, random_vec(k * n, 10));
  Tensor w1 = make(c, k, n, random_vec(k * n, 11));
  Tensor x0 = make(c, 2, k, random_vec(2 * k, 12));
  Tensor x1 = c.alloc(0, k);
  Tensor y0 = c.alloc(2, n), y1 = c.alloc(0, n);
  const GemmProblem forward[] = {{x0, w0, y0}, {x1, w1, y1}};
  c.grouped_gemm(false, false, 1.0f, forward, 0.0f);
  Tensor y_ref = c.alloc(2, n);
  c.gemm(false, false, 1.0f, x0, w0, 0.0f, y_ref);
  CHECK(read(c, y0) == read(c, y_ref));
  // Weight gradient of the expert with no rows: dW = X^T dY over zero rows must be zero.
  Tensor dw1 = make(c, k, n, random_vec(k * n, 13));
  const GemmProblem wgrad[] = {{x1, y1, dw1}};
  c.grouped_gemm(true, false, 1.0f, wgrad, 0.0f);
  for (float v : read(c, dw1)) CHECK(v == 0.0f);
}

TEST_CASE("fill_random is deterministic, stream-dependent and independent of ld") {
  CpuCompute c(1);
  Tensor a = c.alloc(3, 4), b = c.alloc(3, 4), d = c.alloc(3, 4);
  c.fill_random(a, 5, 9, 0.5f);
  c.fill_random(b, 5, 9, 0.5f);
  c.fill_random(d, 5, 10, 0.5f);
  const Vec av = read(c, a);
  CHECK(av == read(c, b));
  CHECK(av != read(c, d));
  CHECK(av[6] == 0.5f * uniform_pm1(5, 9, 6));  // element (1, 2) has index 1 * 4 + 2
  Tensor wide = c.alloc(3, 6);
  c.fill(wide, 42.0f);
  c.fill_random(wide.view().col_slice(1, 4), 5, 9, 0.5f);
  const Vec wv = read(c, wide);
  for (std::int64_t r = 0; r < 3; ++r) {
    CHECK(wv[r * 6] == 42.0f);
    CHECK(wv[r * 6 + 5] == 42.0f);
    for (std::int64_t j = 0; j < 4; ++j) CHECK(wv[r * 6 + 1 + j] == av[r * 4 + j]);
  }
}

TEST_CASE("copy, axpby, zero and upload honour ld; dtypes are checked") {
  CpuCompute c(1);
  Tensor x = make(c, 2, 3, {1, 2, 3, 4, 5, 6});
  Tensor y = make(c, 2, 5, Vec(10, 1.0f));
  Mat yv = y.view().col_slice(1, 3);
  c.axpby(2.0f, x, 0.5f, yv);
  CHECK(read(c, y) == Vec{1, 2.5f, 4.5f, 6.5f, 1, 1, 8.5f, 10.5f, 12.5f, 1});
  c.copy(x, yv);
  CHECK(read(c, yv) == Vec{1, 2, 3, 4, 5, 6});
  c.zero(yv);
  CHECK(read(c, y) == Vec{1, 0, 0, 0, 1, 1, 0, 0, 0, 1});
  Tensor i = c.alloc(2, 3, DType::i32);
  CHECK_THROWS_AS(c.copy(x, i), RuntimeError);
  CHECK_THROWS_AS(c.alloc(2, 2, DType::bf16), RuntimeError);
  CHECK(reinterpret_cast<std::uintptr_t>(c.alloc(3, 3).data()) % 64 == 0);
  CHECK(c.memory_available_bytes() > 0);
}

TEST_CASE("rmsnorm backward matches finite differences (dx and dweight)") {
  CpuCompute c(1);
  const std::int64_t rows = 3, cols = 6;
  const float eps = 1e-5f;
  Tensor x = make(c, rows, cols, random_vec(rows * cols, 20));
  Tensor w = make(c, 1, cols, random_vec(cols, 21));
  const Vec dyv = random_vec(rows * cols, 22);
  Tensor dy = make(c, rows, cols, dyv);
  Tensor y = c.alloc(rows, cols), rstd = c.alloc(rows, 1);
  auto loss = [&] {
    c.rmsnorm_forward(x, w, eps, y, rstd);
    return dot(read(c, y), dyv);
  };
  loss();
  Tensor dx = c.alloc(rows, cols);
  Tensor dw = make(c, 1, cols, Vec(cols, 1.0f));  // accumulates onto 1
  c.rmsnorm_backward(dy, x, w, rstd, dx, dw);
  Vec dwv = read(c, dw);
  for (float& v : dwv) v -= 1.0f;
  check_fd(c, x, read(c, dx), loss);
  check_fd(c, w, dwv, loss);
}

TEST_CASE("rope on the backend: per-head rotation by row position, backward inverts it") {
  CpuCompute c(1);
  const std::int64_t seq = 3, batch = 2, heads = 2, stride = 7, offset = 2, dim = 4;
  const std::int64_t cols = heads * stride;
  const Vec xv = random_vec(batch * seq * cols, 30);
  Tensor x = make(c, batch * seq, cols, xv);
  c.rope_forward(x, seq, heads, stride, offset, dim, 100.0f);
  const Vec got = read(c, x);
  for (std::int64_t r = 0; r < batch * seq; ++r) {
    Vec want(xv.begin() + r * cols, xv.begin() + (r + 1) * cols);
    for (std::int64_t h = 0; h < heads; ++h)
      rope_rotate(want.data() + h * stride + offset, dim, r % seq, 100.0f, false);
    for (std::int64_t j = 0; j < cols; ++j) CHECK(got[r * cols + j] == want[j]);
  }
  c.rope_backward(x, seq, heads, stride, offset, dim, 100.0f);
  const Vec back = read(c, x);
  // A rotation and its inverse in float: a few ulps of O(1) values.
  for (std::size_t i = 0; i < xv.size(); ++i)
    CHECK(back[i] == doctest::Approx(xv[i]).epsilon(1e-5));
  CHECK_THROWS_AS(c.rope_forward(x, seq, heads, stride, offset + 2, dim, 100.0f), RuntimeError);
}

TEST_CASE("swiglu backward matches finite differences") {
  CpuCompute c(1);
  const std::int64_t rows = 2, f = 3;
  Tensor gu = make(c, rows, 2 * f, random_vec(rows * 2 * f, 40, 2.0f));
  const Vec doutv = random_vec(rows * f, 41);
  Tensor dout = make(c, rows, f, doutv);
  Tensor out = c.alloc(rows, f), dgu = c.alloc(rows, 2 * f);
  auto loss = [&] {
    c.swiglu_forward(gu, out);
    return dot(read(c, out), doutv);
  };
  c.swiglu_backward(gu, dout, dgu);
  check_fd(c, gu, read(c, dgu), loss);
}

TEST_CASE("gather, scatter_add, scaled gather and gathered dot") {
  CpuCompute c(1);
  Tensor src = make(c, 3, 2, {1, 2, 3, 4, 5, 6});
  Tensor idx = make_index(c, {2, 0, 2, 1});
  Tensor dst = c.alloc(4, 2);
  c.gather_rows(src, idx, dst);
  CHECK(read(c, dst) == Vec{5, 6, 1, 2, 5, 6, 3, 4});

  Tensor acc = make(c, 3, 2, Vec(6, 1.0f));
  c.scatter_add_rows(dst, idx, Mat{}, acc);  // unscaled: each row adds back where it came from
  CHECK(read(c, acc) == Vec{2, 3, 4, 5, 11, 13});
  Tensor scale = make(c, 4, 1, {0.5f, 2.0f, -1.0f, 1.0f});
  c.scatter_add_rows(dst, idx, scale, acc);
  CHECK(read(c, acc) == Vec{4, 7, 7, 9, 8.5f, 10});

  Tensor scaled = c.alloc(4, 2);
  c.gather_rows_scaled(src, idx, scale, scaled);
  CHECK(read(c, scaled) == Vec{2.5f, 3, 2, 4, -5, -6, 3, 4});

  Tensor b = make(c, 4, 2, {1, 1, 1, -1, 0, 2, 2, 0});
  Tensor out = c.alloc(4, 1);
  c.gathered_row_dot(src, idx, b, out);
  CHECK(read(c, out) == Vec{11, -1, 12, 6});

  Tensor bad = make_index(c, {0, 3, 1, 1});
  CHECK_THROWS_AS(c.gather_rows(src, bad, dst), RuntimeError);
  CHECK_THROWS_AS(c.scatter_add_rows(dst, bad, Mat{}, acc), RuntimeError);
}

// The step elementwise_test.cpp computes by hand.
AdamWStep hand_computed_adamw_step() {
  AdamWStep s;
  s.lr = 0.01f;
  s.weight_decay = 0.1f;
  s.grad_scale = 0.5f;
  s.step = 3;
  return s;
}

TEST_CASE("cross_entropy on the backend: every row through the shared row function") {
  auto c = std::make_unique<CpuCompute>(1);
  const std::int64_t rows = 5, vocab = 7;
  std::vector<float> host(rows * vocab);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = 3.0f * uniform_pm1(9, 1, i);
  const std::vector<std::int32_t> labels = {0, 6, 3, 3, 1};
  Tensor z = c->alloc(rows, vocab);
  c->upload(host.data(), z);
  Tensor lab = c->alloc(rows, 1, DType::i32);
  c->upload_i32(labels.data(), lab);
  Tensor loss = c->alloc(rows, 3, DType::f32);  // a strided column of it
  c->fill(loss, -1.0f);
  c->cross_entropy(z, lab, 0.25f, loss.view().col_slice(2, 1));
  std::vector<float> got(rows * vocab), l(rows * 3);
  c->download(z, got.data());
  c->download(loss, l.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> row(host.begin() + r * vocab, host.begin() + (r + 1) * vocab);
    const float want = cross_entropy_row(row.data(), vocab, labels[r], 0.25f);
    CHECK(l[r * 3 + 2] == want);
    CHECK(l[r * 3] == -1.0f);  // the other columns untouched
    for (std::int64_t j = 0; j < vocab; ++j) CHECK(got[r * vocab + j] == row[j]);
  }
  const std::vector<std::int32_t> bad = {0, 7, 0, 0, 0};
  c->upload_i32(bad.data(), lab);
  CHECK_THROWS_WITH_AS(c->cross_entropy(z, lab, 1.0f, loss.view().col_slice(0, 1)),
                       doctest::Contains("index[1] = 7 outside [0, 7)"), RuntimeError);
}

TEST_CASE("adamw with a master copy updates the master and gives param its value") {
  CpuCompute c(1);
  const AdamWStep s = hand_computed_adamw_step();
  // The master holds the true value (1.0); param a stale one that the update must not read.
  Tensor p = make(c, 2, 4, Vec(8, 7.0f)), master = make(c, 2, 4, Vec(8, 1.0f));
  Tensor g = make(c, 2, 4, Vec(8, 0.5f));
  Tensor m = make(c, 2, 4, Vec(8, 0.1f)), v = make(c, 2, 4, Vec(8, 0.2f));
  c.adamw(s, p, g, m, v, master);
  // elementwise_test.cpp's hand-computed step from 1.0 (FP32: 1e-6 relative).
  for (float x : read(c, master)) CHECK(x == doctest::Approx(0.9953532404740754).epsilon(1e-6));
  CHECK(read(c, p) == read(c, master));
  Tensor wrong = make(c, 2, 3, Vec(6, 1.0f));
  CHECK_THROWS_AS(c.adamw(s, p, g, m, v, wrong), RuntimeError);
}

TEST_CASE("adamw on the backend matches the element update on every element of a view") {
  CpuCompute c(1);
  const AdamWStep s = hand_computed_adamw_step();
  Tensor p = make(c, 2, 4, Vec(8, 1.0f)), g = make(c, 2, 4, Vec(8, 0.5f));
  Tensor m = make(c, 2, 4, Vec(8, 0.1f)), v = make(c, 2, 4, Vec(8, 0.2f));
  auto view = [](const Tensor& t) { return t.view().col_slice(1, 2); };
  c.adamw(s, view(p), view(g), view(m), view(v), Mat{});
  const Vec pv = read(c, p);
  for (std::int64_t r = 0; r < 2; ++r) {
    for (std::int64_t j = 0; j < 4; ++j) {
      // Same numbers as elementwise_test.cpp's hand-computed step (FP32: 1e-6 relative).
      const double want = (j == 1 || j == 2) ? 0.9953532404740754 : 1.0;
      CHECK(pv[r * 4 + j] == doctest::Approx(want).epsilon(1e-6));
    }
  }
}

// A parameter group's flat buffers are column vectors (n x 1): the backend runs them as one row.
// Every element must still be updated once, and a strided operand among contiguous ones must
// keep the row-by-row path.
TEST_CASE("column vectors: zero, copy, axpby and adamw touch each element once, strided or not") {
  CpuCompute c(1);
  const std::int64_t n = 1000;
  Tensor x = make(c, n, 1, random_vec(n, 1)), y = make(c, n, 1, random_vec(n, 2));
  Tensor wide = make(c, n, 2, random_vec(2 * n, 3));  // column 1 of it: a strided column
  const Mat strided = wide.view().col_slice(1, 1);
  const Vec x0 = read(c, x), y0 = read(c, y), wide0 = read(c, wide);
  // Arithmetic checks allow 1e-6 relative: the same FP32 operations, which a compiler may fuse
  // (multiply-add) differently here and in the backend; a missed or doubled element is O(1) off.
  c.axpby(2.0f, x, 0.5f, y);
  const Vec y1 = read(c, y);
  for (std::int64_t i = 0; i < n; ++i) {
    CHECK(y1[i] == doctest::Approx(2.0f * x0[i] + 0.5f * y0[i]).epsilon(1e-6));
  }
  c.copy(strided, y);  // strided source, contiguous destination
  const Vec y2 = read(c, y);
  for (std::int64_t i = 0; i < n; ++i) CHECK(y2[i] == wide0[2 * i + 1]);
  c.copy(x, strided);  // contiguous source, strided destination: column 0 untouched
  const Vec w1 = read(c, wide);
  for (std::int64_t i = 0; i < n; ++i) {
    CHECK(w1[2 * i] == wide0[2 * i]);
    CHECK(w1[2 * i + 1] == x0[i]);
  }
  c.zero(x);
  CHECK(read(c, x) == Vec(n, 0.0f));
  // AdamW over column vectors with a master copy, against the shared element update.
  const AdamWStep s = hand_computed_adamw_step();
  const Vec g0 = random_vec(n, 4), m0 = random_vec(n, 5, 0.1f);
  Vec v0 = random_vec(n, 6, 0.1f);
  for (float& e : v0) e = std::fabs(e);  // a second moment is not negative
  Tensor p = make(c, n, 1, Vec(n, 7.0f)), master = make(c, n, 1, y0);
  Tensor g = make(c, n, 1, g0), m = make(c, n, 1, m0), v = make(c, n, 1, v0);
  c.adamw(s, p, g, m, v, master);
  const AdamWCoeffs k = adamw_coeffs(s);
  const Vec pm = read(c, master), pp = read(c, p), mm = read(c, m), vv = read(c, v);
  for (std::int64_t i = 0; i < n; ++i) {
    float want = y0[i], wm = m0[i], wv = v0[i];
    adamw_update(k, &want, g0[i], &wm, &wv);
    CHECK(pm[i] == doctest::Approx(want).epsilon(1e-6));
    CHECK(pp[i] == pm[i]);  // the parameter takes the master's value
    CHECK(mm[i] == doctest::Approx(wm).epsilon(1e-6));
    CHECK(vv[i] == doctest::Approx(wv).epsilon(1e-6));
  }
}

TEST_CASE("router: sigmoid scores, route_token's choice, and its backward") {
  CpuCompute c(1);
  RouterParams rp;
  rp.experts = 8;
  rp.top_k = 2;
  rp.groups = 4;
  rp.topk_groups = 2;
  rp.scaling = 2.5f;
  const std::int64_t tokens = 4, first = 10;
  const Vec lv = random_vec(tokens * rp.experts, 60, 3.0f);
  const Vec bv = random_vec(rp.experts, 61, 0.1f);
  Tensor logits = make(c, tokens, rp.experts, lv), bias = make(c, 1, rp.experts, bv);
  Tensor scores = c.alloc(tokens, rp.experts), weights = c.alloc(tokens, rp.top_k);
  Tensor indices = c.alloc(tokens, rp.top_k, DType::i32);
  for (std::int32_t mode : {kRouteRouter, kRouteBalanced}) {
    CAPTURE(mode);
    rp.mode = mode;
    c.router_forward(rp, logits, bias, first, scores, indices, weights);
    const Vec sv = read(c, scores), wv = read(c, weights);
    const auto* iv = indices.view().as<std::int32_t>();
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (int e = 0; e < rp.experts; ++e)
        CHECK(sv[t * rp.experts + e] == sigmoid(lv[t * rp.experts + e]));
      std::int32_t idx[2];
      float w[2];
      route_token(rp, sv.data() + t * rp.experts, bv.data(), first + t, idx, w);
      for (int j = 0; j < rp.top_k; ++j) {
        CHECK(iv[t * rp.top_k + j] == idx[j]);
        CHECK(wv[t * rp.top_k + j] == w[j]);
      }
    }
  }
  // Balanced selection does not depend on the logits, so the weights are smooth in them and
  // router_backward (sigmoid derivative included) can be checked by finite differences.
  rp.mode = kRouteBalanced;
  const Vec dwv = random_vec(tokens * rp.top_k, 62);
  Tensor dw = make(c, tokens, rp.top_k, dwv), dlogits = c.alloc(tokens, rp.experts);
  c.fill(dlogits, 5.0f);  // overwritten, zero for unchosen experts
  c.router_forward(rp, logits, bias, first, scores, indices, weights);
  c.router_backward(rp, scores, indices, dw, dlogits);
  auto loss = [&] {
    c.router_forward(rp, logits, bias, first, scores, indices, weights);
    return dot(read(c, weights), dwv);
  };
  check_fd(c, logits, read(c, dlogits), loss);
}

}  // namespace
}  // namespace moebench
