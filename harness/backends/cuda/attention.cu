// Core attention of the cuda backend, over the operands by head in place (attention_operands.hpp).
//
// cuDNN's fused SDPA runs where it is asked for and takes the shape (attention_cudnn.hpp): on
// the operands themselves when each is one packed block per head, else a chunk of heads at a
// time gathered into packed scratch (MLA's key is [k_nope from kv | the shared rope key]), the
// gradients scattered back into the kv up-projection's layout.
//
// The batched-GEMM path reads every operand in place: per sequence and per chunk of heads, the
// scores S = scale (Q_k K^T + Q_rope K_rope^T) as strided-batched cuBLAS GEMMs (BF16 in, FP32
// out; a shared operand has batch stride 0, so MLA's k_nope and v are read from kv and its rope
// key from krope without copies), a fused kernel for the causal softmax (FP32, the log-sum-exp
// saved), then O = P V on BF16 probabilities. Backward recomputes P from the saved log-sum-exp;
// a shared operand's gradient is each head's product (BF16, as a packed gradient would be)
// summed in FP32 by one more GEMM against a row of ones. The seq x seq buffers of a chunk of
// heads live in scratch, the chunk sized to keep them under the backend's score budget; the
// causal half of the GEMMs is computed and masked.
#include <algorithm>
#include <climits>
#include <initializer_list>
#include <utility>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/kernel_work.cuh"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;

using bf16 = __nv_bfloat16;

int as_int(std::int64_t v, const char* what) {
  MB_CHECK(v >= 0 && v <= INT_MAX, what << " = " << v << " exceeds the cuBLAS integer range");
  return static_cast<int>(v);
}

// Row-major C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, operands `stride` elements
// apart, through column-major cuBLAS (C^T = op(B)^T op(A)^T). FP32 accumulation.
struct Operand {
  const void* data;
  cudaDataType_t type;
  std::int64_t ld;
  std::int64_t stride;
};

void batched_gemm(cublasHandle_t h, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                  std::int64_t k, float alpha, Operand a, Operand b, float beta, void* c,
                  cudaDataType_t c_type, std::int64_t ldc, std::int64_t stride_c,
                  std::int64_t batch) {
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      as_int(n, "attention N"), as_int(m, "attention M"), as_int(k, "attention K"), &alpha, b.data,
      b.type, as_int(b.ld, "attention ldb"), b.stride, a.data, a.type,
      as_int(a.ld, "attention lda"), a.stride, &beta, c, c_type, as_int(ldc, "attention ldc"),
      stride_c, as_int(batch, "attention batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

using Chunk = ScoreChunk;  // kernel_work.cuh

__device__ __forceinline__ std::int64_t visible_keys(const Chunk& ch, std::int64_t i) {
  return ch.causal ? i + 1 : ch.seq;
}

// P = softmax(S) over the visible keys (0 elsewhere), stats = log-sum-exp. One block per row.
__global__ void softmax_forward_kernel(Chunk ch, const float* s, bf16* p, Mat stats) {
  __shared__ float red[32];
  for (std::int64_t blk = blockIdx.x; blk < ch.heads * ch.seq; blk += gridDim.x) {
    const std::int64_t i = blk % ch.seq;
    const float* sr = s + blk * ch.seq;
    bf16* pr = p + blk * ch.seq;
    const std::int64_t n = visible_keys(ch, i);
    float mx = -INFINITY;
    for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, sr[j]);
    mx = block_max(mx, red);
    float sum = 0.0f;
    for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += ::expf(sr[j] - mx);
    const float lse = mx + ::logf(block_sum(sum, red));
    for (std::int64_t j = threadIdx.x; j < ch.seq; j += blockDim.x) {
      pr[j] = __float2bfloat16_rn(j < n ? ::expf(sr[j] - lse) : 0.0f);
    }
    if (threadIdx.x == 0) store(stats, ch.row0 + i, ch.head0 + blk / ch.seq, lse);
  }
}

// Backward over the chunk's scores (kernel_work.cuh): a score row per block row, keys along x.
__global__ void probs_kernel(Chunk ch, const float* s, const float* dp, const float* d,
                             std::int64_t heads_total, Mat stats, bf16* out) {
  probs_work(grid_pos(), ch, s, dp, d, heads_total, stats, out);
}

// D[r, h] = dot(dO[r, head h], O[r, head h]), one warp per (row, head).
__global__ void rowdot_kernel(Mat dout, Mat out, std::int64_t heads, std::int64_t v_dim, float* d) {
  const std::int64_t lane = threadIdx.x % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       w < dout.rows * heads; w += warps) {
    const std::int64_t r = w / heads;
    const std::int64_t c0 = (w % heads) * v_dim;
    float acc = 0.0f;
    for (std::int64_t c = lane; c < v_dim; c += 32)
      acc += load(dout, r, c0 + c) * load(out, r, c0 + c);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) d[w] = acc;
  }
}

// cuBLAS multiplies BF16 operands: the step stores q, k, v, out and their gradients so (the
// interface checked the shapes).
void require_bf16(const AttentionOperands& x, const char* what) {
  for (const HeadCols* o : {&x.q, &x.k, &x.k_rope, &x.v}) {
    MB_CHECK(o->width == 0 || o->m.dtype == DType::bf16,
             what << " is " << dtype_name(o->m.dtype) << "; cuda attention multiplies bf16");
  }
}

// Heads per chunk, so that the chunk's buffers (bytes_per_head each) fit the budget.
std::int64_t chunk_heads(std::int64_t heads, std::size_t bytes_per_head, std::size_t budget) {
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(budget / bytes_per_head), 1, heads);
}

// Heads h0, h0 + 1, ... of sequence b of an operand from column `col` of a head, as a batched
// GEMM operand: the heads head_stride apart (0 where shared).
Operand heads_of(const HeadCols& x, const AttentionShape& s, std::int64_t b, std::int64_t h0,
                 std::int64_t col = 0) {
  return {static_cast<const bf16*>(x.m.data) + b * s.seq_len * x.m.ld + h0 * x.head_stride + col,
          CUDA_R_16BF, x.m.ld, x.head_stride};
}
void* out_ptr(const Operand& o) {
  return const_cast<void*>(o.data);
}

unsigned capped_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(n, 1, std::int64_t{1} << 20));
}

// S (heads x t x t, FP32) = scale (Q_k K^T + Q_rope K_rope^T) for heads h0.. of sequence b.
void scores(cublasHandle_t h, const AttentionShape& s, const AttentionOperands& in, std::int64_t b,
            std::int64_t h0, std::int64_t heads, float* out) {
  const std::int64_t t = s.seq_len;
  batched_gemm(h, false, true, t, t, in.k.width, s.scale, heads_of(in.q, s, b, h0),
               heads_of(in.k, s, b, h0), 0.0f, out, CUDA_R_32F, t, t * t, heads);
  if (in.k_rope.width > 0) {
    batched_gemm(h, false, true, t, t, in.k_rope.width, s.scale,
                 heads_of(in.q, s, b, h0, in.k.width), heads_of(in.k_rope, s, b, h0), 1.0f, out,
                 CUDA_R_32F, t, t * t, heads);
  }
}

}  // namespace

bool CudaCompute::cudnn_attention(const AttentionShape& s, const AttentionOperands& in,
                                  const Mat& out, const Mat& stats, const Mat* dout,
                                  const AttentionOperands* grad) {
  if (attention_impl_ == AttentionImpl::gemm || !cudnn_) return false;
  if (in.packed()) {
    if (!use_cudnn(s, in.q.m, in.k.m, in.v.m, out, stats)) return false;
    if (grad == nullptr) {
      cudnn_->forward(s, in.q.m, in.k.m, in.v.m, out, stats);
    } else {
      cudnn_->backward(s, in.q.m, in.k.m, in.v.m, out, *dout, stats, grad->q.m, grad->k.m,
                       grad->v.m);
    }
    return true;
  }
  if (!in.q.packed()) return false;
  // Packed k and v for a chunk of heads, and with grad their gradients; the same chunks forward
  // and backward, so that both run the same implementation (their stats differ).
  const std::int64_t rows = s.batch * s.seq_len, qk = s.qk_dim, vd = s.v_dim;
  const auto per_head = static_cast<std::size_t>(rows * (qk + vd)) * 2 * sizeof(bf16);
  const std::int64_t hc = chunk_heads(s.heads, per_head, score_budget_);
  const auto chunk = [&](std::int64_t h0) {
    AttentionShape c = s;
    c.heads = std::min(hc, s.heads - h0);
    return c;
  };
  const auto packed = [&](void* p, std::int64_t heads, std::int64_t d) {
    return Mat{p, rows, heads * d, heads * d, DType::bf16};
  };
  const auto q_of = [&](const HeadCols& q, std::int64_t h0, std::int64_t heads) {
    return q.m.col_slice(h0 * qk, heads * qk);
  };
  for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {  // every chunk's shape, before any runs
    const AttentionShape c = chunk(h0);
    const Mat k{nullptr, rows, c.heads * qk, c.heads * qk, DType::bf16};
    const Mat v{nullptr, rows, c.heads * vd, c.heads * vd, DType::bf16};
    if (!use_cudnn(c, q_of(in.q, h0, c.heads), k, v, out.col_slice(h0 * vd, c.heads * vd),
                   stats.col_slice(h0, c.heads))) {
      return false;
    }
  }
  const std::size_t k_bytes = Carver::round(static_cast<std::size_t>(rows * hc * qk) * 2);
  const std::size_t v_bytes = Carver::round(static_cast<std::size_t>(rows * hc * vd) * 2);
  Carver carve(scratch_.get((grad != nullptr ? 2 : 1) * (k_bytes + v_bytes), stream_));
  void* kp = carve.take<bf16>(k_bytes / sizeof(bf16));
  void* vp = carve.take<bf16>(v_bytes / sizeof(bf16));
  void* dkp = grad != nullptr ? carve.take<bf16>(k_bytes / sizeof(bf16)) : nullptr;
  void* dvp = grad != nullptr ? carve.take<bf16>(v_bytes / sizeof(bf16)) : nullptr;
  for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
    const AttentionShape c = chunk(h0);
    const Mat k = packed(kp, c.heads, qk), v = packed(vp, c.heads, vd);
    const Mat o = out.col_slice(h0 * vd, c.heads * vd), st = stats.col_slice(h0, c.heads);
    gather_heads(in.k, in.k_rope, h0, k);
    gather_heads(in.v, HeadCols{}, h0, v);
    if (grad == nullptr) {
      cudnn_->forward(c, q_of(in.q, h0, c.heads), k, v, o, st);
      continue;
    }
    const Mat dk = packed(dkp, c.heads, qk), dv = packed(dvp, c.heads, vd);
    cudnn_->backward(c, q_of(in.q, h0, c.heads), k, v, o, dout->col_slice(h0 * vd, c.heads * vd),
                     st, q_of(grad->q, h0, c.heads), dk, dv);
    scatter_heads(dk, h0, c.heads, grad->k, grad->k_rope, h0 > 0);
    scatter_heads(dv, h0, c.heads, grad->v, HeadCols{}, false);
  }
  return true;
}

void CudaCompute::do_attention_forward(const AttentionShape& s, const AttentionOperands& in,
                                       const Mat& out, const Mat& stats) {
  require_bf16(in, "attention input");
  MB_CHECK(out.dtype == DType::bf16,
           "attention out is " << dtype_name(out.dtype) << "; cuda attention multiplies bf16");
  if (s.batch == 0) return;
  if (cudnn_attention(s, in, out, stats, nullptr, nullptr)) {
    ++cudnn_attention_calls_;
    return;
  }
  ++gemm_attention_calls_;
  const std::int64_t t = s.seq_len;
  const HeadCols o{out, s.v_dim, s.v_dim};
  const std::int64_t hc = chunk_heads(
      s.heads, static_cast<std::size_t>(t * t) * (sizeof(float) + sizeof(bf16)), score_budget_);
  const auto n = static_cast<std::size_t>(hc * t * t);
  Carver carve(
      scratch_.get(Carver::round(n * sizeof(float)) + Carver::round(n * sizeof(bf16)), stream_));
  auto* s_buf = carve.take<float>(n);
  auto* probs = carve.take<bf16>(n);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
      const std::int64_t heads = std::min(hc, s.heads - h0);
      const Chunk ch{t, heads, b * t, h0, s.causal};
      scores(cublas_, s, in, b, h0, heads, s_buf);
      softmax_forward_kernel<<<capped_blocks(heads * t), kThreads, 0, stream_>>>(ch, s_buf, probs,
                                                                                 stats);
      CUDA_CHECK_LAUNCH();
      const Operand oh = heads_of(o, s, b, h0);
      batched_gemm(cublas_, false, false, t, s.v_dim, t, 1.0f, {probs, CUDA_R_16BF, t, t * t},
                   heads_of(in.v, s, b, h0), 0.0f, out_ptr(oh), CUDA_R_16BF, oh.ld, oh.stride,
                   heads);
    }
  }
}

void CudaCompute::do_attention_backward(const AttentionShape& s, const AttentionOperands& in,
                                        const Mat& out, const Mat& dout, const Mat& stats,
                                        const AttentionOperands& grad) {
  require_bf16(in, "attention input");
  require_bf16(grad, "attention gradient");
  MB_CHECK(out.dtype == DType::bf16 && dout.dtype == DType::bf16,
           "attention out and dout are " << dtype_name(out.dtype) << " and "
                                         << dtype_name(dout.dtype)
                                         << "; cuda attention multiplies bf16");
  if (s.batch == 0) return;
  // The forward's choice for these operands (the stats are the implementation's own).
  if (cudnn_attention(s, in, out, stats, &dout, &grad)) return;
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
  const std::int64_t hc = chunk_heads(s.heads, per_head, score_budget_);
  const auto n = static_cast<std::size_t>(hc * t * t);
  const auto d_count = static_cast<std::size_t>(rows * s.heads);
  const auto x_count = static_cast<std::size_t>(hc * t * shared_width);
  const auto acc_count = static_cast<std::size_t>(t * s.qk_dim);
  Carver carve(scratch_.get(2 * Carver::round(n * sizeof(float)) + Carver::round(n * sizeof(bf16)) +
                                Carver::round(d_count * sizeof(float)) +
                                Carver::round(x_count * sizeof(bf16)) +
                                Carver::round(acc_count * sizeof(float)) +
                                Carver::round(static_cast<std::size_t>(hc) * sizeof(bf16)),
                            stream_));
  auto* s_buf = carve.take<float>(n);
  auto* dprobs = carve.take<float>(n);
  auto* probs = carve.take<bf16>(n);  // P, then dS in the same place
  auto* d = carve.take<float>(d_count);
  auto* x = carve.take<bf16>(x_count);
  auto* acc = carve.take<float>(acc_count);  // a shared part at its key columns x t
  auto* ones = carve.take<bf16>(static_cast<std::size_t>(hc));
  if (shared_width > 0) do_fill(Mat{ones, 1, hc, hc, DType::bf16}, 1.0f);

  rowdot_kernel<<<blocks_for(rows * s.heads * 32, kThreads), kThreads, 0, stream_>>>(
      dout, out, s.heads, s.v_dim, d);
  CUDA_CHECK_LAUNCH();
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
      const std::int64_t heads = std::min(hc, s.heads - h0);
      const Chunk ch{t, heads, b * t, h0, s.causal};
      const Operand doh = heads_of(d_o, s, b, h0);
      const Operand ph{probs, CUDA_R_16BF, t, t * t};
      const dim3 probs_grid = cell_grid(heads * t, t, kThreads);

      scores(cublas_, s, in, b, h0, heads, s_buf);
      probs_kernel<<<probs_grid, kThreads, 0, stream_>>>(ch, s_buf, nullptr, nullptr, s.heads,
                                                         stats, probs);
      CUDA_CHECK_LAUNCH();
      // dV = P^T dO, dP = dO V^T.
      const Operand dvh = heads_of(grad.v, s, b, h0);
      batched_gemm(cublas_, true, false, t, s.v_dim, t, 1.0f, ph, doh, 0.0f, out_ptr(dvh),
                   CUDA_R_16BF, dvh.ld, dvh.stride, heads);
      batched_gemm(cublas_, false, true, t, t, s.v_dim, 1.0f, doh, heads_of(in.v, s, b, h0), 0.0f,
                   dprobs, CUDA_R_32F, t, t * t, heads);
      // dS = P * (dP - D), over P (the dV GEMM before it on the stream has read P).
      probs_kernel<<<probs_grid, kThreads, 0, stream_>>>(ch, s_buf, dprobs, d, s.heads, stats,
                                                         probs);
      CUDA_CHECK_LAUNCH();
      // Per part of the key: dQ_part = scale dS K_part, dK_part = scale dS^T Q_part.
      std::int64_t col = 0;
      for (const auto& [k, dk] : {std::pair{&in.k, &grad.k}, std::pair{&in.k_rope, &grad.k_rope}}) {
        if (k->width == 0) continue;
        const std::int64_t w = k->width;
        const Operand dqh = heads_of(grad.q, s, b, h0, col), qh = heads_of(in.q, s, b, h0, col);
        batched_gemm(cublas_, false, false, t, w, t, s.scale, ph, heads_of(*k, s, b, h0), 0.0f,
                     out_ptr(dqh), CUDA_R_16BF, dqh.ld, dqh.stride, heads);
        if (!dk->shared()) {
          const Operand dkh = heads_of(*dk, s, b, h0);
          batched_gemm(cublas_, true, false, t, w, t, s.scale, ph, qh, 0.0f, out_ptr(dkh),
                       CUDA_R_16BF, dkh.ld, dkh.stride, heads);
        } else {
          // Each head's product, then acc (t x w) += ones (1 x heads) x X (heads x t w).
          float* part_acc = acc + col * t;
          batched_gemm(cublas_, true, false, t, w, t, s.scale, ph, qh, 0.0f, x, CUDA_R_16BF, w,
                       t * w, heads);
          batched_gemm(cublas_, false, false, 1, t * w, heads, 1.0f, {ones, CUDA_R_16BF, heads, 0},
                       {x, CUDA_R_16BF, t * w, 0}, h0 > 0 ? 1.0f : 0.0f, part_acc, CUDA_R_32F,
                       t * w, 0, 1);
          if (h0 + heads == s.heads) {
            convert(Mat{part_acc, t, w, w, DType::f32}, dk->m.row_slice(b * t, t).col_slice(0, w));
          }
        }
        col += w;
      }
    }
  }
}

}  // namespace moebench::cuda
