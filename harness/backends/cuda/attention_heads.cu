// Attention's operands by head gathered into cuDNN's packed views and the gradients scattered
// back, and the statistics moved between the step's layout and cuDNN's (kernel_work.cuh), one
// pass over the rows each: rows on y, columns on x.
#include <climits>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/kernel_work.cuh"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void gather_heads_kernel(HeadCols a, HeadCols b, std::int64_t h0, Mat packed) {
  gather_heads_work(grid_pos(), a, b, h0, packed);
}

__global__ void scatter_heads_kernel(Mat packed, std::int64_t h0, std::int64_t heads, HeadCols a,
                                     HeadCols b, bool accumulate) {
  scatter_heads_work(grid_pos(), packed, h0, heads, a, b, accumulate);
}

__global__ void move_stats_kernel(Mat stats, std::int64_t seq, Mat packed, bool to_packed) {
  move_stats_work(grid_pos(), stats, seq, packed, to_packed);
}

}  // namespace

void CudaCompute::move_stats(const Mat& stats, std::int64_t seq, const Mat& packed,
                             bool to_packed) {
  MB_CHECK(
      packed.rows == stats.rows / seq * stats.cols && packed.cols == seq && stats.rows % seq == 0,
      "attention statistics: " << stats.rows << " x " << stats.cols << " against packed "
                               << packed.rows << " x " << packed.cols << " for seq " << seq);
  if (packed.rows == 0 || seq == 0) return;
  move_stats_kernel<<<cell_grid(packed.rows, seq, kThreads), kThreads, 0, stream_>>>(
      stats, seq, packed, to_packed);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::gather_heads(const HeadCols& a, const HeadCols& b, std::int64_t h0,
                               const Mat& packed) {
  MB_CHECK(packed.cols < INT_MAX, "a packed attention operand " << packed.cols << " wide");
  if (packed.rows == 0) return;
  gather_heads_kernel<<<cell_grid(packed.rows, packed.cols, kThreads), kThreads, 0, stream_>>>(
      a, b, h0, packed);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::scatter_heads(const Mat& packed, std::int64_t h0, std::int64_t heads,
                                const HeadCols& a, const HeadCols& b, bool accumulate) {
  MB_CHECK(packed.cols < INT_MAX, "a packed attention gradient " << packed.cols << " wide");
  if (packed.rows == 0) return;
  const std::int64_t items = packed.cols + a.width + b.width;
  scatter_heads_kernel<<<cell_grid(packed.rows, items, kThreads), kThreads, 0, stream_>>>(
      packed, h0, heads, a, b, accumulate);
  CUDA_CHECK_LAUNCH();
}

}  // namespace moebench::cuda
