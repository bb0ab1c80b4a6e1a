// The cpu backend against naive references and finite differences. Values come from
// uniform_pm1, so every input is O(1) and reproducible.
#include "harness/backends/cpu/cpu_compute.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "workloads/ops/elementwise.hpp"
#include "workloads/ops/fp8.hpp"
#include "workloads/ops/random.hpp"
#include "workloads/ops/route.hpp"

namespace moebench {
namespace {

using Vec = std::vector<float>;

Vec random_vec(std::size_t n, std::uint64_t stream, float scale = 1.0f) {
  Vec v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * uniform_pm1(11, stream, i);
  return v;
}

Tensor make(CpuCompute& c, std::int64_t rows, std::int64_t cols, const Vec& v) {
  Tensor t = c.alloc(rows, cols);
  c.upload(v.data(), t);
  return t;
}

Vec read(CpuCompute& c, Mat m) {
  Vec v(static_cast<std::size_t>(m.numel()));
  c.download(m, v.data());
  return v;
}

Tensor make_index(CpuCompute& c, const std::vector<std::int32_t>& idx) {
  Tensor t = c.alloc(static_cast<std::int64_t>(idx.size()), 1, DType::i32);
  c.upload_i32(idx.data(), t);
  return t;
}

// Finite differences in FP32 with h = 1e-2 on O(1) inputs (see elementwise_test.cpp): the
// loss is accumulated in double, truncation (~h^2) and output rounding (~1e-7 * terms / h) stay
// near 1e-4, so 2e-3 absolute plus 1e-2 relative passes a correct gradient and fails a wrong one.
constexpr float kH = 1e-2f;

void check_grad(double analytic, double numeric) {
  CHECK(std::abs(analytic - numeric) <= 2e-3 + 1e-2 * std::abs(numeric));
}

// For each element of x: central difference of loss() against grad[i].
void check_fd(CpuCompute& c, Tensor& x, const Vec& grad, const std::function<double()>& loss) {
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

double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

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

// The FP8 emulation written out independently: amax over the stored view, scale 448 / amax,
// every element rounded to E4M3, products summed in double, both descales applied.
Vec fp8_reference(bool ta, bool tb, float alpha, const Vec& a, std::int64_t ar, std::int64_t ac,
                  const Vec& b, std::int64_t br, std::int64_t bc, float beta, const Vec& c0,
                  std::int64_t m, std::int64_t n) {
  auto quantised = [](const Vec& x, double* descale) {
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float scale = 448.0f / amax;
    *descale = 1.0 / scale;
    Vec q(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) q[i] = e4m3_round(x[i] * scale);
    return q;
  };
  double da = 0, db = 0;
  const Vec qa = quantised(a, &da), qb = quantised(b, &db);
  const std::int64_t k = ta ? ar : ac;
  Vec out(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        s += static_cast<double>(ta ? qa[p * ac + i] : qa[i * ac + p]) *
             (tb ? qb[j * bc + p] : qb[p * bc + j]);
      }
      out[i * n + j] = static_cast<float>(alpha * da * db * s + beta * c0[i * n + j]);
    }
  }
  return out;
}

TEST_CASE("linear_gemm in fp8: the emulation equals an independent E4M3 computation") {
  CpuCompute c(1);
  c.set_linear_precision(LinearPrecision::fp8);
  REQUIRE(c.linear_precision() == LinearPrecision::fp8);
  const std::int64_t m = 9, n = 11, k = 64;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const std::int64_t ar = ta ? k : m, ac = ta ? m : k;
      const std::int64_t br = tb ? n : k, bc = tb ? k : n;
      // Different magnitudes per operand, so a scale applied to the wrong operand shows.
      const Vec av = random_vec(ar * ac, 21, 3.0f), bv = random_vec(br * bc, 22, 0.01f);
      const Vec c0 = random_vec(m * n, 23);
      Tensor a = make(c, ar, ac, av), b = make(c, br, bc, bv), out = make(c, m, n, c0);
      c.linear_gemm(ta, tb, 0.5f, a, b, 1.0f, out);
      const Vec want = fp8_reference(ta, tb, 0.5f, av, ar, ac, bv, br, bc, 1.0f, c0, m, n);
      const Vec got = read(c, out);
      // Same quantised inputs: only FP32 accumulation of 64 terms (sum |terms| <= 1 here, plus
      // beta C of O(1)) against double differs, < 1e-5 absolute, far below the E4M3 differences
      // this test is about (~1e-2 relative).
      for (std::size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5).scale(1.0));
      }
    }
  }
}

TEST_CASE("linear_gemm in fp8 differs from FP32 by the E4M3 error, no more; standard is FP32") {
  CpuCompute c(1);
  const std::int64_t m = 16, n = 16, k = 256;
  const Vec av = random_vec(m * k, 31), bv = random_vec(k * n, 32);
  Tensor a = make(c, m, k, av), b = make(c, k, n, bv);
  Tensor exact = c.alloc(m, n), std_out = c.alloc(m, n), fp8_out = c.alloc(m, n);
  c.gemm(false, false, 1.0f, a, b, 0.0f, exact);
  c.linear_gemm(false, false, 1.0f, a, b, 0.0f, std_out);
  CHECK(read(c, std_out) == read(c, exact));  // standard precision is the plain GEMM
  c.set_linear_precision(LinearPrecision::fp8);
  c.linear_gemm(false, false, 1.0f, a, b, 0.0f, fp8_out);
  const Vec e = read(c, exact), q = read(c, fp8_out);
  // Each quantised input is within 2^-4 of its value relatively (3 mantissa bits; below 2^-6 of
  // scaled magnitude the absolute spacing 2^-9 / scale applies instead), so each product within
  // about 2 x 2^-4 and |fp8 - exact| <= 0.13 x sum_p |a_ip b_pj| (plus the subnormal slack, far
  // smaller for O(1) inputs). Random signs make the typical error ~sqrt(k) times smaller: the
  // mean error must also be well below the bound but not zero (the inputs were rounded).
  double mean_err = 0.0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double abs_sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p) abs_sum += std::fabs(av[i * k + p] * bv[p * n + j]);
      const double err = std::fabs(q[i * n + j] - e[i * n + j]);
      CHECK(err <= 0.13 * abs_sum + 1e-3);
      mean_err += err / abs_sum;
    }
  }
  mean_err /= static_cast<double>(m * n);
  CHECK(mean_err > 1e-4);  // rounding happened
  CHECK(mean_err < 0.02);  // and it is random-signed, not a scale error
}

// The block-scaled emulation written out independently: op(A) and op(B) materialised in GEMM
// coordinates, one scale per tile (A: 1 x tk of a row; B: tk x tn of K by N, tn = 1 for an
// activation), each element rounded to E4M3 at its tile's scale and dequantised, products summed
// in double.
Vec block_reference(bool ta, bool tb, const Vec& a, std::int64_t ac, const Vec& b, std::int64_t bc,
                    std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t tk,
                    std::int64_t tn, bool pow2) {
  auto scale_of = [&](float amax) { return pow2 ? fp8_mx_scale(amax) : fp8_scale(amax); };
  std::vector<double> qa(static_cast<std::size_t>(m * k)), qb(static_cast<std::size_t>(k * n));
  auto av = [&](std::int64_t i, std::int64_t p) { return ta ? a[p * ac + i] : a[i * ac + p]; };
  auto bv = [&](std::int64_t p, std::int64_t j) { return tb ? b[j * bc + p] : b[p * bc + j]; };
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t p0 = 0; p0 < k; p0 += tk) {
      float amax = 0.0f;
      for (std::int64_t p = p0; p < std::min(k, p0 + tk); ++p)
        amax = std::max(amax, std::fabs(av(i, p)));
      const float sc = scale_of(amax);
      for (std::int64_t p = p0; p < std::min(k, p0 + tk); ++p) {
        qa[i * k + p] = static_cast<double>(e4m3_round(av(i, p) * sc)) / sc;
      }
    }
  }
  for (std::int64_t j0 = 0; j0 < n; j0 += tn) {
    for (std::int64_t p0 = 0; p0 < k; p0 += tk) {
      float amax = 0.0f;
      for (std::int64_t j = j0; j < std::min(n, j0 + tn); ++j) {
        for (std::int64_t p = p0; p < std::min(k, p0 + tk); ++p)
          amax = std::max(amax, std::fabs(bv(p, j)));
      }
      const float sc = scale_of(amax);
      for (std::int64_t j = j0; j < std::min(n, j0 + tn); ++j) {
        for (std::int64_t p = p0; p < std::min(k, p0 + tk); ++p) {
          qb[p * n + j] = static_cast<double>(e4m3_round(bv(p, j) * sc)) / sc;
        }
      }
    }
  }
  Vec out(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p) sum += qa[i * k + p] * qb[p * n + j];
      out[i * n + j] = static_cast<float>(sum);
    }
  }
  return out;
}

TEST_CASE("linear_gemm in fp8, blockwise and mxfp8: the emulation equals an independent one") {
  // K = 300 and N = 200 leave partial tiles of 128 and 32; rows of op(B) with N > 128 span two
  // weight blocks.
  const std::int64_t m = 7, n = 200, k = 300;
  for (Fp8Recipe recipe : {Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        CAPTURE(to_string(recipe));
        CAPTURE(ta);
        CAPTURE(tb);
        CpuCompute c(1);
        c.set_linear_precision(LinearPrecision::fp8);
        c.set_fp8_recipe(recipe);
        const std::int64_t ar = ta ? k : m, ac = ta ? m : k;
        const std::int64_t br = tb ? n : k, bc = tb ? k : n;
        // Magnitudes varying along both dimensions, so every tile has its own scale.
        Vec av = random_vec(ar * ac, 51, 1.0f), bv = random_vec(br * bc, 52, 1.0f);
        for (std::size_t i = 0; i < av.size(); ++i)
          av[i] *= std::ldexp(1.0f, static_cast<int>(i % 13) - 6);
        for (std::size_t i = 0; i < bv.size(); ++i)
          bv[i] *= std::ldexp(1.0f, static_cast<int>((i / 7) % 11) - 5);
        Tensor a = make(c, ar, ac, av), b = make(c, br, bc, bv), out = c.alloc(m, n);
        c.linear_gemm(ta, tb, 1.0f, a, b, 0.0f, out);
        const bool weight = !ta;  // B is a weight without trans_a (fp8_recipe.hpp)
        const Fp8Tile tile = operand_tile(recipe, Fp8Operand::b, ta);
        CHECK(tile.outer == (weight && recipe == Fp8Recipe::blockwise ? 128 : 1));
        const Vec want = block_reference(ta, tb, av, ac, bv, bc, m, n, k, tile.k, tile.outer,
                                         recipe == Fp8Recipe::mxfp8);
        const Vec got = read(c, out);
        // Identical dequantised inputs up to one FP32 rounding of q x descale (2^-24): FP32
        // summation of 300 terms against double, < 1e-5 of the output's scale (sum |terms| is
        // at most ~300 x 2^2 here).
        double scale = 0.0;
        for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
        for (std::size_t i = 0; i < got.size(); ++i) {
          CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5).scale(scale));
        }
        CHECK(c.fp8_gemm_counts().weight_quantisations == (weight ? 1 : 0));
      }
    }
  }
}

TEST_CASE("fp8 blockwise keeps a tensor's small rows that one per-tensor scale loses") {
  // One token 1e6 times louder than the rest: a per-tensor scale maps the others below E4M3's
  // subnormal range (1e-6 x 448 < 2^-9), so their outputs vanish; 1x128 tiles scale each token
  // on its own and keep them to E4M3's precision (2^-4 relative per input).
  const std::int64_t m = 8, n = 16, k = 128;
  Vec av = random_vec(m * k, 61), bv = random_vec(k * n, 62);
  for (std::int64_t p = 0; p < k; ++p) av[p] *= 1e6f;  // row 0
  auto run = [&](Fp8Recipe r) {
    CpuCompute c(1);
    c.set_linear_precision(LinearPrecision::fp8);
    c.set_fp8_recipe(r);
    Tensor a = make(c, m, k, av), b = make(c, k, n, bv), out = c.alloc(m, n);
    c.linear_gemm(false, false, 1.0f, a, b, 0.0f, out);
    return read(c, out);
  };
  CpuCompute exact_c(1);
  Tensor a = make(exact_c, m, k, av), b = make(exact_c, k, n, bv), exact = exact_c.alloc(m, n);
  exact_c.gemm(false, false, 1.0f, a, b, 0.0f, exact);
  const Vec e = read(exact_c, exact), tensor = run(Fp8Recipe::tensor),
            block = run(Fp8Recipe::blockwise);
  double err_tensor = 0.0, err_block = 0.0, size = 0.0;
  for (std::int64_t i = n; i < m * n; ++i) {  // rows 1..7, the quiet tokens
    size += std::fabs(e[i]);
    err_tensor += std::fabs(tensor[i] - e[i]);
    err_block += std::fabs(block[i] - e[i]);
  }
  CHECK(err_tensor > 0.5 * size);  // per tensor: the quiet rows are mostly lost
  CHECK(err_block < 0.05 * size);  // blockwise: E4M3 rounding only
}

TEST_CASE("fp8 weights are quantised once per step: kept until begin_step()") {
  CpuCompute c(1);
  c.set_linear_precision(LinearPrecision::fp8);
  c.set_fp8_recipe(Fp8Recipe::blockwise);
  const std::int64_t m = 4, n = 8, k = 16;
  Tensor x = make(c, m, k, random_vec(m * k, 71)), w = make(c, k, n, random_vec(k * n, 72));
  Tensor y = c.alloc(m, n), dy = make(c, m, n, random_vec(m * n, 73)), dx = c.alloc(m, k);
  Tensor dw = c.alloc(k, n);
  for (int micro_batch = 0; micro_batch < 3; ++micro_batch) {
    c.linear_gemm(false, false, 1.0f, x, w, 0.0f, y);   // forward: w as stored
    c.linear_gemm(false, true, 1.0f, dy, w, 0.0f, dx);  // data gradient: w transposed
    c.linear_gemm(true, false, 1.0f, x, dy, 0.0f, dw);  // weight gradient: no weight operand
  }
  CHECK(c.fp8_gemm_counts().gemms == 9);
  CHECK(c.fp8_gemm_counts().weight_quantisations == 2);  // two layouts of one weight
  const Vec before = read(c, y);
  c.fill(w, 0.5f);  // the optimiser's update
  c.begin_step();
  c.linear_gemm(false, false, 1.0f, x, w, 0.0f, y);
  CHECK(c.fp8_gemm_counts().weight_quantisations == 3);
  CHECK(read(c, y) != before);  // the new weight, not the kept copy
}

TEST_CASE(
    "fp8 saved inputs: the weight gradient from the FP8 copy equals the one from x, bit for "
    "bit, in a quarter of the bytes") {
  const std::int64_t tokens = 70, in = 48, out = 24;  // 70 tokens: a partial 32- and 128-tile
  for (Fp8Recipe recipe : {Fp8Recipe::tensor, Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    CAPTURE(to_string(recipe));
    CpuCompute c(1);
    c.set_linear_precision(LinearPrecision::fp8);
    c.set_fp8_recipe(recipe);
    // Rows of very different magnitudes, so the tiles' scales differ.
    Vec xv = random_vec(tokens * in, 81);
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (std::int64_t j = 0; j < in; ++j)
        xv[t * in + j] *= std::ldexp(1.0f, static_cast<int>(t % 9) - 4);
    }
    Tensor x = make(c, tokens, in, xv), dy = make(c, tokens, out, random_vec(tokens * out, 82));
    Tensor want = make(c, in, out, random_vec(in * out, 83)), got = c.alloc(in, out);
    c.copy(want, got);
    c.linear_gemm(true, false, 0.5f, x, dy, 1.0f, want);
    const std::int64_t before = c.allocation_stats().live_bytes;
    const Fp8Input saved = c.save_linear_input(x, got);
    CHECK(saved.fp8);
    const std::int64_t bytes = c.allocation_stats().live_bytes - before;
    // One byte an element and the FP32 descales: one, or one per 1 x 128 or 1 x 32 tile along
    // the tokens of each of the `in` columns.
    const std::int64_t tiles = recipe == Fp8Recipe::tensor
                                   ? 1
                                   : in * ((tokens + (recipe == Fp8Recipe::mxfp8 ? 31 : 127)) /
                                           (recipe == Fp8Recipe::mxfp8 ? 32 : 128));
    CHECK(bytes == 4 * tiles + (tokens * in + 3) / 4 * 4);
    c.fill(x, 7.0f);  // x may go: the gradient reads only the copy
    c.linear_wgrad(0.5f, saved, dy, 1.0f, got);
    CHECK(read(c, got) == read(c, want));
  }
  // Without fp8 there is nothing to quantise: the input is kept as it is.
  CpuCompute c(1);
  Tensor x = make(c, 5, 3, random_vec(15, 84)), dy = make(c, 5, 2, random_vec(10, 85));
  Tensor want = c.alloc(3, 2), got = c.alloc(3, 2);
  c.linear_gemm(true, false, 1.0f, x, dy, 0.0f, want);
  const Fp8Input kept = c.save_linear_input(x, got);
  CHECK_FALSE(kept.fp8);
  c.linear_wgrad(1.0f, kept, dy, 0.0f, got);
  CHECK(read(c, got) == read(c, want));
  CHECK_THROWS_AS(c.save_linear_input(x, c.alloc(2, 2)), RuntimeError);
}

TEST_CASE("linear_grouped_gemm in fp8 scales each problem's operands separately") {
  CpuCompute c(1);
  c.set_linear_precision(LinearPrecision::fp8);
  const std::int64_t k = 32, n = 8;
  // Two experts whose weights differ by 1e5 in magnitude: one shared scale would put the small
  // one's values (1e-5 x 448 < 2^-6) among E4M3's subnormals, errors of tens of percent;
  // per-problem scales keep both at full precision.
  const Vec w0 = random_vec(k * n, 41, 1.0f), w1 = random_vec(k * n, 42, 1e-5f);
  const Vec x0 = random_vec(4 * k, 43), x1 = random_vec(3 * k, 44, 20.0f);
  Tensor tw0 = make(c, k, n, w0), tw1 = make(c, k, n, w1);
  Tensor tx0 = make(c, 4, k, x0), tx1 = make(c, 3, k, x1);
  Tensor y0 = c.alloc(4, n), y1 = c.alloc(3, n);
  const GemmProblem p[] = {{tx0, tw0, y0}, {tx1, tw1, y1}};
  c.linear_grouped_gemm(false, false, 1.0f, p, 0.0f);
  const Vec want0 = fp8_reference(false, false, 1.0f, x0, 4, k, w0, k, n, 0.0f, Vec(4 * n), 4, n);
  const Vec want1 = fp8_reference(false, false, 1.0f, x1, 3, k, w1, k, n, 0.0f, Vec(3 * n), 3, n);
  const Vec got0 = read(c, y0), got1 = read(c, y1);
  // As above: FP32 against double accumulation of identical quantised products, ~1e-6 of each
  // output's scale (O(1) for y0, ~1e-3 for y1); a shared scale would move y1 by ~1e-4.
  for (std::size_t i = 0; i < got0.size(); ++i) {
    CHECK(got0[i] == doctest::Approx(want0[i]).epsilon(1e-5).scale(1.0));
  }
  for (std::size_t i = 0; i < got1.size(); ++i) {
    CHECK(got1[i] == doctest::Approx(want1[i]).epsilon(1e-4).scale(1e-3));
  }
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

// Attention in double, straight from the definition.
Vec naive_attention(const AttentionShape& s, const Vec& q, const Vec& k, const Vec& v) {
  const std::int64_t t = s.seq_len, qc = s.heads * s.qk_dim, vc = s.heads * s.v_dim;
  Vec out(static_cast<std::size_t>(s.batch * t * vc));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      for (std::int64_t i = 0; i < t; ++i) {
        std::vector<double> p(t, 0.0);
        double mx = -1e300, sum = 0.0;
        const std::int64_t n = s.causal ? i + 1 : t;
        for (std::int64_t j = 0; j < n; ++j) {
          double d = 0.0;
          for (std::int64_t e = 0; e < s.qk_dim; ++e)
            d += double{q[(b * t + i) * qc + h * s.qk_dim + e]} *
                 k[(b * t + j) * qc + h * s.qk_dim + e];
          p[j] = s.scale * d;
          mx = std::max(mx, p[j]);
        }
        for (std::int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (std::int64_t e = 0; e < s.v_dim; ++e) {
          double o = 0.0;
          for (std::int64_t j = 0; j < n; ++j)
            o += p[j] / sum * v[(b * t + j) * vc + h * s.v_dim + e];
          out[(b * t + i) * vc + h * s.v_dim + e] = static_cast<float>(o);
        }
      }
    }
  }
  return out;
}

TEST_CASE("attention forward matches a naive reference; backward matches finite differences") {
  for (bool causal : {true, false}) {
    CAPTURE(causal);
    CpuCompute c(1);
    AttentionShape s;
    s.batch = 2;
    s.seq_len = 5;
    s.heads = 2;
    s.qk_dim = 4;
    s.v_dim = 3;
    s.scale = 1.0f / std::sqrt(4.0f);
    s.causal = causal;
    const std::int64_t rows = s.batch * s.seq_len;
    const std::int64_t qc = s.heads * s.qk_dim, vc = s.heads * s.v_dim;
    const Vec qv = random_vec(rows * qc, 50, 1.5f), kv = random_vec(rows * qc, 51, 1.5f);
    const Vec vv = random_vec(rows * vc, 52);
    Tensor q = make(c, rows, qc, qv), k = make(c, rows, qc, kv), v = make(c, rows, vc, vv);
    Tensor out = c.alloc(rows, vc), stats = c.alloc(rows, s.heads);
    c.attention_forward(s, q, k, v, out, stats);
    const Vec want = naive_attention(s, qv, kv, vv);
    const Vec got = read(c, out);
    // FP32 softmax and sums over <= 5 keys of O(1) values: 1e-5 relative is tens of ulps.
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));

    const Vec doutv = random_vec(rows * vc, 53);
    Tensor dout = make(c, rows, vc, doutv);
    Tensor dq = c.alloc(rows, qc), dk = c.alloc(rows, qc), dv = c.alloc(rows, vc);
    c.fill(dq, 7.0f);  // gradients are overwritten, not accumulated
    c.attention_backward(s, q, k, v, out, dout, stats, dq, dk, dv);
    Tensor out2 = c.alloc(rows, vc), stats2 = c.alloc(rows, s.heads);
    auto loss = [&] {
      c.attention_forward(s, q, k, v, out2, stats2);
      return dot(read(c, out2), doutv);
    };
    check_fd(c, q, read(c, dq), loss);
    check_fd(c, k, read(c, dk), loss);
    check_fd(c, v, read(c, dv), loss);
  }
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
