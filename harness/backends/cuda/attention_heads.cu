// Attention's operands by head gathered into cuDNN's packed views and the gradients scattered
// back (kernel_work.cuh), one pass over the rows each: rows on y, columns on x.
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

}  // namespace

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
