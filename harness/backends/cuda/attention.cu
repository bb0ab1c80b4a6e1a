// Core attention of the cuda backend: per sequence and per chunk of heads, the scores S =
// scale Q K^T as one strided-batched cuBLAS GEMM (BF16 in, FP32 out; a head's q/k/v are column
// blocks of the step's row-major matrices, so consecutive heads are a fixed stride apart), a
// fused kernel for the causal softmax (FP32, the log-sum-exp saved), then O = P V as a second
// batched GEMM on BF16 probabilities. Backward recomputes P from the saved log-sum-exp, as the
// cpu backend and fused kernels do. Head dims are free (192 for q/k and 128 for v in MLA).
//
// The seq x seq buffers of a chunk of heads live in scratch, the chunk sized to keep them under
// the backend's score budget; the causal half of the GEMMs is computed and masked (a
// flash-attention kernel, e.g. cuDNN's SDPA, would skip it: the next step if the attention phase
// dominates).
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
void require_bf16(std::initializer_list<std::pair<const Mat*, const char*>> mats) {
  for (const auto& [m, what] : mats) {
    MB_CHECK(m->dtype == DType::bf16,
             what << " is " << dtype_name(m->dtype) << "; cuda attention multiplies bf16");
  }
}

// Heads per chunk, so that the chunk's score buffers (bytes_per_score each) fit the budget.
std::int64_t chunk_heads(const AttentionShape& s, std::size_t bytes_per_score, std::size_t budget) {
  const std::size_t per_head = static_cast<std::size_t>(s.seq_len * s.seq_len) * bytes_per_score;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(budget / per_head), 1, s.heads);
}

// The first element of (sequence b, head h) in a per-head matrix of width `width`.
const void* head_ptr(const Mat& m, const AttentionShape& s, std::int64_t b, std::int64_t h,
                     std::int64_t width) {
  return static_cast<const bf16*>(m.data) + b * s.seq_len * m.ld + h * width;
}
void* head_ptr_mut(const Mat& m, const AttentionShape& s, std::int64_t b, std::int64_t h,
                   std::int64_t width) {
  return static_cast<bf16*>(m.data) + b * s.seq_len * m.ld + h * width;
}

unsigned capped_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(n, 1, std::int64_t{1} << 20));
}

}  // namespace

void CudaCompute::do_attention_forward(const AttentionShape& s, const Mat& q, const Mat& k,
                                       const Mat& v, const Mat& out, const Mat& stats) {
  require_bf16(
      {{&q, "attention q"}, {&k, "attention k"}, {&v, "attention v"}, {&out, "attention out"}});
  if (s.batch == 0) return;
  if (use_cudnn(s, q, k, v, out, stats)) {
    ++cudnn_attention_calls_;
    cudnn_->forward(s, q, k, v, out, stats);
    return;
  }
  ++gemm_attention_calls_;
  const std::int64_t t = s.seq_len;
  const std::int64_t hc = chunk_heads(s, sizeof(float) + sizeof(bf16), score_budget_);
  const auto n = static_cast<std::size_t>(hc * t * t);
  Carver carve(
      scratch_.get(Carver::round(n * sizeof(float)) + Carver::round(n * sizeof(bf16)), stream_));
  auto* scores = carve.take<float>(n);
  auto* probs = carve.take<bf16>(n);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
      const std::int64_t heads = std::min(hc, s.heads - h0);
      const Chunk ch{t, heads, b * t, h0, s.causal};
      batched_gemm(cublas_, false, true, t, t, s.qk_dim, s.scale,
                   {head_ptr(q, s, b, h0, s.qk_dim), CUDA_R_16BF, q.ld, s.qk_dim},
                   {head_ptr(k, s, b, h0, s.qk_dim), CUDA_R_16BF, k.ld, s.qk_dim}, 0.0f, scores,
                   CUDA_R_32F, t, t * t, heads);
      softmax_forward_kernel<<<capped_blocks(heads * t), kThreads, 0, stream_>>>(ch, scores, probs,
                                                                                 stats);
      CUDA_CHECK_LAUNCH();
      batched_gemm(cublas_, false, false, t, s.v_dim, t, 1.0f, {probs, CUDA_R_16BF, t, t * t},
                   {head_ptr(v, s, b, h0, s.v_dim), CUDA_R_16BF, v.ld, s.v_dim}, 0.0f,
                   head_ptr_mut(out, s, b, h0, s.v_dim), CUDA_R_16BF, out.ld, s.v_dim, heads);
    }
  }
}

void CudaCompute::do_attention_backward(const AttentionShape& s, const Mat& q, const Mat& k,
                                        const Mat& v, const Mat& out, const Mat& dout,
                                        const Mat& stats, const Mat& dq, const Mat& dk,
                                        const Mat& dv) {
  require_bf16({{&q, "attention q"},
                {&k, "attention k"},
                {&v, "attention v"},
                {&out, "attention out"},
                {&dout, "attention dout"},
                {&dq, "attention dq"},
                {&dk, "attention dk"},
                {&dv, "attention dv"}});
  // The forward's choice for this shape (the stats are the implementation's own).
  if (s.batch > 0 && use_cudnn(s, q, k, v, out, stats)) {
    cudnn_->backward(s, q, k, v, out, dout, stats, dq, dk, dv);
    return;
  }
  const std::int64_t rows = s.batch * s.seq_len;
  if (s.batch == 0) return;
  const std::int64_t t = s.seq_len;
  const std::int64_t hc = chunk_heads(s, 2 * sizeof(float) + sizeof(bf16), score_budget_);
  const auto n = static_cast<std::size_t>(hc * t * t);
  const auto d_count = static_cast<std::size_t>(rows * s.heads);
  Carver carve(scratch_.get(2 * Carver::round(n * sizeof(float)) + Carver::round(n * sizeof(bf16)) +
                                Carver::round(d_count * sizeof(float)),
                            stream_));
  auto* scores = carve.take<float>(n);
  auto* dprobs = carve.take<float>(n);
  auto* probs = carve.take<bf16>(n);  // P, then dS in the same place
  auto* d = carve.take<float>(d_count);

  rowdot_kernel<<<blocks_for(rows * s.heads * 32, kThreads), kThreads, 0, stream_>>>(
      dout, out, s.heads, s.v_dim, d);
  CUDA_CHECK_LAUNCH();
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
      const std::int64_t heads = std::min(hc, s.heads - h0);
      const Chunk ch{t, heads, b * t, h0, s.causal};
      const Operand qh{head_ptr(q, s, b, h0, s.qk_dim), CUDA_R_16BF, q.ld, s.qk_dim};
      const Operand kh{head_ptr(k, s, b, h0, s.qk_dim), CUDA_R_16BF, k.ld, s.qk_dim};
      const Operand vh{head_ptr(v, s, b, h0, s.v_dim), CUDA_R_16BF, v.ld, s.v_dim};
      const Operand doh{head_ptr(dout, s, b, h0, s.v_dim), CUDA_R_16BF, dout.ld, s.v_dim};
      const Operand ph{probs, CUDA_R_16BF, t, t * t};
      const dim3 probs_grid = cell_grid(heads * t, t, kThreads);

      batched_gemm(cublas_, false, true, t, t, s.qk_dim, s.scale, qh, kh, 0.0f, scores, CUDA_R_32F,
                   t, t * t, heads);
      probs_kernel<<<probs_grid, kThreads, 0, stream_>>>(ch, scores, nullptr, nullptr, s.heads,
                                                         stats, probs);
      CUDA_CHECK_LAUNCH();
      // dV = P^T dO, dP = dO V^T.
      batched_gemm(cublas_, true, false, t, s.v_dim, t, 1.0f, ph, doh, 0.0f,
                   head_ptr_mut(dv, s, b, h0, s.v_dim), CUDA_R_16BF, dv.ld, s.v_dim, heads);
      batched_gemm(cublas_, false, true, t, t, s.v_dim, 1.0f, doh, vh, 0.0f, dprobs, CUDA_R_32F, t,
                   t * t, heads);
      // dS = P * (dP - D), over P (the dV GEMM before it on the stream has read P).
      probs_kernel<<<probs_grid, kThreads, 0, stream_>>>(ch, scores, dprobs, d, s.heads, stats,
                                                         probs);
      CUDA_CHECK_LAUNCH();
      // dQ = scale dS K, dK = scale dS^T Q.
      batched_gemm(cublas_, false, false, t, s.qk_dim, t, s.scale, ph, kh, 0.0f,
                   head_ptr_mut(dq, s, b, h0, s.qk_dim), CUDA_R_16BF, dq.ld, s.qk_dim, heads);
      batched_gemm(cublas_, true, false, t, s.qk_dim, t, s.scale, ph, qh, 0.0f,
                   head_ptr_mut(dk, s, b, h0, s.qk_dim), CUDA_R_16BF, dk.ld, s.qk_dim, heads);
    }
  }
}

}  // namespace moebench::cuda
