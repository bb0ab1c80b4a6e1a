// Core attention of the cuda backend, over the operands by head in place (attention_operands.hpp).
//
// cuDNN's fused SDPA runs where it is asked for and takes the shape (harness/backends/cudnn), a
// chunk of heads at a time (attention_packed.cuh): q and the output in place, k and v in place
// where each is one packed block per head, else gathered into packed scratch (MLA's key is
// [k_nope from kv | the shared rope key]) and the gradients scattered back into the kv
// up-projection's layout; the statistics through packed scratch. Otherwise the batched GEMMs of
// attention_gemm.cuh run, with cuBLAS and the kernels below as their executor.
#include <algorithm>
#include <initializer_list>

#include "harness/backends/cuda/attention_gemm.cuh"
#include "harness/backends/cuda/attention_packed.cuh"
#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/kernel_work.cuh"
#include "harness/backends/cuda/row_work.cuh"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;

using bf16 = __nv_bfloat16;

// P = softmax(S) over the visible keys (0 elsewhere), stats = log-sum-exp: one block per score
// row (row_work.cuh), 16 bytes at a time where the rows allow.
__global__ void softmax_forward_kernel(ScoreChunk ch, Mat s, Mat p, Mat stats, bool vec) {
  __shared__ float red[32];
  BlockTeam team{red};
  for (std::int64_t blk = blockIdx.x; blk < ch.heads * ch.seq; blk += gridDim.x)
    softmax_row(team, ch, s, p, stats, blk, vec);
}

// Backward over the chunk's scores (kernel_work.cuh): a score row per block row, keys along x.
__global__ void probs_kernel(ScoreChunk ch, const float* s, const float* dp, const float* d,
                             std::int64_t heads_total, Mat stats, bf16* out, bool vec) {
  probs_work(grid_pos(), ch, s, dp, d, heads_total, stats, out, vec);
}

// D[r, h] = dot(dO[r, head h], O[r, head h]), one warp per (row, head) (row_work.cuh).
__global__ void rowdot_kernel(Mat dout, Mat out, std::int64_t heads, std::int64_t v_dim, float* d,
                              bool vec) {
  WarpTeam team;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       w < dout.rows * heads; w += warps) {
    rowdot_row(team, dout, out, heads, v_dim, w, d, vec);
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

unsigned capped_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(n, 1, std::int64_t{1} << 20));
}

}  // namespace

// attention_gemm.cuh's executor: cuBLAS and the kernels above on the backend's stream.
struct CudaCompute::AttentionDevice {
  CudaCompute& c;

  void gemm(const GemmCall& g) {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(c.cublas_, g.op_a, g.op_b, g.m, g.n, g.k, &g.alpha, g.a,
                                            g.a_type, g.lda, g.stride_a, g.b, g.b_type, g.ldb,
                                            g.stride_b, &g.beta, g.c, g.c_type, g.ldc, g.stride_c,
                                            g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  void softmax(const ScoreChunk& ch, const float* scores, bf16* probs, const Mat& stats) {
    const Mat s = ch.rows(scores, DType::f32), p = ch.rows(probs, DType::bf16);
    softmax_forward_kernel<<<capped_blocks(ch.heads * ch.seq), kThreads, 0, c.stream_>>>(
        ch, s, p, stats, vec_rows_ok(s) && vec_rows_ok(p));
    CUDA_CHECK_LAUNCH();
  }
  void probs(const ScoreChunk& ch, const float* scores, const float* dp, const float* d,
             std::int64_t heads_total, const Mat& stats, bf16* out) {
    const bool vec = probs_vec(ch, scores, dp, out);
    probs_kernel<<<c.cell_grid(ch.heads * ch.seq, cell_columns(ch.seq, vec), kThreads), kThreads, 0,
                   c.stream_>>>(ch, scores, dp, d, heads_total, stats, out, vec);
    CUDA_CHECK_LAUNCH();
  }
  void rowdot(const Mat& dout, const Mat& out, std::int64_t heads, std::int64_t v_dim, float* d) {
    const bool vec = rowdot_vec(dout, out, v_dim);
    rowdot_kernel<<<c.blocks_for(dout.rows * heads * 32, kThreads), kThreads, 0, c.stream_>>>(
        dout, out, heads, v_dim, d, vec);
    CUDA_CHECK_LAUNCH();
  }
  void fill(const Mat& x, float value) { c.do_fill(x, value); }
  void convert(const Mat& src, const Mat& dst) { c.convert(src, dst); }
  void* scratch(std::size_t bytes) { return c.scratch_.get(bytes, c.stream_); }
  std::size_t score_budget() const { return c.score_budget_; }
};

// attention_packed.cuh's executor: cuDNN's SDPA and the gather/scatter kernels.
struct CudaCompute::CudnnDevice {
  CudaCompute& c;

  bool supports(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                const Mat& stats) {
    return c.use_cudnn(s, q, k, v, out, stats);
  }
  void forward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
               const Mat& stats) {
    c.cudnn_->forward(s, q, k, v, out, stats);
  }
  void backward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                const Mat& dout, const Mat& stats, const Mat& dq, const Mat& dk, const Mat& dv) {
    c.cudnn_->backward(s, q, k, v, out, dout, stats, dq, dk, dv);
  }
  void gather(const HeadCols& a, const HeadCols& b, std::int64_t h0, const Mat& packed) {
    c.gather_heads(a, b, h0, packed);
  }
  void scatter(const Mat& packed, std::int64_t h0, std::int64_t heads, const HeadCols& a,
               const HeadCols& b, bool accumulate) {
    c.scatter_heads(packed, h0, heads, a, b, accumulate);
  }
  void pack_stats(const Mat& stats, std::int64_t seq, const Mat& packed) {
    c.move_stats(stats, seq, packed, true);
  }
  void unpack_stats(const Mat& packed, std::int64_t seq, const Mat& stats) {
    c.move_stats(stats, seq, packed, false);
  }
  void* scratch(std::size_t bytes) { return c.scratch_.get(bytes, c.stream_); }
  std::size_t score_budget() const { return c.score_budget_; }
};

bool CudaCompute::cudnn_attention(const AttentionShape& s, const AttentionOperands& in,
                                  const Mat& out, const Mat& stats, const Mat* dout,
                                  const AttentionOperands* grad) {
  if (attention_impl_ == AttentionImpl::gemm || !cudnn_) return false;
  CudnnDevice p{*this};
  return packed_attention(p, s, in, out, stats, dout, grad);
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
  AttentionDevice x{*this};
  gemm_attention_forward(x, s, in, out, stats);
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
  if (cudnn_attention(s, in, out, stats, &dout, &grad)) {
    ++cudnn_attention_calls_;
    return;
  }
  ++gemm_attention_calls_;
  AttentionDevice x{*this};
  gemm_attention_backward(x, s, in, out, dout, stats, grad);
}

}  // namespace moebench::cuda
