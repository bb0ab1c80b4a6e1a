// The cross-entropy of the output head, fused with its gradient: one block per row of logits
// (a grid-stride loop over rows), three passes over the row (max, sum of exp, the gradient in
// place), each element through the same functions the cpu backend's loop calls
// (workloads/ops/elementwise.hpp). FP32 arithmetic on BF16 or FP32 logits.
#include <algorithm>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "workloads/ops/elementwise.hpp"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void cross_entropy_kernel(Mat logits, Mat labels, float grad_scale, Mat loss,
                                     int* error) {
  __shared__ float red[32];
  for (std::int64_t r = blockIdx.x; r < logits.rows; r += gridDim.x) {
    const std::int32_t label = load_i32(labels, r, 0);
    if (label < 0 || label >= logits.cols) {
      if (threadIdx.x == 0) *error = kBadLabel;
      continue;  // uniform over the block
    }
    float max = -INFINITY;
    for (std::int64_t c = threadIdx.x; c < logits.cols; c += blockDim.x) {
      max = fmaxf(max, load(logits, r, c));
    }
    max = block_max(max, red);
    float sum_exp = 0.0f;
    for (std::int64_t c = threadIdx.x; c < logits.cols; c += blockDim.x) {
      sum_exp += ::expf(load(logits, r, c) - max);
    }
    sum_exp = block_sum(sum_exp, red);
    // The label's logit is read before any thread overwrites it.
    const float label_logit = load(logits, r, label);
    __syncthreads();
    if (threadIdx.x == 0) store(loss, r, 0, cross_entropy_loss(max, sum_exp, label_logit));
    for (std::int64_t c = threadIdx.x; c < logits.cols; c += blockDim.x) {
      store(logits, r, c,
            cross_entropy_grad(load(logits, r, c), max, sum_exp, c == label, grad_scale));
    }
  }
}

}  // namespace

void CudaCompute::do_cross_entropy(const Mat& logits, const Mat& labels, float grad_scale,
                                   const Mat& loss) {
  if (logits.rows == 0) return;
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>(logits.rows, 1, 65535));
  cross_entropy_kernel<<<blocks, kThreads, 0, stream_>>>(logits, labels, grad_scale, loss,
                                                         error_device_);
  CUDA_CHECK_LAUNCH();
}

}  // namespace moebench::cuda
