// The cpu backend's FP8 emulation (cpu_fp8.cpp) against independent E4M3 computations, per
// tensor, blockwise and MXFP8; weights quantised once per step.
#include "harness/backends/cpu/cpu_compute.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "harness/math/fp8.hpp"
#include "tests/unit/cpu_fixture.hpp"

namespace moebench {
namespace {

using namespace test;

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

}  // namespace
}  // namespace moebench
