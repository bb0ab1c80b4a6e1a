// The FP8 quantise kernels' work (fp8.cu), as __host__ __device__ functions of a thread's place:
// fp8.cu's kernels wrap them, and tests/cuda_host runs them on the CPU over emulated grids and
// teams, so the copies' K-major layout, the transposed reads, the zero padding of K and where
// each tile's scale lands in cuBLASLt's layouts are checked without a GPU. The arithmetic is
// workloads/ops/fp8.hpp's, shared with the cpu backend's emulation; the scale offsets too.
#pragma once

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>

#include "harness/backends/cuda/device_mat.cuh"
#include "workloads/ops/fp8.hpp"

namespace moebench::cuda {

// v (already an E4M3 value after fp8_quantize, so exact) as E4M3 storage; saturating, as a
// guard.
MB_CUDA_HD __nv_fp8_storage_t to_e4m3(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

// ---- Per tensor (--fp8-recipe tensor) -----------------------------------------------------------

// The largest |x| over the thread's cells (0 for none); the kernel reduces the threads' parts
// (a block max, then an atomic max across blocks).
MB_CUDA_HD float amax_part(const GridPos& g, const Mat& x, bool vec) {
  float m = 0.0f;
  for_each_cell(
      g, x.rows, x.cols, vec,
      [&](std::int64_t r, std::int64_t c) {
        float v[kVec];
        load_vec(x, r, c, v);
        for (float e : v) m = fmaxf(m, fabsf(e));
      },
      [&](std::int64_t r, std::int64_t c) { m = fmaxf(m, fabsf(load(x, r, c))); });
  return m;
}

// dst (x.rows x ld, row-major) = E4M3(x * scale), columns [x.cols, ld) zero; rows on the grid's
// y, columns along x.
MB_CUDA_HD void quantize_work(const GridPos& g, const Mat& x, float scale, __nv_fp8_storage_t* dst,
                              std::int64_t ld) {
  const auto one = [&](std::int64_t r, std::int64_t c) {
    dst[r * ld + c] = to_e4m3(c < x.cols ? fp8_quantize(load(x, r, c), scale) : 0.0f);
  };
  for_each_cell(g, x.rows, ld, false, one, one);
}

// The transposed copy, dst (x.cols x ld, row-major) = E4M3(x^T * scale), columns [x.rows, ld)
// zero: one kTransposeTile-square tile of x per block (tile column bx, tile row by), through a
// tile in shared memory so that reads and writes both run along rows. A thread's place: x its
// column in the tile (kTransposeTile threads), y its first row (kTransposeRows threads, each
// taking every kTransposeRows-th row). The load fills the tile; after a barrier the store writes
// it out transposed.
constexpr int kTransposeTile = 32;
constexpr int kTransposeRows = 8;
using TransposeTile = float[kTransposeTile][kTransposeTile + 1];

MB_CUDA_HD void quantize_transpose_load(const GridPos& t, std::int64_t bx, std::int64_t by,
                                        const Mat& x, float scale, TransposeTile& tile) {
  const std::int64_t r0 = by * kTransposeTile, c0 = bx * kTransposeTile;  // rows, cols of x
  for (std::int64_t j = t.y; j < kTransposeTile; j += t.ny) {
    const std::int64_t r = r0 + j, c = c0 + t.x;
    tile[j][t.x] = r < x.rows && c < x.cols ? fp8_quantize(load(x, r, c), scale) : 0.0f;
  }
}

MB_CUDA_HD void quantize_transpose_store(const GridPos& t, std::int64_t bx, std::int64_t by,
                                         const Mat& x, const TransposeTile& tile,
                                         __nv_fp8_storage_t* dst, std::int64_t ld) {
  const std::int64_t r0 = by * kTransposeTile, c0 = bx * kTransposeTile;
  for (std::int64_t j = t.y; j < kTransposeTile; j += t.ny) {
    const std::int64_t out_row = c0 + j, out_col = r0 + t.x;
    if (out_row < x.cols && out_col < ld) dst[out_row * ld + out_col] = to_e4m3(tile[t.x][j]);
  }
}

// ---- Per tile (--fp8-recipe blockwise and mxfp8) -----------------------------------------------

// Where a tile's scale goes (cuBLASLt's layouts, workloads/ops/fp8.hpp).
enum ScaleLayout : int { kVec128 = 0, kBlk128 = 1, kMx = 2 };

// Tile `t` of op(X) in GEMM coordinates (`outer` rows by K, tiles in row-major order over
// (outer, kp)), by a team (one block): the tile's amax, its scale (fp8_tile_scale), the quantised
// values into dst (outer x kp, K-major; columns k..kp zero) and the descale at the tile's place
// in `scales`. X is stored outer x k (outer_is_row) or k x outer. Tiles cover kp, so the zero
// padding is in the last K-tile (zeros do not change an amax).
MB_TEAM_WORK
template <typename Team>
MB_CUDA_HD void quantize_tile(Team& team, const Mat& x, bool outer_is_row, std::int64_t outer,
                              std::int64_t k, std::int64_t kp, const Fp8Tile& tile, int layout,
                              __nv_fp8_storage_t* dst, void* scales, std::int64_t t) {
  const std::int64_t tiles_k = (kp + tile.k - 1) / tile.k;
  const std::int64_t to = t / tiles_k, tk = t - to * tiles_k;
  const std::int64_t o0 = to * tile.outer, k0 = tk * tile.k;
  // At most 128 x 128 elements a tile: 32-bit indices inside it.
  const int on = static_cast<int>(tile.outer < outer - o0 ? tile.outer : outer - o0);
  const int kn = static_cast<int>(tile.k < kp - k0 ? tile.k : kp - k0);
  const int n = on * kn;
  const auto value = [&](int i) {
    const std::int64_t o = o0 + i / kn, kk = k0 + i % kn;
    if (kk >= k) return 0.0f;
    return outer_is_row ? load(x, o, kk) : load(x, kk, o);
  };
  const float m = team.max([&](const GridPos& p) {
    float part = 0.0f;
    for (std::int64_t i = p.x; i < n; i += p.nx)
      part = fmaxf(part, fabsf(value(static_cast<int>(i))));
    return part;
  });
  const float scale = fp8_tile_scale(m, tile);
  team.each([&](const GridPos& p) {
    for (std::int64_t i = p.x; i < n; i += p.nx) {
      const std::int64_t o = o0 + i / kn, kk = k0 + i % kn;
      dst[o * kp + kk] = to_e4m3(fp8_quantize(value(static_cast<int>(i)), scale));
    }
  });
  team.one([&] {
    const float descale = fp8_descale(scale);
    if (layout == kMx) {
      static_cast<std::uint8_t*>(scales)[mx_scale_offset(o0, tk, tiles_k)] =
          e8m0_from_descale(descale);
    } else if (layout == kBlk128) {
      static_cast<float*>(scales)[blk128_scale_offset(to, tk, tiles_k)] = descale;
    } else {
      static_cast<float*>(scales)[vec128_scale_offset(o0, tk, outer)] = descale;
    }
  });
}

}  // namespace moebench::cuda
