// Routing and row movement on the device: the router's scores and top-k (one thread per token,
// calling the same route_token the cpu backend calls), and the gathers, scatters and dots of the
// token permutation (kernel_work.cuh's and row_work.cuh's work, 16 bytes at a time where the rows
// allow). A bad index is skipped and reported through the backend's error word
// (checked at the next synchronisation), since checking it on the host would need a copy back.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <climits>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/kernel_work.cuh"
#include "harness/backends/cuda/row_work.cuh"
#include "harness/math/route.hpp"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float* row_f32(const Mat& m, std::int64_t r) {
  return static_cast<float*>(m.data) + r * m.ld;
}
__device__ __forceinline__ std::int32_t* row_i32(const Mat& m, std::int64_t r) {
  return static_cast<std::int32_t*>(m.data) + r * m.ld;
}

__global__ void router_forward_kernel(RouterParams p, Mat logits, const float* bias,
                                      std::int64_t first_token, Mat scores, Mat indices,
                                      Mat weights) {
  MB_GRID_LOOP(r, logits.rows) {
    float* sr = row_f32(scores, r);
    const auto g = static_cast<std::uint64_t>(first_token + r);
    for (std::int32_t e = 0; e < p.experts; ++e) sr[e] = router_logit(p, load(logits, r, e), g, e);
    router_scores(p, sr);
    route_token(p, sr, bias, g, row_i32(indices, r), row_f32(weights, r));
  }
}

__global__ void router_backward_kernel(RouterParams p, Mat scores, Mat indices, Mat dweights,
                                       Mat dlogits) {
  MB_GRID_LOOP(r, scores.rows) {
    route_token_backward(p, row_f32(scores, r), row_i32(indices, r), row_f32(dweights, r),
                         row_f32(dlogits, r));
  }
}

__global__ void gather_kernel(Mat src, Mat index, Mat scale, bool scaled, Mat dst, int* error,
                              int code, bool vec) {
  gather_work(grid_pos(), src, index, scale, scaled, dst, error, code, vec);
}

// out[i] = dot(a[index[i]], b[i]), one warp per row (row_work.cuh).
__global__ void gathered_dot_kernel(Mat a, Mat index, Mat b, Mat out, int* error, bool vec) {
  WarpTeam team;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       i < b.rows; i += warps) {
    gathered_dot_row(team, a, index, b, out, i, error, kBadDotIndex, vec);
  }
}

// scatter_add, deterministically (kernel_work.cuh, row_work.cuh): keys, a stable radix sort, the
// destinations' ranges, then one block per destination row.
__global__ void scatter_keys_kernel(Mat index, std::int64_t dst_rows, unsigned* keys, int* order,
                                    int* error) {
  scatter_keys_work(grid_pos(), index, dst_rows, keys, order, error, kBadScatterIndex);
}

__global__ void segment_bounds_kernel(const unsigned* keys, std::int64_t n, std::int64_t dst_rows,
                                      int* start, int* end) {
  segment_bounds_work(grid_pos(), keys, n, dst_rows, start, end);
}

__global__ void scatter_rows_kernel(Mat src, Mat scale, bool scaled, const int* order,
                                    const int* start, const int* end, Mat dst, bool vec) {
  BlockTeam team{nullptr};  // no reductions
  for (std::int64_t d = blockIdx.x; d < dst.rows; d += gridDim.x)
    scatter_row(team, src, scale, scaled, order, start[d], end[d], dst, d, vec);
}

}  // namespace

void CudaCompute::do_router_forward(const RouterParams& p, const Mat& logits, const Mat& bias,
                                    std::int64_t first_token, const Mat& scores, const Mat& indices,
                                    const Mat& weights) {
  const std::int64_t tokens = logits.rows;
  if (tokens == 0) return;
  const float* bias_row = bias.data != nullptr ? static_cast<const float*>(bias.data) : nullptr;
  constexpr int threads = 128;  // a thread per token; its top-k scratch lives in local memory
  router_forward_kernel<<<blocks_for(tokens, threads), threads, 0, stream_>>>(
      p, logits, bias_row, first_token, scores, indices, weights);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_router_backward(const RouterParams& p, const Mat& scores, const Mat& indices,
                                     const Mat& dweights, const Mat& dlogits) {
  if (scores.rows == 0) return;
  constexpr int threads = 128;
  router_backward_kernel<<<blocks_for(scores.rows, threads), threads, 0, stream_>>>(
      p, scores, indices, dweights, dlogits);
  CUDA_CHECK_LAUNCH();
}

// A row of dst per block row, its columns along x (16 bytes at a time where both views allow).
void CudaCompute::do_gather_rows(const Mat& src, const Mat& index, const Mat& dst) {
  if (dst.numel() == 0) return;
  const bool vec = vec_rows_ok(src) && vec_rows_ok(dst);
  gather_kernel<<<cell_grid(dst.rows, cell_columns(dst.cols, vec), kThreads), kThreads, 0,
                  stream_>>>(src, index, Mat{}, false, dst, error_device_, kBadGatherIndex, vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_gather_rows_scaled(const Mat& src, const Mat& index, const Mat& scale,
                                        const Mat& dst) {
  if (dst.numel() == 0) return;
  const bool vec = vec_rows_ok(src) && vec_rows_ok(dst);
  gather_kernel<<<cell_grid(dst.rows, cell_columns(dst.cols, vec), kThreads), kThreads, 0,
                  stream_>>>(src, index, scale, true, dst, error_device_, kBadGatherScaledIndex,
                             vec);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_gathered_row_dot(const Mat& a, const Mat& index, const Mat& b,
                                      const Mat& out) {
  if (b.rows == 0) return;
  gathered_dot_kernel<<<blocks_for(b.rows * 32, kThreads), kThreads, 0, stream_>>>(
      a, index, b, out, error_device_, vec_rows_ok(a) && vec_rows_ok(b));
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_scatter_add_rows(const Mat& src, const Mat& index, const Mat& scale,
                                      const Mat& dst) {
  const bool scaled = scale.data != nullptr;
  const std::int64_t n = src.rows;
  if (n == 0 || src.cols == 0 || dst.rows == 0) {
    if (n > 0 && dst.rows == 0) {
      // Every index is out of range; report it the way the kernels would.
      *error_host_ = kBadScatterIndex;
    }
    return;
  }
  MB_CHECK(n < INT_MAX && dst.rows < INT_MAX,
           "scatter_add_rows of " << n << " rows into " << dst.rows);
  int bits = 1;  // keys are in [0, dst.rows], dst.rows marking a bad index
  while (bits < 32 && (std::int64_t{1} << bits) <= dst.rows) ++bits;

  std::size_t sort_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<unsigned*>(nullptr),
                                             static_cast<unsigned*>(nullptr),
                                             static_cast<int*>(nullptr), static_cast<int*>(nullptr),
                                             static_cast<int>(n), 0, bits, stream_));
  const auto un = static_cast<std::size_t>(n);
  const auto ud = static_cast<std::size_t>(dst.rows);
  const std::size_t total = 2 * Carver::round(un * sizeof(unsigned)) +
                            2 * Carver::round(un * sizeof(int)) +
                            2 * Carver::round(ud * sizeof(int)) + Carver::round(sort_bytes);
  Carver carve(scratch_.get(total, stream_));
  auto* keys_in = carve.take<unsigned>(un);
  auto* keys_out = carve.take<unsigned>(un);
  auto* order_in = carve.take<int>(un);
  auto* order_out = carve.take<int>(un);
  auto* start = carve.take<int>(ud);
  auto* end = carve.take<int>(ud);
  void* sort_temp = carve.take<char>(sort_bytes);

  scatter_keys_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream_>>>(index, dst.rows, keys_in,
                                                                         order_in, error_device_);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp, sort_bytes, keys_in, keys_out, order_in,
                                             order_out, static_cast<int>(n), 0, bits, stream_));
  CUDA_CHECK(cudaMemsetAsync(start, 0, ud * sizeof(int), stream_));
  CUDA_CHECK(cudaMemsetAsync(end, 0, ud * sizeof(int), stream_));
  segment_bounds_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream_>>>(keys_out, n, dst.rows,
                                                                           start, end);
  CUDA_CHECK_LAUNCH();
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(dst.rows, 65535));
  scatter_rows_kernel<<<blocks, kThreads, 0, stream_>>>(src, scale, scaled, order_out, start, end,
                                                        dst, vec_rows_ok(src) && vec_rows_ok(dst));
  CUDA_CHECK_LAUNCH();
}

}  // namespace moebench::cuda
