// Element-wise kernels of the cuda backend: initialisation, conversion, axpby, RMSNorm, rope,
// SwiGLU and AdamW. Each element calls the same function from harness/math/elementwise.hpp that
// the cpu backend's loops call. The grid-stride kernels are one-line wrappers around the
// per-thread work in kernel_work.cuh (rows on the grid's y, columns along x, no per-element
// division; 16-byte accesses where every view allows them), RMSNorm's rows around row_work.cuh's.
#include <algorithm>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/kernel_work.cuh"
#include "harness/backends/cuda/row_work.cuh"
#include "harness/math/elementwise.hpp"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;

template <typename... M>
bool all_vec(const M&... m) {
  return (vec_rows_ok(m) && ...);
}

__global__ void convert_kernel(Mat src, Mat dst, bool vec) {
  convert_work(grid_pos(), src, dst, vec);
}

__global__ void fill_kernel(Mat x, float value, bool vec) {
  fill_work(grid_pos(), x, value, vec);
}

__global__ void axpby_kernel(float alpha, Mat x, float beta, Mat y, bool vec) {
  axpby_work(grid_pos(), alpha, x, beta, y, vec);
}

__global__ void scale_kernel(Mat y, float beta, bool vec) {
  scale_work(grid_pos(), y, beta, vec);
}

__global__ void fill_random_kernel(Mat x, std::uint64_t seed, std::uint64_t stream, float scale,
                                   bool vec) {
  fill_random_work(grid_pos(), x, seed, stream, scale, vec);
}

// RMSNorm's row reductions (row_work.cuh): one block per row, a grid-stride loop over rows.
__global__ void rmsnorm_forward_kernel(Mat x, Mat w, float eps, Mat y, Mat rstd, bool vec) {
  __shared__ float red[32];
  BlockTeam team{red};
  for (std::int64_t r = blockIdx.x; r < x.rows; r += gridDim.x)
    rmsnorm_forward_row(team, x, w, eps, y, rstd, r, vec);
}

__global__ void rmsnorm_dx_kernel(Mat dy, Mat x, Mat w, Mat rstd, Mat dx, bool vec) {
  __shared__ float red[32];
  BlockTeam team{red};
  for (std::int64_t r = blockIdx.x; r < x.rows; r += gridDim.x)
    rmsnorm_dx_row(team, dy, x, w, rstd, dx, r, vec);
}

// The weight gradient (kernel_work.cuh): chunks of rows on the grid's y, columns along x.
__global__ void rmsnorm_dw_partial_kernel(Mat dy, Mat x, Mat rstd, float* partial) {
  rmsnorm_dw_partial_work(grid_pos(), dy, x, rstd, partial);
}

__global__ void rmsnorm_dw_finish_kernel(const float* partial, std::int64_t chunks, Mat dw) {
  rmsnorm_dw_finish_work(grid_pos(), partial, chunks, dw);
}

__global__ void rope_kernel(Mat x, std::int64_t seq_len, std::int64_t heads,
                            std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                            float theta, bool inverse) {
  rope_work(grid_pos(), x, seq_len, heads, head_stride, offset, dim, theta, inverse);
}

__global__ void swiglu_forward_kernel(Mat gate_up, Mat out, bool vec) {
  swiglu_forward_work(grid_pos(), gate_up, out, vec);
}

__global__ void swiglu_backward_kernel(Mat gate_up, Mat dout, Mat dgate_up, bool vec) {
  swiglu_backward_work(grid_pos(), gate_up, dout, dgate_up, vec);
}

__global__ void adamw_kernel(AdamWCoeffs coeffs, Mat param, Mat grad, Mat m, Mat v, Mat master,
                             bool vec) {
  adamw_work(grid_pos(), coeffs, param, grad, m, v, master, vec);
}

unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535));
}

}  // namespace

dim3 CudaCompute::cell_grid(std::int64_t rows, std::int64_t x_items, int threads) const {
  return cell_grid_for(rows, x_items, threads, std::int64_t{multiprocessors_} * 32);
}

CudaCompute::CellLaunch CudaCompute::cells(std::initializer_list<Mat*> views, int threads) const {
  bool flat = true, vec = true;
  for (const Mat* m : views) flat = flat && m->contiguous();
  for (Mat* m : views) {
    if (flat) *m = as_one_row(*m);
    vec = vec && vec_rows_ok(*m);
  }
  const Mat& first = **views.begin();
  return CellLaunch{cell_grid(first.rows, cell_columns(first.cols, vec), threads), vec};
}

void CudaCompute::convert(const Mat& src_in, const Mat& dst_in) {
  if (src_in.numel() == 0) return;
  Mat src = src_in, dst = dst_in;
  const CellLaunch l = cells({&src, &dst}, kThreads);
  convert_kernel<<<l.grid, kThreads, 0, stream_>>>(src, dst, l.vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::scale_in_place(const Mat& y_in, float beta) {
  if (y_in.numel() == 0) return;
  Mat y = y_in;
  const CellLaunch l = cells({&y}, kThreads);
  scale_kernel<<<l.grid, kThreads, 0, stream_>>>(y, beta, l.vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_fill(const Mat& x_in, float value) {
  if (x_in.numel() == 0) return;
  Mat x = x_in;
  const CellLaunch l = cells({&x}, kThreads);
  fill_kernel<<<l.grid, kThreads, 0, stream_>>>(x, value, l.vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_axpby(float alpha, const Mat& x_in, float beta, const Mat& y_in) {
  if (x_in.numel() == 0) return;
  Mat x = x_in, y = y_in;
  const CellLaunch l = cells({&x, &y}, kThreads);
  axpby_kernel<<<l.grid, kThreads, 0, stream_>>>(alpha, x, beta, y, l.vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_fill_random(const Mat& x_in, std::uint64_t seed, std::uint64_t stream,
                                 float scale) {
  if (x_in.numel() == 0) return;
  Mat x = x_in;
  const CellLaunch l = cells({&x}, kThreads);
  fill_random_kernel<<<l.grid, kThreads, 0, stream_>>>(x, seed, stream, scale, l.vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_rmsnorm_forward(const Mat& x, const Mat& weight, float eps, const Mat& y,
                                     const Mat& rstd) {
  if (x.rows == 0) return;
  const bool vec = all_vec(x, weight, y);
  rmsnorm_forward_kernel<<<row_blocks(x.rows), kThreads, 0, stream_>>>(x, weight, eps, y, rstd,
                                                                       vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_rmsnorm_backward(const Mat& dy, const Mat& x, const Mat& weight,
                                      const Mat& rstd, const Mat& dx, const Mat& dweight) {
  if (x.rows == 0 || x.cols == 0) return;
  // The weight gradient first: it reads dy, which may be the same memory as dx.
  const std::int64_t chunks = rmsnorm_dw_chunks(x.rows);
  auto* partial = static_cast<float*>(
      scratch_.get(static_cast<std::size_t>(chunks * x.cols) * sizeof(float), stream_));
  rmsnorm_dw_partial_kernel<<<cell_grid(chunks, x.cols, kThreads), kThreads, 0, stream_>>>(
      dy, x, rstd, partial);
  CUDA_CHECK_LAUNCH();
  rmsnorm_dw_finish_kernel<<<blocks_for(x.cols, kThreads), kThreads, 0, stream_>>>(partial, chunks,
                                                                                   dweight);
  CUDA_CHECK_LAUNCH();
  const bool vec = all_vec(dy, x, weight, dx);
  rmsnorm_dx_kernel<<<row_blocks(x.rows), kThreads, 0, stream_>>>(dy, x, weight, rstd, dx, vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads,
                          std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                          float theta, bool inverse) {
  const std::int64_t pairs = heads * (dim / 2);
  if (x.rows == 0 || pairs == 0) return;
  MB_CHECK(pairs <= 0xffffffffLL, "rope over " << pairs << " pairs a row exceeds 32-bit indices");
  rope_kernel<<<cell_grid(x.rows, pairs, kThreads), kThreads, 0, stream_>>>(
      x, seq_len, heads, head_stride, offset, dim, theta, inverse);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_swiglu_forward(const Mat& gate_up, const Mat& out) {
  if (out.numel() == 0) return;
  const bool vec = out.cols % kVec == 0 && all_vec(gate_up, out);
  swiglu_forward_kernel<<<cell_grid(out.rows, cell_columns(out.cols, vec), kThreads), kThreads, 0,
                          stream_>>>(gate_up, out, vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_swiglu_backward(const Mat& gate_up, const Mat& dout, const Mat& dgate_up) {
  if (dout.numel() == 0) return;
  const bool vec = dout.cols % kVec == 0 && all_vec(gate_up, dout, dgate_up);
  swiglu_backward_kernel<<<cell_grid(dout.rows, cell_columns(dout.cols, vec), kThreads), kThreads,
                           0, stream_>>>(gate_up, dout, dgate_up, vec);
  CUDA_CHECK_LAUNCH();
}

// An absent master (no data) passes through cells() as an empty view.
void CudaCompute::do_adamw(const AdamWStep& s, const Mat& param_in, const Mat& grad_in,
                           const Mat& m_in, const Mat& v_in, const Mat& master_in) {
  if (param_in.numel() == 0) return;
  Mat param = param_in, grad = grad_in, m = m_in, v = v_in, master = master_in;
  const CellLaunch l = cells({&param, &grad, &m, &v, &master}, kThreads);
  adamw_kernel<<<l.grid, kThreads, 0, stream_>>>(adamw_coeffs(s), param, grad, m, v, master, l.vec);
  CUDA_CHECK_LAUNCH();
}

}  // namespace moebench::cuda
