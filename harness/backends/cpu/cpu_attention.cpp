// The cpu backend's core attention: loops per sequence and head over the callers' views (the
// causal masked softmax in FP32, its log-sum-exp saved), GEMMs through CBLAS.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/cpu/cpu_rows.hpp"

namespace moebench {

using cpu::blas_int;
using cpu::row_f32;

namespace {

// The interface checked the shapes; every dimension and ld handed to CBLAS below fits its int
// (so plain casts are safe there).
void check_blas_range(const AttentionShape& s, std::initializer_list<const HeadCols*> ops) {
  for (const HeadCols* x : ops) blas_int(x->m.ld, "attention ld");
  blas_int(s.seq_len * s.seq_len, "seq_len^2");
}

// Row-major C = alpha op(A) op(B) + beta C over raw pointers (dimensions checked above).
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// Head h of sequence b of an operand, from column `col` of the head, and its leading dimension.
struct HeadView {
  float* p;
  std::int64_t ld;
};
HeadView head(const HeadCols& x, const AttentionShape& s, std::int64_t b, std::int64_t h,
              std::int64_t col = 0) {
  return {x.head(h).as<float>() + b * s.seq_len * x.m.ld + col, x.m.ld};
}

// Visible keys of query row i.
std::int64_t visible(const AttentionShape& s, std::int64_t i) {
  return s.causal ? i + 1 : s.seq_len;
}

// p (seq x seq) = scale (Q_k K^T + Q_rope K_rope^T) for one head.
void head_scores(const AttentionShape& s, const AttentionOperands& in, std::int64_t b,
                 std::int64_t h, float* p) {
  const std::int64_t t = s.seq_len;
  const HeadView q = head(in.q, s, b, h), k = head(in.k, s, b, h);
  sgemm(false, true, t, t, in.k.width, s.scale, q.p, q.ld, k.p, k.ld, 0.0f, p, t);
  if (in.k_rope.width > 0) {
    const HeadView qr = head(in.q, s, b, h, in.k.width), kr = head(in.k_rope, s, b, h);
    sgemm(false, true, t, t, in.k_rope.width, s.scale, qr.p, qr.ld, kr.p, kr.ld, 1.0f, p, t);
  }
}

}  // namespace

void CpuCompute::do_attention_forward(const AttentionShape& s, const AttentionOperands& in,
                                      const Mat& out, const Mat& stats) {
  const HeadCols o{out, s.v_dim, s.v_dim};
  check_blas_range(s, {&in.q, &in.k, &in.k_rope, &in.v, &o});
  const std::int64_t t = s.seq_len;
  float* p = scratch(static_cast<std::size_t>(t * t));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      head_scores(s, in, b, h, p);
      for (std::int64_t i = 0; i < t; ++i) {
        float* pr = p + i * t;
        const std::int64_t n = visible(s, i);
        float mx = pr[0];
        for (std::int64_t j = 1; j < n; ++j) mx = std::max(mx, pr[j]);
        float sum = 0.0f;
        for (std::int64_t j = 0; j < n; ++j) sum += ::expf(pr[j] - mx);
        const float lse = mx + ::logf(sum);
        for (std::int64_t j = 0; j < n; ++j) pr[j] = ::expf(pr[j] - lse);
        std::fill(pr + n, pr + t, 0.0f);
        row_f32(stats, b * t + i)[h] = lse;
      }
      const HeadView v = head(in.v, s, b, h), oh = head(o, s, b, h);
      sgemm(false, false, t, s.v_dim, t, 1.0f, p, t, v.p, v.ld, 0.0f, oh.p, oh.ld);
    }
  }
}

void CpuCompute::do_attention_backward(const AttentionShape& s, const AttentionOperands& in,
                                       const Mat& out, const Mat& dout, const Mat& stats,
                                       const AttentionOperands& grad) {
  const HeadCols o{out, s.v_dim, s.v_dim}, d_o{dout, s.v_dim, s.v_dim};
  check_blas_range(
      s, {&in.q, &in.k, &in.k_rope, &in.v, &o, &d_o, &grad.q, &grad.k, &grad.k_rope, &grad.v});
  const std::int64_t t = s.seq_len;
  float* p = scratch(static_cast<std::size_t>(2 * t * t));
  float* dp = p + t * t;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      const HeadView v = head(in.v, s, b, h), oh = head(o, s, b, h), doh = head(d_o, s, b, h);
      head_scores(s, in, b, h, p);
      for (std::int64_t i = 0; i < t; ++i) {
        float* pr = p + i * t;
        const std::int64_t n = visible(s, i);
        const float lse = row_f32(stats, b * t + i)[h];
        for (std::int64_t j = 0; j < n; ++j) pr[j] = ::expf(pr[j] - lse);
        std::fill(pr + n, pr + t, 0.0f);
      }
      // dV = P^T dO, dP = dO V^T.
      const HeadView dv = head(grad.v, s, b, h);
      sgemm(true, false, t, s.v_dim, t, 1.0f, p, t, doh.p, doh.ld, 0.0f, dv.p, dv.ld);
      sgemm(false, true, t, t, s.v_dim, 1.0f, doh.p, doh.ld, v.p, v.ld, 0.0f, dp, t);
      // dS = P * (dP - rowsum(dO * O)), in place of dP.
      for (std::int64_t i = 0; i < t; ++i) {
        const float* o_row = oh.p + i * oh.ld;
        const float* do_row = doh.p + i * doh.ld;
        float d = 0.0f;
        for (std::int64_t c = 0; c < s.v_dim; ++c) d += do_row[c] * o_row[c];
        const float* pr = p + i * t;
        float* dr = dp + i * t;
        for (std::int64_t j = 0; j < t; ++j) dr[j] = pr[j] * (dr[j] - d);
      }
      // Per part of the key: dQ_part = scale dS K_part, dK_part = scale dS^T Q_part (summed
      // over the heads where the part is shared).
      std::int64_t col = 0;
      for (const auto& [k, dk] : {std::pair{&in.k, &grad.k}, std::pair{&in.k_rope, &grad.k_rope}}) {
        if (k->width == 0) continue;
        const HeadView kh = head(*k, s, b, h), dkh = head(*dk, s, b, h);
        const HeadView qh = head(in.q, s, b, h, col), dqh = head(grad.q, s, b, h, col);
        sgemm(false, false, t, k->width, t, s.scale, dp, t, kh.p, kh.ld, 0.0f, dqh.p, dqh.ld);
        const float beta = dk->shared() && h > 0 ? 1.0f : 0.0f;
        sgemm(true, false, t, k->width, t, s.scale, dp, t, qh.p, qh.ld, beta, dkh.p, dkh.ld);
        col += k->width;
      }
    }
  }
}

}  // namespace moebench
