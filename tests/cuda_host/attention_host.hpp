// Helpers of the host-run attention tests (attention_gemm_test.cu, attention_packed_test.cu):
// operands held twice, BF16 for the code under test and the same values in FP32 for the cpu
// backend, and the comparison against the cpu backend's result.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/compute/attention_operands.hpp"
#include "harness/math/random.hpp"

namespace moebench::cuda::host_attention {

using bf16 = __nv_bfloat16;

// The cases' MLA: 5 heads, k_nope 8, rope 4, v 6; 2 sequences of 7 tokens.
constexpr MlaDims kMla{5, 8, 4, 6};
// A case's sizes: the dims, the shape, token rows and the widths of q (and k) and of v.
struct MlaCase {
  MlaDims md;
  AttentionShape s;
  std::int64_t rows, qc, vc;
};
inline MlaCase mla_case(bool causal) {
  const AttentionShape s{2, 7, kMla.heads, kMla.dq(), kMla.dv, 1.0f / std::sqrt(12.0f), causal};
  return MlaCase{kMla, s, s.batch * s.seq_len, kMla.heads * kMla.dq(), kMla.heads * kMla.dv};
}

// The executors' scratch: every call a fresh buffer of BF16 NaNs (NaNs as FP32 too), so what the
// orchestration reads it must have written.
struct HostScratch {
  std::vector<uint4> buffer;
  void* get(std::size_t bytes) {
    buffer.assign((bytes + 15) / 16, uint4{0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u});
    return buffer.data();
  }
};

// A host matrix twice: BF16 for the executor, the same values in FP32 for the cpu backend.
struct Pair {
  std::vector<bf16> dev;
  Tensor ref;
  std::int64_t rows, cols;
  Mat dv() { return Mat{dev.data(), rows, cols, cols, DType::bf16}; }
  Mat cv() const { return ref.view(); }
  // The cpu backend's copy set to the executor's values (so both sides go on from the same ones).
  void sync_ref(CpuCompute& c) {
    std::vector<float> v(dev.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = __bfloat162float(dev[i]);
    c.upload(v.data(), ref);
  }
};

inline Pair pair(CpuCompute& c, std::int64_t rows, std::int64_t cols, std::uint64_t stream) {
  Pair p{std::vector<bf16>(static_cast<std::size_t>(rows * cols)), c.alloc(rows, cols, DType::f32),
         rows, cols};
  for (std::size_t i = 0; i < p.dev.size(); ++i)
    p.dev[i] = __float2bfloat16_rn(uniform_pm1(31, stream, i));
  p.sync_ref(c);
  return p;
}

// The log-sum-exp statistics (rows x heads, FP32) twice: on the host for the executor, a tensor
// for the cpu backend.
struct Stats {
  std::vector<float> dev;
  Tensor ref;
  Mat dv() { return Mat{dev.data(), ref.rows(), ref.cols(), ref.cols(), DType::f32}; }
};

inline Stats stats_pair(CpuCompute& c, std::int64_t rows, std::int64_t heads) {
  return Stats{std::vector<float>(static_cast<std::size_t>(rows * heads)),
               c.alloc(rows, heads, DType::f32)};
}

// got (BF16 or FP32 on the host) against the cpu backend's FP32, within tol of the largest
// magnitude.
inline void check_close(const Mat& got, CpuCompute& c, const Tensor& want, double tol,
                        const std::string& what) {
  std::vector<float> w(static_cast<std::size_t>(want.numel()));
  c.download(want, w.data());
  double scale = 0.0;
  for (float x : w) scale = std::max(scale, std::fabs(static_cast<double>(x)));
  std::int64_t bad = 0, first = -1;
  for (std::int64_t r = 0; r < got.rows; ++r) {
    for (std::int64_t col = 0; col < got.cols; ++col) {
      const double g = load(got, r, col), e = w[static_cast<std::size_t>(r * got.cols + col)];
      if (!(std::fabs(g - e) <= tol * scale)) {
        if (first < 0) first = r * got.cols + col;
        ++bad;
      }
    }
  }
  INFO(what << ": " << bad << " of " << got.rows * got.cols << " beyond " << tol * scale
            << " (scale " << scale << "), first at " << first);
  CHECK(bad == 0);
}

}  // namespace moebench::cuda::host_attention
