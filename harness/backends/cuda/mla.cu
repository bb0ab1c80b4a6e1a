// MLA's per-head split of k and v and its gradient (workloads/ops/mla.hpp), one pass over the
// rows each: a 2-D grid, rows along y (grid-striding past 65,535), columns along x with 32-bit
// column indices (a row is at most heads x (dn + dv + dr) wide, far below 2^31).
#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "workloads/ops/mla.hpp"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxGridY = 65535;

dim3 row_grid(std::int64_t rows, std::int64_t cols) {
  const auto x = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
  const auto y = static_cast<unsigned>(std::min<std::int64_t>(rows, kMaxGridY));
  return dim3(x, y);
}

// k and v of one row from kv and krope: columns [0, heads dq) are k, the rest v.
__global__ void mla_split_kernel(Mat kv, Mat krope, MlaDims d, Mat k, Mat v) {
  const int k_cols = static_cast<int>(d.heads * d.dq());
  const int cols = k_cols + static_cast<int>(d.heads * d.dv);
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= cols) return;
  for (std::int64_t r = blockIdx.y; r < kv.rows; r += gridDim.y) {
    if (c < k_cols) {
      const std::int64_t src = mla_k_source(c, d);
      store(k, r, c, src >= 0 ? load(kv, r, src) : load(krope, r, -1 - src));
    } else {
      store(v, r, c - k_cols, load(kv, r, mla_v_source(c - k_cols, d)));
    }
  }
}

// dkv of one row from dk and dv, and dkrope as the sum of every head's rope columns of dk:
// columns [0, heads (dn + dv)) are dkv, the next dr dkrope.
__global__ void mla_merge_kernel(Mat dk, Mat dv, MlaDims d, Mat dkv, Mat dkrope) {
  const int kv_cols = static_cast<int>(d.kv_width());
  const int cols = kv_cols + static_cast<int>(d.dr);
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= cols) return;
  for (std::int64_t r = blockIdx.y; r < dk.rows; r += gridDim.y) {
    if (c < kv_cols) {
      const std::int64_t src = mla_kv_grad_source(c, d);
      store(dkv, r, c, src >= 0 ? load(dk, r, src) : load(dv, r, -1 - src));
    } else {
      const std::int64_t j = c - kv_cols;
      float sum = 0.0f;  // FP32, over the heads in order, as the host's axpby does
      for (std::int64_t h = 0; h < d.heads; ++h) sum += load(dk, r, h * d.dq() + d.dn + j);
      store(dkrope, r, j, sum);
    }
  }
}

}  // namespace

void CudaCompute::do_mla_split_kv(const Mat& kv, const Mat& krope, const MlaDims& d, const Mat& k,
                                  const Mat& v) {
  if (kv.rows == 0) return;
  mla_split_kernel<<<row_grid(kv.rows, d.heads * (d.dq() + d.dv)), kThreads, 0, stream_>>>(
      kv, krope, d, k, v);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_mla_merge_kv_grad(const Mat& dk, const Mat& dv, const MlaDims& d,
                                       const Mat& dkv, const Mat& dkrope) {
  if (dk.rows == 0) return;
  mla_merge_kernel<<<row_grid(dk.rows, d.kv_width() + d.dr), kThreads, 0, stream_>>>(dk, dv, d, dkv,
                                                                                     dkrope);
  CUDA_CHECK_LAUNCH();
}

}  // namespace moebench::cuda
