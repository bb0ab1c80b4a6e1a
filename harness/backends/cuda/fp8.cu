// --precision fp8 on the cuda backend: the linear layers' GEMMs with E4M3 inputs, one FP32 scale
// per operand (per tensor; each expert's weight and token slice are separate operands), FP32
// accumulation, output in the storage dtype (BF16, or FP32 where C is FP32).
//
// Per GEMM, all on the stream and without a host synchronisation:
//   1. amax of each operand, reduced on the device into scratch;
//   2. descale = amax / 448 (fp8_descale(fp8_scale(amax)), workloads/ops/fp8.hpp) beside it;
//   3. a quantised copy of each operand: x * scale rounded by the shared e4m3_round (the value
//      is then an E4M3 value, so the conversion to __nv_fp8_e4m3 is exact), written K-major;
//   4. one cuBLASLt FP8 matmul reading the descales through A/B_SCALE_POINTER.
//
// Layout: cuBLASLt's FP8 kernels on Hopper take only the "TN" form, K contiguous in both inputs.
// Row-major C[m x n] = op(A) op(B) is cuBLASLt's column-major C^T = op(B)^T op(A)^T, so its A is
// op(B)^T stored n x k row-major (K contiguous, used transposed) and its B is op(A) stored m x k
// row-major (K contiguous, not transposed). The quantise kernel writes exactly those copies:
// op(A) is A itself unless trans_a, op(B)^T is B itself only if trans_b; otherwise the copy is a
// tiled transpose. K is padded with zeros to a multiple of 16 (FP8 needs 16-byte aligned leading
// dimensions; zeros add nothing to the sums, so padding is exact). m, n and C's alignment are
// left as they are: where cuBLASLt has no FP8 algorithm for them, that GEMM runs the BF16 path
// and is counted in fp8_gemm_counts().fallbacks.
//
// Blackwell's block-scaled MXFP8 (CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0) is not used: it needs
// its scale factors in a swizzled tile layout and a different quantisation (per 32 elements,
// power-of-two scales); per-tensor scaling runs on Blackwell as on Hopper.
#include <cuda_fp8.h>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/compute/gemm_shape.hpp"
#include "workloads/ops/fp8.hpp"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTile = 32;     // the transposing quantise kernel's tile
constexpr int kTileRows = 8;  // its threads per tile column
constexpr std::int64_t kKAlign = 16;

__device__ __forceinline__ __nv_fp8_storage_t to_e4m3(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

// Largest |x| into *amax (zeroed before); non-negative floats order as their bit patterns do, so
// an integer atomicMax on the bits is a float max. fmaxf drops NaN, as amax scaling would anyway.
__global__ void amax_kernel(Mat x, float* amax) {
  __shared__ float shared[32];
  float m = 0.0f;
  MB_GRID_LOOP(i, x.rows * x.cols) {
    const std::int64_t r = i / x.cols;
    m = fmaxf(m, fabsf(load(x, r, i - r * x.cols)));
  }
  m = block_max(m, shared);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
}

// descale[i] for amax[i], i < n.
__global__ void descale_kernel(const float* amax, float* descale, int n) {
  if (static_cast<int>(threadIdx.x) < n) {
    descale[threadIdx.x] = fp8_descale(fp8_scale(amax[threadIdx.x]));
  }
}

// dst (x.rows x ld, row-major) = E4M3(x * scale), columns [x.cols, ld) zero.
__global__ void quantize_kernel(Mat x, const float* amax, __nv_fp8_storage_t* dst,
                                std::int64_t ld) {
  const float scale = fp8_scale(*amax);
  MB_GRID_LOOP(i, x.rows * ld) {
    const std::int64_t r = i / ld;
    const std::int64_t c = i - r * ld;
    dst[i] = to_e4m3(c < x.cols ? fp8_quantize(load(x, r, c), scale) : 0.0f);
  }
}

// dst (x.cols x ld, row-major) = E4M3(x^T * scale), columns [x.rows, ld) zero. One 32 x 32 tile
// per block through shared memory, so reads and writes both run along rows.
__global__ void quantize_transpose_kernel(Mat x, const float* amax, __nv_fp8_storage_t* dst,
                                          std::int64_t ld) {
  __shared__ float tile[kTile][kTile + 1];
  const float scale = fp8_scale(*amax);
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTile;  // rows of x
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTile;  // columns of x
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const std::int64_t r = r0 + j, c = c0 + threadIdx.x;
    tile[j][threadIdx.x] = r < x.rows && c < x.cols ? fp8_quantize(load(x, r, c), scale) : 0.0f;
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const std::int64_t out_row = c0 + j, out_col = r0 + threadIdx.x;
    if (out_row < x.cols && out_col < ld)
      dst[out_row * ld + out_col] = to_e4m3(tile[threadIdx.x][j]);
  }
}

std::int64_t round_up(std::int64_t v, std::int64_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

void CudaCompute::set_linear_precision(LinearPrecision p) {
  const int cc = info_.compute_capability_major * 10 + info_.compute_capability_minor;
  if (p == LinearPrecision::fp8 && cc < 89) {
    throw UsageError(
        "--precision fp8 needs FP8 tensor cores (compute capability 8.9 or newer); "
        "device " +
        std::to_string(device_) + " (" + info_.name + ") is " +
        std::to_string(info_.compute_capability_major) + "." +
        std::to_string(info_.compute_capability_minor) + "; use --precision bf16");
  }
  linear_precision_ = p;
}

void CudaCompute::do_fp8_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                              float beta, const Mat& c) {
  const auto [m, n, k] = gemm_shape(trans_a, trans_b, a, b, c);
  const std::int64_t kp = round_up(k, kKAlign);
  const GemmEngine::Plan* plan = gemm_->fp8_plan(m, n, kp, c);
  if (plan == nullptr) {
    ++fp8_fallbacks_;
    do_gemm(trans_a, trans_b, alpha, a, b, beta, c);
    return;
  }
  ++fp8_gemms_;
  const std::size_t a_bytes = Carver::round(static_cast<std::size_t>(m * kp));
  const std::size_t b_bytes = Carver::round(static_cast<std::size_t>(n * kp));
  Carver carve(fp8_scratch_.get(Carver::round(4 * sizeof(float)) + a_bytes + b_bytes, stream_));
  float* scalars = carve.take<float>(4);  // amax_a, amax_b, descale_a, descale_b
  auto* a_q = carve.take<__nv_fp8_storage_t>(static_cast<std::size_t>(m * kp));
  auto* b_q = carve.take<__nv_fp8_storage_t>(static_cast<std::size_t>(n * kp));

  CUDA_CHECK(cudaMemsetAsync(scalars, 0, 2 * sizeof(float), stream_));
  amax_kernel<<<blocks_for(a.numel(), kThreads), kThreads, 0, stream_>>>(a, scalars);
  CUDA_CHECK_LAUNCH();
  amax_kernel<<<blocks_for(b.numel(), kThreads), kThreads, 0, stream_>>>(b, scalars + 1);
  CUDA_CHECK_LAUNCH();
  descale_kernel<<<1, 32, 0, stream_>>>(scalars, scalars + 2, 2);
  CUDA_CHECK_LAUNCH();
  // a_q = op(A) (m x kp), b_q = op(B)^T (n x kp): a plain copy when the stored operand already
  // has K along its rows, a transpose otherwise.
  auto quantize = [&](const Mat& x, const float* amax, __nv_fp8_storage_t* dst, bool transpose) {
    if (transpose) {
      const dim3 grid(static_cast<unsigned>((x.cols + kTile - 1) / kTile),
                      static_cast<unsigned>((kp + kTile - 1) / kTile));
      MB_CHECK(grid.y <= 65535, "fp8 gemm: k " << kp << " exceeds the transpose grid");
      quantize_transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream_>>>(x, amax, dst, kp);
    } else {
      quantize_kernel<<<blocks_for(x.rows * kp, kThreads), kThreads, 0, stream_>>>(x, amax, dst,
                                                                                   kp);
    }
    CUDA_CHECK_LAUNCH();
  };
  quantize(a, scalars, a_q, trans_a);
  quantize(b, scalars + 1, b_q, !trans_b);
  gemm_->run_fp8(*plan, alpha, a_q, b_q, scalars + 2, scalars + 3, beta, c);
}

}  // namespace moebench::cuda
