// The cuda backend's batched-GEMM attention, its orchestration written once over an executor `X`:
// attention.cu runs it with cuBLAS and the kernels, tests/cuda_host with a host emulation of
// cublasGemmStridedBatchedEx's column-major contract, so the operand pointers, strides, leading
// dimensions, head chunks and the shared key's reduction are checked without a GPU.
//
// Every operand is read in place (attention_operands.hpp): per sequence and per chunk of heads,
// S = scale (Q_k K^T + Q_rope K_rope^T) as strided-batched GEMMs (BF16 in, FP32 out; a shared
// operand has batch stride 0, so MLA's k_nope and v are read from kv and its rope key from krope
// without copies), the causal softmax (FP32, the log-sum-exp saved), then O = P V on BF16
// probabilities. Backward recomputes P from the saved log-sum-exp; a shared operand's gradient is
// each head's product (BF16, as a packed gradient would be) summed in FP32 by one more GEMM
// against a row of ones. The seq x seq buffers of a chunk of heads live in scratch, the chunk
// sized to keep them under the score budget; the causal half is computed and masked.
//
// The executor provides:
//   gemm(const GemmCall&)                     cublasGemmStridedBatchedEx with these arguments
//   softmax(chunk, scores, probs, stats)      P and the log-sum-exp over a chunk's scores
//   probs(chunk, scores, dp, d, heads, stats, out)   probs_work over the chunk (kernel_work.cuh)
//   rowdot(dout, out, heads, v_dim, d)        D[r, h] = dot(dO, O) of head h of row r
//   fill(Mat, value), convert(src, dst)       as the backend's element-wise ops
//   scratch(bytes) -> void*                   the scratch buffer (valid until the next call)
//   score_budget() -> std::size_t             bytes a chunk's buffers may take
#pragma once

#include <cublas_api.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "harness/backends/cuda/cuda_backend.hpp"  // Carver
#include "harness/backends/cuda/cuda_check.hpp"    // cublas_int
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/kernel_work.cuh"
#include "harness/compute/attention_operands.hpp"

namespace moebench::cuda {

// A row-major batched operand: the matrices `stride` elements apart (0: one matrix for all).
struct Operand {
  const void* data;
  cudaDataType_t type;
  std::int64_t ld;
  std::int64_t stride;
};

// cublasGemmStridedBatchedEx's arguments (column-major, FP32 accumulation).
struct GemmCall {
  cublasOperation_t op_a, op_b;
  int m, n, k;
  float alpha;
  const void* a;
  cudaDataType_t a_type;
  int lda;
  long long stride_a;
  const void* b;
  cudaDataType_t b_type;
  int ldb;
  long long stride_b;
  float beta;
  void* c;
  cudaDataType_t c_type;
  int ldc;
  long long stride_c;
  int batch;
};

// Row-major C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch through column-major cuBLAS:
// C^T = op(B)^T op(A)^T, so cuBLAS's A is our B and its m our n.
inline GemmCall row_major_batched(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                                  std::int64_t k, float alpha, Operand a, Operand b, float beta,
                                  void* c, cudaDataType_t c_type, std::int64_t ldc,
                                  std::int64_t stride_c, std::int64_t batch) {
  return GemmCall{trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                  cublas_int(n, "attention N"),
                  cublas_int(m, "attention M"),
                  cublas_int(k, "attention K"),
                  alpha,
                  b.data,
                  b.type,
                  cublas_int(b.ld, "attention ldb"),
                  b.stride,
                  a.data,
                  a.type,
                  cublas_int(a.ld, "attention lda"),
                  a.stride,
                  beta,
                  c,
                  c_type,
                  cublas_int(ldc, "attention ldc"),
                  stride_c,
                  cublas_int(batch, "attention batch")};
}

// Heads per chunk, so that the chunk's buffers (bytes_per_head each) fit the budget.
inline std::int64_t chunk_heads(std::int64_t heads, std::size_t bytes_per_head,
                                std::size_t budget) {
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(budget / bytes_per_head), 1, heads);
}

// Heads h0, h0 + 1, ... of sequence b of a BF16 operand from column `col` of a head, as a batched
// GEMM operand: the heads head_stride apart (0 where shared).
inline Operand heads_of(const HeadCols& x, const AttentionShape& s, std::int64_t b, std::int64_t h0,
                        std::int64_t col = 0) {
  return {static_cast<const __nv_bfloat16*>(x.head(h0).data) + b * s.seq_len * x.m.ld + col,
          CUDA_R_16BF, x.m.ld, x.head_stride};
}
inline void* out_ptr(const Operand& o) {
  return const_cast<void*>(o.data);
}

// S (heads x t x t, FP32) = scale (Q_k K^T + Q_rope K_rope^T) for heads h0.. of sequence b.
template <typename X>
void attention_scores(X& x, const AttentionShape& s, const AttentionOperands& in, std::int64_t b,
                      std::int64_t h0, std::int64_t heads, float* out) {
  const std::int64_t t = s.seq_len;
  x.gemm(row_major_batched(false, true, t, t, in.k.width, s.scale, heads_of(in.q, s, b, h0),
                           heads_of(in.k, s, b, h0), 0.0f, out, CUDA_R_32F, t, t * t, heads));
  if (in.k_rope.width > 0) {
    x.gemm(row_major_batched(false, true, t, t, in.k_rope.width, s.scale,
                             heads_of(in.q, s, b, h0, in.k.width), heads_of(in.k_rope, s, b, h0),
                             1.0f, out, CUDA_R_32F, t, t * t, heads));
  }
}

template <typename X>
void gemm_attention_forward(X& x, const AttentionShape& s, const AttentionOperands& in,
                            const Mat& out, const Mat& stats) {
  using bf16 = __nv_bfloat16;
  const std::int64_t t = s.seq_len;
  const HeadCols o{out, s.v_dim, s.v_dim};
  const std::int64_t hc = chunk_heads(
      s.heads, static_cast<std::size_t>(t * t) * (sizeof(float) + sizeof(bf16)), x.score_budget());
  const auto n = static_cast<std::size_t>(hc * t * t);
  Carver carve(x.scratch(Carver::round(n * sizeof(float)) + Carver::round(n * sizeof(bf16))));
  auto* scores = carve.take<float>(n);
  auto* probs = carve.take<bf16>(n);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
      const std::int64_t heads = std::min(hc, s.heads - h0);
      const ScoreChunk ch{t, heads, b * t, h0, s.causal};
      attention_scores(x, s, in, b, h0, heads, scores);
      x.softmax(ch, scores, probs, stats);
      const Operand oh = heads_of(o, s, b, h0);
      x.gemm(row_major_batched(false, false, t, s.v_dim, t, 1.0f, {probs, CUDA_R_16BF, t, t * t},
                               heads_of(in.v, s, b, h0), 0.0f, out_ptr(oh), CUDA_R_16BF, oh.ld,
                               oh.stride, heads));
    }
  }
}

template <typename X>
void gemm_attention_backward(X& x, const AttentionShape& s, const AttentionOperands& in,
                             const Mat& out, const Mat& dout, const Mat& stats,
                             const AttentionOperands& grad) {
  using bf16 = __nv_bfloat16;
  const std::int64_t rows = s.batch * s.seq_len;
  const std::int64_t t = s.seq_len;
  const HeadCols o{out, s.v_dim, s.v_dim}, d_o{dout, s.v_dim, s.v_dim};
  // A shared part's per-head products (BF16), then their FP32 sum per sequence.
  std::int64_t shared_width = 0;
  for (const HeadCols* k : {&in.k, &in.k_rope}) {
    if (k->width > 0 && k->shared()) shared_width = std::max(shared_width, k->width);
  }
  const std::size_t per_head =
      static_cast<std::size_t>(t * t) * (2 * sizeof(float) + sizeof(bf16)) +
      static_cast<std::size_t>(t * shared_width) * sizeof(bf16);
  const std::int64_t hc = chunk_heads(s.heads, per_head, x.score_budget());
  const auto n = static_cast<std::size_t>(hc * t * t);
  const auto d_count = static_cast<std::size_t>(rows * s.heads);
  const auto x_count = static_cast<std::size_t>(hc * t * shared_width);
  const auto acc_count = static_cast<std::size_t>(t * s.qk_dim);
  Carver carve(x.scratch(2 * Carver::round(n * sizeof(float)) + Carver::round(n * sizeof(bf16)) +
                         Carver::round(d_count * sizeof(float)) +
                         Carver::round(x_count * sizeof(bf16)) +
                         Carver::round(acc_count * sizeof(float)) +
                         Carver::round(static_cast<std::size_t>(hc) * sizeof(bf16))));
  auto* scores = carve.take<float>(n);
  auto* dprobs = carve.take<float>(n);
  auto* probs = carve.take<bf16>(n);  // P, then dS in the same place
  auto* d = carve.take<float>(d_count);
  auto* per_head_products = carve.take<bf16>(x_count);
  auto* acc = carve.take<float>(acc_count);  // a shared part at its key columns x t
  auto* ones = carve.take<bf16>(static_cast<std::size_t>(hc));
  if (shared_width > 0) x.fill(Mat{ones, 1, hc, hc, DType::bf16}, 1.0f);

  x.rowdot(dout, out, s.heads, s.v_dim, d);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
      const std::int64_t heads = std::min(hc, s.heads - h0);
      const ScoreChunk ch{t, heads, b * t, h0, s.causal};
      const Operand doh = heads_of(d_o, s, b, h0);
      const Operand ph{probs, CUDA_R_16BF, t, t * t};

      attention_scores(x, s, in, b, h0, heads, scores);
      x.probs(ch, scores, nullptr, nullptr, s.heads, stats, probs);
      // dV = P^T dO, dP = dO V^T.
      const Operand dvh = heads_of(grad.v, s, b, h0);
      x.gemm(row_major_batched(true, false, t, s.v_dim, t, 1.0f, ph, doh, 0.0f, out_ptr(dvh),
                               CUDA_R_16BF, dvh.ld, dvh.stride, heads));
      x.gemm(row_major_batched(false, true, t, t, s.v_dim, 1.0f, doh, heads_of(in.v, s, b, h0),
                               0.0f, dprobs, CUDA_R_32F, t, t * t, heads));
      // dS = P * (dP - D), over P (the dV GEMM before it has read P).
      x.probs(ch, scores, dprobs, d, s.heads, stats, probs);
      // Per part of the key: dQ_part = scale dS K_part, dK_part = scale dS^T Q_part.
      std::int64_t col = 0;
      for (const auto& [k, dk] : {std::pair{&in.k, &grad.k}, std::pair{&in.k_rope, &grad.k_rope}}) {
        if (k->width == 0) continue;
        const std::int64_t w = k->width;
        const Operand dqh = heads_of(grad.q, s, b, h0, col), qh = heads_of(in.q, s, b, h0, col);
        x.gemm(row_major_batched(false, false, t, w, t, s.scale, ph, heads_of(*k, s, b, h0), 0.0f,
                                 out_ptr(dqh), CUDA_R_16BF, dqh.ld, dqh.stride, heads));
        if (!dk->shared()) {
          const Operand dkh = heads_of(*dk, s, b, h0);
          x.gemm(row_major_batched(true, false, t, w, t, s.scale, ph, qh, 0.0f, out_ptr(dkh),
                                   CUDA_R_16BF, dkh.ld, dkh.stride, heads));
        } else {
          // Each head's product, then acc (t x w) += ones (1 x heads) x products (heads x t w).
          float* part_acc = acc + col * t;
          x.gemm(row_major_batched(true, false, t, w, t, s.scale, ph, qh, 0.0f, per_head_products,
                                   CUDA_R_16BF, w, t * w, heads));
          x.gemm(row_major_batched(false, false, 1, t * w, heads, 1.0f,
                                   {ones, CUDA_R_16BF, heads, 0},
                                   {per_head_products, CUDA_R_16BF, t * w, 0}, h0 > 0 ? 1.0f : 0.0f,
                                   part_acc, CUDA_R_32F, t * w, 0, 1));
          if (h0 + heads == s.heads) {
            x.convert(Mat{part_acc, t, w, w, DType::f32},
                      dk->m.row_slice(b * t, t).col_slice(0, w));
          }
        }
        col += w;
      }
    }
  }
}

}  // namespace moebench::cuda
