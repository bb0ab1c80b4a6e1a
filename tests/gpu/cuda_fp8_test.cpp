// FP8 GEMMs on the cuda backend against the cpu backend's emulation, per tensor, blockwise and
// MXFP8, and against BF16 (tolerances: cuda_compute_test.cpp).
#include "tests/gpu/gpu_fixture.hpp"

namespace moebench {
namespace {

using namespace gpu_test;

struct LinearPrecisionGuard {  // both backends back to standard whatever a case does
  ~LinearPrecisionGuard() {
    for (Compute* c : {&cpu(), &dev()}) {
      c->set_linear_precision(LinearPrecision::standard);
      c->set_fp8_recipe(Fp8Recipe::tensor);
      c->begin_step();
    }
  }
};

// Tensors of a case are freed and reallocated, maybe at the same address: a weight's kept fp8
// copy must not outlive them (in the step, weights live for the run).
void new_step() {
  cpu().begin_step();
  dev().begin_step();
}

std::int64_t fp8_gemms() {
  return dev().fp8_gemm_counts().gemms;
}
std::int64_t fp8_fallbacks() {
  return dev().fp8_gemm_counts().fallbacks;
}

TEST_CASE("fp8 linear_gemm: NN, NT, TN, beta 0 and 1, bf16 and f32 C, K padded, vs the emulation") {
  LinearPrecisionGuard guard;
  cpu().set_linear_precision(LinearPrecision::fp8);
  dev().set_linear_precision(LinearPrecision::fp8);  // the H200 has FP8 tensor cores (cc 9.0)
  if (cuda_api() != nullptr) CHECK(cuda_api()->gemm_path().find("fp8 e4m3") != std::string::npos);
  // m and n multiples of 16; k = 40 exercises the zero padding of K to 48.
  const std::int64_t m = 48, n = 64, k = 40;
  const bool ta[] = {false, false, true}, tb[] = {false, true, false};
  for (int t = 0; t < 3; ++t) {
    for (float beta : {0.0f, 1.0f}) {
      for (bool f32_c : {false, true}) {
        CAPTURE(t);
        CAPTURE(beta);
        CAPTURE(f32_c);
        new_step();
        Twin a = ta[t] ? twin_random(k, m, 80, 2.0f) : twin_random(m, k, 80, 2.0f);
        Twin b = tb[t] ? twin_random(n, k, 81, 0.05f) : twin_random(k, n, 81, 0.05f);
        Twin c = twin_random(m, n, 82, 1.0f, f32_c);
        const std::int64_t ran = fp8_gemms(), fell = fp8_fallbacks();
        cpu().linear_gemm(ta[t], tb[t], 0.5f, a.cv(), b.cv(), beta, c.cv());
        dev().linear_gemm(ta[t], tb[t], 0.5f, a.dv(), b.dv(), beta, c.dv());
        check_twin(c, kOne, "fp8 linear_gemm");
        if (cuda_api() != nullptr) {
          CHECK(fp8_gemms() == ran + 1);  // the FP8 path ran, not the BF16 fallback
          CHECK(fp8_fallbacks() == fell);
        }
      }
    }
  }
}

// --fp8-recipe blockwise (Hopper) and mxfp8 (Blackwell) against the cpu backend's emulation of
// the same recipe: the same BF16 inputs, tiles, amax, scales and rounding give identical E4M3
// operands and scales, so as above only accumulation order and the BF16 output differ (kOne). A
// scale at the wrong place in cuBLASLt's layout, or a tile cut differently, is O(1) for the
// elements it touches: the inputs' magnitudes vary by 2^12 along both dimensions. A recipe the
// device cannot run is refused with a usage error, and the case says so and skips it.
TEST_CASE("fp8 recipes blockwise and mxfp8: forward, data and weight gradient vs the emulation") {
  LinearPrecisionGuard guard;
  // K = 300: partial 128- and 32-wide tiles; N = 256 spans two 128 x 128 weight blocks.
  const std::int64_t m = 64, n = 256, k = 300;
  for (Fp8Recipe recipe : {Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    CAPTURE(to_string(recipe));
    cpu().set_linear_precision(LinearPrecision::fp8);
    dev().set_linear_precision(LinearPrecision::fp8);
    cpu().set_fp8_recipe(recipe);
    if (!device_takes([&] { dev().set_fp8_recipe(recipe); })) continue;
    const bool ta[] = {false, false, true}, tb[] = {false, true, false};
    for (int t = 0; t < 3; ++t) {
      CAPTURE(t);
      new_step();
      auto varied = [](Vec v, std::int64_t cols) {
        for (std::size_t i = 0; i < v.size(); ++i) {
          const auto r = static_cast<std::int64_t>(i) / cols,
                     c = static_cast<std::int64_t>(i) % cols;
          v[i] = round_bf16(v[i] * std::ldexp(1.0f, static_cast<int>((r * 7 + c / 37) % 13) - 6));
        }
        return v;
      };
      const std::int64_t ar = ta[t] ? k : m, ac = ta[t] ? m : k;
      const std::int64_t br = tb[t] ? n : k, bc = tb[t] ? k : n;
      Twin a =
          twin(ar, ac, varied(random_host(static_cast<std::size_t>(ar * ac), 84, 1.0f, true), ac));
      Twin b =
          twin(br, bc, varied(random_host(static_cast<std::size_t>(br * bc), 85, 1.0f, true), bc));
      Twin c = twin_random(m, n, 86);
      const std::int64_t ran = fp8_gemms(), kept = dev().fp8_gemm_counts().weight_quantisations;
      for (int micro_batch = 0; micro_batch < 2; ++micro_batch) {
        cpu().linear_gemm(ta[t], tb[t], 1.0f, a.cv(), b.cv(), 0.0f, c.cv());
        dev().linear_gemm(ta[t], tb[t], 1.0f, a.dv(), b.dv(), 0.0f, c.dv());
        check_twin(c, kOne, "fp8 recipe linear_gemm");
      }
      if (cuda_api() != nullptr) {
        CHECK(fp8_gemms() == ran + 2);  // block-scaled FP8, not the BF16 fallback
        // B is a weight without trans_a: quantised once for both micro-batches.
        CHECK(dev().fp8_gemm_counts().weight_quantisations == kept + (ta[t] ? 0 : 1));
        CHECK(cuda_api()->gemm_path().find(to_string(recipe)) != std::string::npos);
      }
    }
  }
}

TEST_CASE("fp8 saved inputs: the weight gradient from the saved copy equals the one from x") {
  LinearPrecisionGuard guard;
  // 300 tokens: partial 32- and 128-wide tiles along the weight gradient's K.
  const std::int64_t tokens = 300, in = 64, out = 256;
  for (Fp8Recipe recipe : {Fp8Recipe::tensor, Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    CAPTURE(to_string(recipe));
    cpu().set_linear_precision(LinearPrecision::fp8);
    dev().set_linear_precision(LinearPrecision::fp8);
    cpu().set_fp8_recipe(recipe);
    if (!device_takes([&] { dev().set_fp8_recipe(recipe); })) continue;
    new_step();
    Twin x = twin_random(tokens, in, 91), dy = twin_random(tokens, out, 92);
    Twin want = twin(in, out, Vec(static_cast<std::size_t>(in * out), 0.0f));
    Twin got = twin(in, out, Vec(static_cast<std::size_t>(in * out), 0.0f));
    dev().linear_gemm(true, false, 1.0f, x.dv(), dy.dv(), 0.0f, want.dv());
    const Fp8Input saved = dev().save_linear_input(x.dv(), got.dv());
    const Fp8Input saved_cpu = cpu().save_linear_input(x.cv(), got.cv());
    CHECK(saved_cpu.fp8);
    if (cuda_api() != nullptr) {
      CHECK(saved.fp8);
      // One byte an element plus the scales, against BF16's two.
      CHECK(saved.data.bytes() < static_cast<std::size_t>(tokens * in) * 2);
    }
    dev().fill(x.dv(), 7.0f);  // the gradient reads only the copy
    dev().linear_wgrad(1.0f, saved, dy.dv(), 0.0f, got.dv());
    cpu().linear_wgrad(1.0f, saved_cpu, dy.cv(), 0.0f, got.cv());
    CHECK(read(dev(), got.dv()) == read(dev(), want.dv()));
    check_twin(got, kOne, "fp8 saved input weight gradient");
  }
}

TEST_CASE("fp8 linear_grouped_gemm: per-expert scales, forward, dgrad and wgrad vs the emulation") {
  LinearPrecisionGuard guard;
  cpu().set_linear_precision(LinearPrecision::fp8);
  dev().set_linear_precision(LinearPrecision::fp8);
  const std::vector<std::int64_t> rows = {16, 48, 32};
  // Weights of very different magnitudes: a scale shared across experts would show.
  ExpertGemms t(rows, 90, [](std::size_t e) { return e == 1 ? 1e-3f : 0.2f; });
  Twin &y = t.y, &dx = t.dx;
  std::vector<Twin>& dw = t.dw;
  auto problems = [&](bool on_dev, int which) { return t.problems(on_dev, which); };
  const bool ta[] = {false, false, true}, tb[] = {false, true, false};
  const float beta[] = {0.0f, 0.0f, 1.0f};  // wgrad accumulates, as the step's does
  for (int which = 0; which < 3; ++which) {
    CAPTURE(which);
    const std::int64_t ran = fp8_gemms();
    cpu().linear_grouped_gemm(ta[which], tb[which], 1.0f, problems(false, which), beta[which]);
    dev().linear_grouped_gemm(ta[which], tb[which], 1.0f, problems(true, which), beta[which]);
    if (cuda_api() != nullptr) CHECK(fp8_gemms() == ran + static_cast<std::int64_t>(rows.size()));
    if (which == 0) {
      // Per expert: each expert's rows against its own scale (the small expert's output is
      // 1e-3 of the others', so a tensor-wide check would hide it).
      std::int64_t first = 0;
      for (std::size_t e = 0; e < rows.size(); ++e) {
        check_close(read(dev(), y.dv().row_slice(first, rows[e])),
                    read(cpu(), y.cv().row_slice(first, rows[e])), kOne, "fp8 grouped forward");
        first += rows[e];
      }
    } else if (which == 1) {
      check_twin(dx, kOne, "fp8 grouped dgrad");
    } else {
      for (std::size_t e = 0; e < dw.size(); ++e) check_twin(dw[e], kOne, "fp8 grouped wgrad");
    }
  }
}

TEST_CASE("fp8 against bf16 on the device: within the E4M3 error, not equal") {
  LinearPrecisionGuard guard;
  const std::int64_t m = 64, n = 64, k = 256;
  const Vec av = random_host(m * k, 120, 1.0f, device_bf16(false));
  const Vec bv = random_host(k * n, 121, 1.0f, device_bf16(false));
  Twin a = twin(m, k, av), b = twin(k, n, bv);
  Tensor std_out = dev().alloc(m, n, DType::f32), fp8_out = dev().alloc(m, n, DType::f32);
  dev().linear_gemm(false, false, 1.0f, a.dv(), b.dv(), 0.0f, std_out);
  dev().set_linear_precision(LinearPrecision::fp8);
  dev().linear_gemm(false, false, 1.0f, a.dv(), b.dv(), 0.0f, fp8_out);
  const Vec s = read(dev(), std_out), q = read(dev(), fp8_out);
  // Each E4M3 input is within 2^-4 of its value relatively, so each product within ~2 x 2^-4:
  // |fp8 - bf16| <= 0.13 x sum_p |a_ip b_pj| (+ the BF16 path's own ~1e-3 of it). Random signs
  // make the mean error far smaller, but not zero.
  double mean = 0.0;
  std::size_t beyond = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double abs_sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p) abs_sum += std::abs(av[i * k + p] * bv[p * n + j]);
      const double err = std::abs(static_cast<double>(q[i * n + j]) - s[i * n + j]);
      if (!(err <= 0.13 * abs_sum)) ++beyond;
      mean += err / abs_sum;
    }
  }
  mean /= static_cast<double>(m * n);
  MESSAGE("fp8 vs bf16: mean |difference| " << mean << " of sum |a b|");
  CHECK(beyond == 0);
  CHECK(mean > 1e-4);
  CHECK(mean < 0.02);
}

}  // namespace
}  // namespace moebench
