// Device-side access to the step's row-major views: every float tensor is read as FP32 and
// written back in its storage dtype (BF16 or FP32), so one kernel serves both and all arithmetic
// runs in FP32, as the cpu backend's does.
//
// The accessors are __host__ __device__: the per-thread work of the grid-stride kernels
// (kernel_work.cuh) runs on the host too, over an emulated grid, in tests/cuda_host.
#pragma once

#include <cuda_bf16.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "harness/core/tensor.hpp"

#define MB_CUDA_HD __host__ __device__ __forceinline__

namespace moebench::cuda {

MB_CUDA_HD float load(const Mat& m, std::int64_t r, std::int64_t c) {
  const std::int64_t o = r * m.ld + c;
  if (m.dtype == DType::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(m.data)[o]);
  return static_cast<const float*>(m.data)[o];
}

MB_CUDA_HD void store(const Mat& m, std::int64_t r, std::int64_t c, float v) {
  const std::int64_t o = r * m.ld + c;
  if (m.dtype == DType::bf16) {
    static_cast<__nv_bfloat16*>(m.data)[o] = __float2bfloat16_rn(v);
  } else {
    static_cast<float*>(m.data)[o] = v;
  }
}

MB_CUDA_HD std::int32_t load_i32(const Mat& m, std::int64_t r, std::int64_t c) {
  return static_cast<const std::int32_t*>(m.data)[r * m.ld + c];
}

// ---- 16-byte accesses ------------------------------------------------------------------------
// kVec consecutive elements of a row move as one 16-byte access (BF16) or two (FP32) where the
// view allows it (vec_rows_ok); a kernel takes that path only when every view it touches does.
constexpr int kVec = 8;

// Whether columns c, c + 1, ..., c + 7 of every row, for c a multiple of 8, start on a 16-byte
// boundary: the base is 16-byte aligned and so is the row pitch (or there is one row). Float
// views only (BF16 or FP32).
inline bool vec_rows_ok(const Mat& m) {
  const auto base = reinterpret_cast<std::uintptr_t>(m.data);
  const auto pitch = static_cast<std::uint64_t>(m.ld) * dtype_size(m.dtype);
  return m.dtype != DType::i32 && base % 16 == 0 && (m.rows <= 1 || pitch % 16 == 0);
}

// 16 bytes at p (16-byte aligned). The device moves them as one vector access; the host (the
// emulated grid of tests/cuda_host) copies them, which is the same without type punning.
MB_CUDA_HD uint4 load16(const void* p) {
#ifdef __CUDA_ARCH__
  return *static_cast<const uint4*>(p);
#else
  uint4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}
MB_CUDA_HD void store16(void* p, const uint4& v) {
#ifdef __CUDA_ARCH__
  *static_cast<uint4*>(p) = v;
#else
  std::memcpy(p, &v, sizeof(v));
#endif
}

// BF16 is the high half of an FP32: a 32-bit word of two BF16 values (the lower address in its
// low half, little-endian) unpacks by shifts, and packs from two rounded halves.
MB_CUDA_HD float bits_to_float(std::uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}
MB_CUDA_HD void unpack_bf16x2(std::uint32_t w, float* v) {
  v[0] = bits_to_float(w << 16);
  v[1] = bits_to_float(w & 0xffff0000u);
}
MB_CUDA_HD std::uint32_t pack_bf16x2(float lo, float hi) {
  return static_cast<std::uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (static_cast<std::uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

// Columns [c, c + kVec) of row r into v (the view passed vec_rows_ok; c a multiple of kVec).
MB_CUDA_HD void load_vec(const Mat& m, std::int64_t r, std::int64_t c, float* v) {
  const std::int64_t o = r * m.ld + c;
  if (m.dtype == DType::bf16) {
    const uint4 w = load16(static_cast<const std::uint16_t*>(m.data) + o);
    unpack_bf16x2(w.x, v);
    unpack_bf16x2(w.y, v + 2);
    unpack_bf16x2(w.z, v + 4);
    unpack_bf16x2(w.w, v + 6);
    return;
  }
  const float* p = static_cast<const float*>(m.data) + o;
  for (int half = 0; half < 2; ++half) {
    const uint4 w = load16(p + 4 * half);
    v[4 * half] = bits_to_float(w.x);
    v[4 * half + 1] = bits_to_float(w.y);
    v[4 * half + 2] = bits_to_float(w.z);
    v[4 * half + 3] = bits_to_float(w.w);
  }
}

MB_CUDA_HD std::uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

// v into columns [c, c + kVec) of row r, rounded to the view's dtype.
MB_CUDA_HD void store_vec(const Mat& m, std::int64_t r, std::int64_t c, const float* v) {
  const std::int64_t o = r * m.ld + c;
  if (m.dtype == DType::bf16) {
    const uint4 w = make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]),
                               pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
    store16(static_cast<std::uint16_t*>(m.data) + o, w);
    return;
  }
  float* p = static_cast<float*>(m.data) + o;
  for (int half = 0; half < 2; ++half) {
    store16(p + 4 * half, make_uint4(float_bits(v[4 * half]), float_bits(v[4 * half + 1]),
                                     float_bits(v[4 * half + 2]), float_bits(v[4 * half + 3])));
  }
}

// ---- A thread's place in the grid ------------------------------------------------------------
// The grid-stride kernels' work is a __host__ __device__ function of this, so a host test can
// run it for every thread of an emulated grid. Rows go along y (block rows), columns along x.
struct GridPos {
  std::int64_t x;   // this thread along x: blockIdx.x * blockDim.x + threadIdx.x
  std::int64_t nx;  // threads along x: gridDim.x * blockDim.x
  std::int64_t y;   // this block row: blockIdx.y
  std::int64_t ny;  // block rows: gridDim.y
};

__device__ __forceinline__ GridPos grid_pos() {
  return GridPos{static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                 static_cast<std::int64_t>(gridDim.x) * blockDim.x, blockIdx.y, gridDim.y};
}

// Every (row, column) of a rows x cols range, row r on block rows y, y + ny, ...; along a row,
// thread x takes columns x, x + nx, ... one by one (`one(r, c)`), or with `vec` the chunks of
// kVec columns x, x + nx, ... (`chunk(r, c)`, c a multiple of kVec) and then the columns past the
// last whole chunk one by one. No division anywhere.
template <typename Chunk, typename One>
MB_CUDA_HD void for_each_cell(const GridPos& g, std::int64_t rows, std::int64_t cols, bool vec,
                              Chunk chunk, One one) {
  const std::int64_t chunks = vec ? cols / kVec : 0;
  const std::int64_t tail = chunks * kVec;
  for (std::int64_t r = g.y; r < rows; r += g.ny) {
    for (std::int64_t c = g.x; c < chunks; c += g.nx) chunk(r, c * kVec);
    for (std::int64_t c = tail + g.x; c < cols; c += g.nx) one(r, c);
  }
}

// The columns a thread along x has to cover: chunks and the tail, or single columns.
inline std::int64_t cell_columns(std::int64_t cols, bool vec) {
  if (!vec) return cols;
  return cols / kVec > cols % kVec ? cols / kVec : cols % kVec;
}

// The grid for `rows` rows (block rows, at most 65,535: more rows are strided over) and
// `x_items` items a row (threads along x), at most max_blocks blocks in all (so a wide grid
// strides rather than oversubscribing the device).
inline dim3 cell_grid_for(std::int64_t rows, std::int64_t x_items, int threads,
                          std::int64_t max_blocks) {
  const std::int64_t y = rows < 1 ? 1 : (rows > 65535 ? 65535 : rows);
  const std::int64_t x_cap = max_blocks / y > 1 ? max_blocks / y : 1;
  std::int64_t x = (x_items + threads - 1) / threads;
  x = x < 1 ? 1 : (x > x_cap ? x_cap : x);
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

// A dense view (every element in one contiguous run) as one row: the element-wise kernels then
// split it over threads along x only.
inline Mat as_one_row(const Mat& m) {
  if (!m.contiguous()) return m;
  return Mat{m.data, m.rows == 0 ? 0 : 1, m.rows * m.cols, m.rows * m.cols, m.dtype};
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

// ---- Teams: the threads that share one row (row_work.cuh) or tile (fp8_work.cuh) ------------
// A team's work is a template instantiated with a device team (device-only members) in the
// kernels and with the tests' host team on the host: each instantiation only runs where its team
// does, so nvcc's check of calls across execution spaces is switched off for these templates (as
// CUB does) by putting MB_TEAM_WORK before them.
#define MB_TEAM_WORK _Pragma("nv_exec_check_disable")

// A block's threads (blockDim.x a multiple of 32, at most 1024): member threadIdx.x. Every member
// calls each phase; `shared` holds 32 floats for the reductions.
struct BlockTeam {
  float* shared;
  __device__ GridPos place() const { return GridPos{threadIdx.x, blockDim.x, 0, 1}; }
  template <typename F>
  __device__ float sum(F part) {
    return block_sum(part(place()), shared);
  }
  template <typename F>
  __device__ float max(F part) {
    return block_max(part(place()), shared);
  }
  template <typename F>
  __device__ void each(F work) {
    work(place());
  }
  template <typename F>
  __device__ void one(F f) {
    if (threadIdx.x == 0) f();
  }
  __device__ void sync() { __syncthreads(); }
};

// A warp's 32 lanes (the whole warp calls each phase): member threadIdx.x % 32.
struct WarpTeam {
  __device__ GridPos place() const { return GridPos{threadIdx.x % 32, 32, 0, 1}; }
  template <typename F>
  __device__ float sum(F part) {
    float v = part(place());
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  }
  template <typename F>
  __device__ float max(F part) {
    float v = part(place());
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
  template <typename F>
  __device__ void each(F work) {
    work(place());
  }
  template <typename F>
  __device__ void one(F f) {
    if (threadIdx.x % 32 == 0) f();
  }
  __device__ void sync() { __syncwarp(); }
};

}  // namespace moebench::cuda
