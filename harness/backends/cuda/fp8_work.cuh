// The FP8 quantise kernels' work (fp8.cu), as __host__ __device__ functions of a thread's place:
// fp8.cu's kernels wrap them, and tests/cuda_host runs them on the CPU over emulated grids and
// teams, so the copies' K-major layout, the transposed reads, the zero padding of K and where
// each tile's scale lands in cuBLASLt's layouts are checked without a GPU. The arithmetic is
// harness/math/fp8.hpp's, shared with the cpu backend's emulation; the scale offsets too.
#pragma once

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>

#include "harness/backends/cuda/device_mat.cuh"
#include "harness/math/fp8.hpp"

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

// Where a tile's scale goes (cuBLASLt's layouts, harness/math/fp8.hpp).
enum ScaleLayout : int { kVec128 = 0, kBlk128 = 1, kMx = 2 };

// One block quantises a region of op(X) in GEMM coordinates (rows = `outer`, columns = K): whole
// tiles, kFp8RegionK columns by 32 rows for 1-row tiles or 128 rows for 128 x 128 ones. It reads
// every element of X once, along the dimension X is stored in (K where outer_is_row, `outer`
// otherwise), into shared memory; takes each tile's amax there; and writes the K-major
// copy along K and each tile's descale at its place in `scales`. A thread's place `t`: x along a
// row of 32 threads, y across the block's rows of threads (t.nx x t.ny threads in all); the
// phases run in order with a barrier between them.
constexpr int kFp8RegionK = 128;               // a multiple of every tile's K (32, 128)
constexpr int kFp8RegionRowsSmall = 32;        // rows of a region of 1-row tiles
constexpr int kFp8RegionLd = kFp8RegionK + 1;  // odd: a column of threads reads distinct banks

struct Fp8Region {
  std::int64_t o0, k0;  // its first row and column of op(X)
  int on, kn;           // its rows and columns, clipped to `outer` and kp
  int rows;             // rows of a whole region (its shared memory's rows)
};

MB_CUDA_HD int fp8_region_rows(const Fp8Tile& tile) {
  return tile.outer > 1 ? static_cast<int>(tile.outer) : kFp8RegionRowsSmall;
}
MB_CUDA_HD std::int64_t fp8_regions(const Fp8Tile& tile, std::int64_t outer, std::int64_t kp) {
  const int rows = fp8_region_rows(tile);
  return ((outer + rows - 1) / rows) * ((kp + kFp8RegionK - 1) / kFp8RegionK);
}
MB_CUDA_HD Fp8Region fp8_region(const Fp8Tile& tile, std::int64_t outer, std::int64_t kp,
                                std::int64_t index) {
  Fp8Region r;
  r.rows = fp8_region_rows(tile);
  const std::int64_t across = (kp + kFp8RegionK - 1) / kFp8RegionK;
  const std::int64_t ro = index / across;
  r.o0 = ro * r.rows;
  r.k0 = (index - ro * across) * kFp8RegionK;
  r.on = static_cast<int>(r.rows < outer - r.o0 ? r.rows : outer - r.o0);
  r.kn = static_cast<int>(kFp8RegionK < kp - r.k0 ? kFp8RegionK : kp - r.k0);
  return r;
}
// Shared memory: the values (rows x kFp8RegionLd), each row's maxima per K-tile (`per_row` of
// them), each tile's scale.
MB_CUDA_HD int fp8_region_shared_floats(const Fp8Tile& tile) {
  const int rows = fp8_region_rows(tile), per_row = kFp8RegionK / static_cast<int>(tile.k);
  return rows * kFp8RegionLd + rows * per_row + rows / static_cast<int>(tile.outer) * per_row;
}
struct Fp8RegionMemory {
  float* values;      // [row][column], rows of kFp8RegionLd
  float* part;        // [row][K-tile]
  float* tile_scale;  // [tile row][K-tile]
  int per_row;        // K-tiles a row
};
MB_CUDA_HD Fp8RegionMemory fp8_region_memory(const Fp8Tile& tile, const Fp8Region& r, float* s) {
  const int per_row = kFp8RegionK / static_cast<int>(tile.k);
  float* part = s + r.rows * kFp8RegionLd;
  return {s, part, part + r.rows * per_row, per_row};
}

// Phase 1: the region's values into s, zero past k (the copy's padding: zeros do not change an
// amax).
MB_CUDA_HD void fp8_region_load(const GridPos& t, const Mat& x, bool outer_is_row, std::int64_t k,
                                const Fp8Region& r, float* s) {
  if (outer_is_row) {  // X's rows are op(X)'s rows: threads along K
    for (int o = static_cast<int>(t.y); o < r.on; o += static_cast<int>(t.ny))
      for (int c = static_cast<int>(t.x); c < r.kn; c += static_cast<int>(t.nx))
        s[o * kFp8RegionLd + c] = r.k0 + c < k ? load(x, r.o0 + o, r.k0 + c) : 0.0f;
  } else {  // X's rows are K: threads along op(X)'s rows
    for (int c = static_cast<int>(t.y); c < r.kn; c += static_cast<int>(t.ny))
      for (int o = static_cast<int>(t.x); o < r.on; o += static_cast<int>(t.nx))
        s[o * kFp8RegionLd + c] = r.k0 + c < k ? load(x, r.k0 + c, r.o0 + o) : 0.0f;
  }
}

// Phase 2: the largest |value| of each row's part of each K-tile, a thread per part.
MB_CUDA_HD void fp8_region_row_max(const GridPos& t, const Fp8Tile& tile, const Fp8Region& r,
                                   float* s) {
  const Fp8RegionMemory m = fp8_region_memory(tile, r, s);
  const int tk = static_cast<int>(tile.k), n = static_cast<int>(t.nx * t.ny);
  for (int i = static_cast<int>(t.y * t.nx + t.x); i < r.on * m.per_row; i += n) {
    const int o = i / m.per_row, j = i - o * m.per_row;
    const int end = (j + 1) * tk < r.kn ? (j + 1) * tk : r.kn;
    float mx = 0.0f;
    for (int c = j * tk; c < end; ++c) mx = fmaxf(mx, fabsf(m.values[o * kFp8RegionLd + c]));
    m.part[o * m.per_row + j] = mx;
  }
}

// Phase 3: each tile's amax over its rows' parts, its scale (kept in s for phase 4) and its
// descale at its place in cuBLASLt's layout, a thread per tile.
MB_CUDA_HD void fp8_region_scales(const GridPos& t, const Fp8Tile& tile, int layout,
                                  std::int64_t outer, std::int64_t kp, const Fp8Region& r, float* s,
                                  void* scales) {
  const Fp8RegionMemory m = fp8_region_memory(tile, r, s);
  const int tk = static_cast<int>(tile.k), to = static_cast<int>(tile.outer);
  const std::int64_t tiles_k = (kp + tk - 1) / tk;
  const int n = static_cast<int>(t.nx * t.ny);
  for (int i = static_cast<int>(t.y * t.nx + t.x); i < (r.on + to - 1) / to * m.per_row; i += n) {
    const int ti = i / m.per_row, j = i - ti * m.per_row;
    if (j * tk >= r.kn) continue;  // past kp
    const int end = (ti + 1) * to < r.on ? (ti + 1) * to : r.on;
    float mx = 0.0f;
    for (int o = ti * to; o < end; ++o) mx = fmaxf(mx, m.part[o * m.per_row + j]);
    const float scale = fp8_tile_scale(mx, tile);
    m.tile_scale[i] = scale;
    const float descale = fp8_descale(scale);
    const std::int64_t o0 = r.o0 + static_cast<std::int64_t>(ti) * to, tkg = r.k0 / tk + j;
    if (layout == kMx) {
      static_cast<std::uint8_t*>(scales)[mx_scale_offset(o0, tkg, tiles_k)] =
          e8m0_from_descale(descale);
    } else if (layout == kBlk128) {
      static_cast<float*>(scales)[blk128_scale_offset(o0 / to, tkg, tiles_k)] = descale;
    } else {
      static_cast<float*>(scales)[vec128_scale_offset(o0, tkg, outer)] = descale;
    }
  }
}

// Phase 4: the K-major copy (outer x kp) from s, threads along K.
MB_CUDA_HD void fp8_region_store(const GridPos& t, const Fp8Tile& tile, std::int64_t kp,
                                 const Fp8Region& r, float* s, __nv_fp8_storage_t* dst) {
  const Fp8RegionMemory m = fp8_region_memory(tile, r, s);
  const int tk = static_cast<int>(tile.k);
  for (int o = static_cast<int>(t.y); o < r.on; o += static_cast<int>(t.ny)) {
    const float* row_scales = m.tile_scale + o / static_cast<int>(tile.outer) * m.per_row;
    __nv_fp8_storage_t* out = dst + (r.o0 + o) * kp + r.k0;
    for (int j = 0; j < m.per_row && j * tk < r.kn; ++j) {
      const float scale = row_scales[j];
      const int end = (j + 1) * tk < r.kn ? (j + 1) * tk : r.kn;
      for (int c = j * tk + static_cast<int>(t.x); c < end; c += static_cast<int>(t.nx))
        out[c] = to_e4m3(fp8_quantize(m.values[o * kFp8RegionLd + c], scale));
    }
  }
}

}  // namespace moebench::cuda
