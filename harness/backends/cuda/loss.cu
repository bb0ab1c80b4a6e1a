// The cross-entropy of the output head, fused with its gradient: one block per row of logits
// (a grid-stride loop over rows) running row_work.cuh's cross_entropy_grad_row: three passes over
// the row (max, sum of exp, the gradient in place), 16 bytes at a time where the logits allow, each
// element through the same functions the cpu backend's loop calls (harness/math/elementwise.hpp).
// FP32 arithmetic on BF16 or FP32 logits.
#include <algorithm>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/row_work.cuh"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void cross_entropy_kernel(Mat logits, Mat labels, float grad_scale, Mat loss, int* error,
                                     bool vec) {
  __shared__ float red[32];
  BlockTeam team{red};
  for (std::int64_t r = blockIdx.x; r < logits.rows; r += gridDim.x) {
    cross_entropy_grad_row(team, logits, load_i32(labels, r, 0), grad_scale, loss, r, error,
                           kBadLabel, vec);
  }
}

}  // namespace

void CudaCompute::do_cross_entropy(const Mat& logits, const Mat& labels, float grad_scale,
                                   const Mat& loss) {
  if (logits.rows == 0) return;
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>(logits.rows, 1, 65535));
  cross_entropy_kernel<<<blocks, kThreads, 0, stream_>>>(logits, labels, grad_scale, loss,
                                                         error_device_, vec_rows_ok(logits));
  CUDA_CHECK_LAUNCH();
}

}  // namespace moebench::cuda
