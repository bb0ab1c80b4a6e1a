// Device-side access to the step's row-major views: every float tensor is read as FP32 and
// written back in its storage dtype (BF16 or FP32), so one kernel serves both and all arithmetic
// runs in FP32, as the cpu backend's does.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "harness/core/tensor.hpp"

namespace moebench::cuda {

__device__ __forceinline__ float load(const Mat& m, std::int64_t r, std::int64_t c) {
  const std::int64_t o = r * m.ld + c;
  if (m.dtype == DType::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(m.data)[o]);
  return static_cast<const float*>(m.data)[o];
}

__device__ __forceinline__ void store(const Mat& m, std::int64_t r, std::int64_t c, float v) {
  const std::int64_t o = r * m.ld + c;
  if (m.dtype == DType::bf16) {
    static_cast<__nv_bfloat16*>(m.data)[o] = __float2bfloat16_rn(v);
  } else {
    static_cast<float*>(m.data)[o] = v;
  }
}

// Element i (row-major) of a rows x cols view: its offset in memory. A dense view (ld == cols,
// the common case: parameters, gradients, whole activations) needs no division; only a strided
// one divides, once.
__device__ __forceinline__ std::int64_t offset_of(const Mat& m, std::int64_t i) {
  if (m.ld == m.cols || m.rows <= 1) return i;
  const std::int64_t r = i / m.cols;
  return r * m.ld + (i - r * m.cols);
}

__device__ __forceinline__ float load_flat(const Mat& m, std::int64_t i) {
  const std::int64_t o = offset_of(m, i);
  if (m.dtype == DType::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(m.data)[o]);
  return static_cast<const float*>(m.data)[o];
}

__device__ __forceinline__ void store_flat(const Mat& m, std::int64_t i, float v) {
  const std::int64_t o = offset_of(m, i);
  if (m.dtype == DType::bf16) {
    static_cast<__nv_bfloat16*>(m.data)[o] = __float2bfloat16_rn(v);
  } else {
    static_cast<float*>(m.data)[o] = v;
  }
}

__device__ __forceinline__ std::int32_t load_i32(const Mat& m, std::int64_t r, std::int64_t c) {
  return static_cast<const std::int32_t*>(m.data)[r * m.ld + c];
}

// Grid-stride loop over [0, n).
#define MB_GRID_LOOP(i, n)                                                                         \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
// `shared` holds 32 floats; the call ends with the block synchronised so it can be reused.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  float t = lane < warps ? shared[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  __syncthreads();
  return t;
}

__device__ __forceinline__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  float t = lane < warps ? shared[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
  __syncthreads();
  return t;
}

}  // namespace moebench::cuda
