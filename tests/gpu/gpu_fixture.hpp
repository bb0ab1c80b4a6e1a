// What the GPU tests share: both backends, seeded inputs uploaded to each as twins, and the
// comparisons with their stated tolerances (cuda_compute_test.cpp's header says how they are set).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "harness/backends/cuda/cuda_compute.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/compute/compute.hpp"
#include "harness/math/random.hpp"
#include "harness/math/route.hpp"

namespace moebench::gpu_test {

using Vec = std::vector<float>;
using IVec = std::vector<std::int32_t>;

constexpr double kOne = 1e-2;
constexpr double kChained = 3e-2;

// Round to nearest even BF16, as __float2bfloat16_rn does (finite inputs).
inline float round_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, sizeof(r));
  return r;
}

struct Backends {
  std::unique_ptr<Compute> cpu = make_compute(ComputeBackend::cpu, 0, 1);
  std::unique_ptr<Compute> dev =
      make_compute(parse_compute_backend(std::getenv("MOEBENCH_GPU_TEST_BACKEND")
                                             ? std::getenv("MOEBENCH_GPU_TEST_BACKEND")
                                             : "cuda"),
                   0, 1);
};

inline Backends& backends() {
  static Backends b;
  return b;
}
inline Compute& cpu() {
  return *backends().cpu;
}
inline Compute& dev() {
  return *backends().dev;
}
inline CudaComputeApi* cuda_api() {
  return dynamic_cast<CudaComputeApi*>(&dev());
}

// A tensor on both backends holding the same values: FP32 on the cpu; on the device, the
// activation dtype (BF16 on cuda) unless `f32`.
struct Twin {
  Tensor c;
  Tensor d;
  Mat cv() const { return c.view(); }
  Mat dv() const { return d.view(); }
};

inline bool device_bf16(bool f32) {
  return !f32 && dev().activation_dtype() == DType::bf16;
}

inline Vec random_host(std::size_t n, std::uint64_t stream, float scale, bool round) {
  Vec v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = scale * uniform_pm1(77, stream, i);
    if (round) v[i] = round_bf16(v[i]);
  }
  return v;
}

inline Twin twin(std::int64_t rows, std::int64_t cols, const Vec& host, bool f32 = false) {
  Twin t{cpu().alloc(rows, cols, DType::f32),
         dev().alloc(rows, cols, f32 ? DType::f32 : dev().activation_dtype())};
  cpu().upload(host.data(), t.c);
  dev().upload(host.data(), t.d);
  return t;
}

inline Twin twin_random(std::int64_t rows, std::int64_t cols, std::uint64_t stream,
                        float scale = 1.0f, bool f32 = false) {
  return twin(rows, cols,
              random_host(static_cast<std::size_t>(rows * cols), stream, scale, device_bf16(f32)),
              f32);
}

inline Twin twin_index(const IVec& idx) {
  const auto n = static_cast<std::int64_t>(idx.size());
  Twin t{cpu().alloc(n, 1, DType::i32), dev().alloc(n, 1, DType::i32)};
  cpu().upload_i32(idx.data(), t.c);
  dev().upload_i32(idx.data(), t.d);
  return t;
}

inline Vec read(Compute& c, Mat m) {
  Vec v(static_cast<std::size_t>(m.numel()));
  c.download(m, v.data());
  return v;
}

inline IVec read_i32(Compute& c, Mat m) {
  IVec v(static_cast<std::size_t>(m.numel()));
  c.download_i32(m, v.data());
  return v;
}

// Every element within tol * max|ref| (and a floor for an all-zero reference).
inline void check_close(const Vec& got, const Vec& ref, double tol, const std::string& what) {
  REQUIRE(got.size() == ref.size());
  double scale = 0.0;
  for (float r : ref) scale = std::max(scale, static_cast<double>(std::abs(r)));
  const double limit = tol * std::max(scale, 1e-6);
  std::size_t wrong = 0, worst = 0;
  double worst_err = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (!(err <= limit)) ++wrong;  // NaN counts as wrong
    if (!(err <= worst_err)) {
      worst_err = err;
      worst = i;
    }
  }
  INFO(what << ": " << wrong << " of " << ref.size() << " beyond " << limit << " (scale " << scale
            << "); worst element " << worst << ": got " << got[worst] << ", expected "
            << ref[worst]);
  CHECK(wrong == 0);
}

inline void check_twin(const Twin& t, double tol, const std::string& what) {
  check_close(read(dev(), t.dv()), read(cpu(), t.cv()), tol, what);
}

// Runs `set` on the device backend (an implementation or recipe it may not have); false, and
// the case says why it skips, where the backend refuses it with a usage error.
template <typename Set>
inline bool device_takes(Set&& set) {
  try {
    set();
    return true;
  } catch (const UsageError& e) {
    MESSAGE("skipped on this device: " << e.what());
    return false;
  }
}

// The experts' GEMMs of one MoE layer on both backends: tokens x (h) in row blocks per expert,
// each expert's (h x f) weight and weight gradient. problems(on_dev, which) gives the forward
// (0: y = x W), dgrad (1: dx = dy W^T) or wgrad (2: dW = x^T dy) problems, one per expert.
struct ExpertGemms {
  Twin x, y, dy, dx;
  std::vector<Twin> w, dw;
  std::vector<std::int64_t> rows;

  // f32_dw: the weight gradients in FP32, as the step's main gradients are.
  template <typename WeightScale>
  ExpertGemms(std::vector<std::int64_t> expert_rows, std::uint64_t seed, WeightScale weight_scale,
              bool f32_dw = false)
      : rows(std::move(expert_rows)) {
    constexpr std::int64_t h = 64, f = 48;
    std::int64_t total = 0;
    for (auto r : rows) total += r;
    x = twin_random(total, h, seed);
    y = twin_random(total, f, seed + 1);
    dy = twin_random(total, f, seed + 2);
    dx = twin_random(total, h, seed + 3);
    for (std::size_t e = 0; e < rows.size(); ++e) {
      w.push_back(twin_random(h, f, seed + 10 + e, weight_scale(e)));
      dw.push_back(twin_random(h, f, seed + 20 + e, 1.0f, f32_dw));
    }
  }

  std::vector<GemmProblem> problems(bool on_dev, int which) const {
    std::vector<GemmProblem> p;
    std::int64_t first = 0;
    for (std::size_t e = 0; e < rows.size(); ++e) {
      auto v = [&](const Twin& t) { return on_dev ? t.dv() : t.cv(); };
      const auto slice = [&](const Twin& t) { return v(t).row_slice(first, rows[e]); };
      if (which == 0) p.push_back({slice(x), v(w[e]), slice(y)});
      if (which == 1) p.push_back({slice(dy), v(w[e]), slice(dx)});
      if (which == 2) p.push_back({slice(x), slice(dy), v(dw[e])});
      first += rows[e];
    }
    return p;
  }
};

}  // namespace moebench::gpu_test
