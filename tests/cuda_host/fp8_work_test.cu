// The FP8 quantise kernels' work (harness/backends/cuda/fp8_work.cuh) run on the CPU, over
// emulated grids, blocks and teams exactly as fp8.cu's kernels call it, against a plain loop over
// the elements that calls the same shared arithmetic (harness/math/fp8.hpp): every byte of the
// E4M3 copies (K-major, K padded with zeros) and of the scale buffers (each tile's descale at the
// offset cuBLASLt reads, padding entries as the backend fills them), with canaries after both.
//
// Exact comparison: the kernel work and the loop quantise the same value with the same scale, so
// the bytes are identical; any difference is a wrong, lost or misplaced element or scale. Whether
// the offsets are the ones cuBLASLt reads is a GPU test's question (tests/gpu); this checks that
// the kernels put every value and scale where those offsets say.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/fp8_work.cuh"
#include "harness/math/fp8.hpp"
#include "tests/cuda_host/emulated_grid.hpp"
#include "tests/cuda_host/host_mat.hpp"

namespace moebench::cuda {
namespace {

constexpr std::uint8_t kByteCanary = 0xab;
constexpr std::int64_t kTail = 64;  // canary bytes after every buffer

std::int64_t round_up(std::int64_t v, std::int64_t to) {
  return (v + to - 1) / to * to;
}

// Byte-for-byte; names the first difference.
void check_bytes(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                 const char* what) {
  REQUIRE(got.size() == want.size());
  std::int64_t wrong = 0, first = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      ++wrong;
      if (first < 0) first = static_cast<std::int64_t>(i);
    }
  }
  INFO(what << ": " << wrong << " bytes differ; first at " << first << " of " << got.size());
  CHECK(wrong == 0);
}

// Values spread over several binades, so that tiles get different scales: element (r, c) of x in
// [-2, 2) x 2^((r / 7 + c / 40) % 6 - 3).
void spread(HostMat& x) {
  x.randomise(70);
  const Mat v = x.view();
  for (std::int64_t r = 0; r < v.rows; ++r)
    for (std::int64_t c = 0; c < v.cols; ++c)
      store(v, r, c, std::ldexp(load(v, r, c), static_cast<int>((r / 7 + c / 40) % 6) - 3));
}

const ViewShape kShapes[] = {
    {37, 61, 72, 0, "37 x 61 in rows of 72"},
    {5, 48, 48, 1, "5 x 48, one element off alignment"},
    {33, 70, 70, 0, "33 x 70 dense (a second tile row and column in the transpose)"},
};

// The per-tensor copy of x by the plain loop: x (or x^T) as stored, its rows padded with zeros
// to ld, then kTail canary bytes.
std::vector<std::uint8_t> expected_copy(const Mat& x, float scale, bool transposed,
                                        std::int64_t ld) {
  const std::int64_t rows = transposed ? x.cols : x.rows, cols = transposed ? x.rows : x.cols;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * ld + kTail), kByteCanary);
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < ld; ++j) {
      const float v = j < cols ? (transposed ? load(x, j, i) : load(x, i, j)) : 0.0f;
      out[static_cast<std::size_t>(i * ld + j)] = to_e4m3(fp8_quantize(v, scale));
    }
  }
  return out;
}

TEST_CASE("per-tensor quantise work: the amax, the copy with K padded, the transposed copy") {
  for (const ViewShape& s : kShapes) {
    HostMat x(s.rows, s.cols, s.ld, s.offset, DType::bf16);
    spread(x);
    const Mat xv = x.view();
    float want_amax = 0.0f;
    for (std::int64_t r = 0; r < s.rows; ++r)
      for (std::int64_t c = 0; c < s.cols; ++c)
        want_amax = std::fmax(want_amax, std::fabs(load(xv, r, c)));
    CAPTURE(s.what);
    for (bool vec : {false, true}) {
      if (vec && !vec_rows_ok(xv)) continue;
      for (const dim3 g :
           {cell_grid_for(s.rows, cell_columns(s.cols, vec), 64, 4224), dim3(2, 3)}) {
        float amax = 0.0f;
        run_grid(g, 64, [&](const GridPos& p) { amax = std::fmax(amax, amax_part(p, xv, vec)); });
        CHECK(amax == want_amax);
      }
    }
    const float scale = fp8_scale(want_amax);

    // As stored, K (the columns) padded to a multiple of 16.
    const std::int64_t ld = round_up(s.cols, 16);
    const std::vector<std::uint8_t> want = expected_copy(xv, scale, false, ld);
    for (const dim3 g : {cell_grid_for(s.rows, ld, 64, 4224), dim3(1, 2)}) {
      std::vector<std::uint8_t> got(want.size(), kByteCanary);
      run_grid(g, 64, [&](const GridPos& p) { quantize_work(p, xv, scale, got.data(), ld); });
      check_bytes(got, want, "quantised copy");
    }

    // Transposed, K (the rows) padded: the blocks of fp8.cu's grid, each a load and a store.
    const std::int64_t tld = round_up(s.rows, 16);
    const std::vector<std::uint8_t> want_t = expected_copy(xv, scale, true, tld);
    std::vector<std::uint8_t> got_t(want_t.size(), kByteCanary);
    const std::int64_t bxs = (s.cols + kTransposeTile - 1) / kTransposeTile;
    const std::int64_t bys = (tld + kTransposeTile - 1) / kTransposeTile;
    for (std::int64_t by = 0; by < bys; ++by) {
      for (std::int64_t bx = 0; bx < bxs; ++bx) {
        TransposeTile tile;
        for (std::int64_t y = 0; y < kTransposeRows; ++y)
          for (std::int64_t t = 0; t < kTransposeTile; ++t)
            quantize_transpose_load(GridPos{t, kTransposeTile, y, kTransposeRows}, bx, by, xv,
                                    scale, tile);
        for (std::int64_t y = 0; y < kTransposeRows; ++y)
          for (std::int64_t t = 0; t < kTransposeTile; ++t)
            quantize_transpose_store(GridPos{t, kTransposeTile, y, kTransposeRows}, bx, by, xv,
                                     tile, got_t.data(), tld);
      }
    }
    check_bytes(got_t, want_t, "transposed quantised copy");
  }
}

// One recipe's operand: its tile, the layout of its scales, the K alignment of its copy.
struct TileCase {
  Fp8Tile tile;
  ScaleLayout layout;
  std::int64_t k_align;
  const char* what;
};
const TileCase kTileCases[] = {
    {{1, kFp8BlockTile, false}, kVec128, 16, "blockwise activation: 1 x 128, VEC128_32F"},
    {{kFp8BlockTile, kFp8BlockTile, false}, kBlk128, 16, "blockwise weight: 128 x 128, BLK128x128"},
    {{1, kFp8MxTile, true}, kMx, kFp8MxTile, "mxfp8: 1 x 32, VEC32_UE8M0"},
};

TEST_CASE("tile quantise work: each tile's values in the K-major copy and its scale in place") {
  // outer 130: a second, partial 128-row block; k 300: a partial last K-tile and padding.
  const std::int64_t outer = 130, k = 300;
  for (const TileCase& tc : kTileCases) {
    const std::int64_t kp = round_up(k, tc.k_align);
    const std::int64_t tiles_k = (kp + tc.tile.k - 1) / tc.tile.k;
    const std::int64_t tiles_outer = (outer + tc.tile.outer - 1) / tc.tile.outer;
    std::int64_t scale_bytes = 0;
    switch (tc.layout) {
      case kMx:
        scale_bytes = mx_scale_bytes(outer, tiles_k);
        break;
      case kBlk128:
        scale_bytes = (outer + 127) / 128 * round_up(tiles_k, 4) * 4;
        break;
      case kVec128:
        scale_bytes = outer * tiles_k * 4;
        break;
    }
    // The backend's fill of the scales before the kernel: E8M0 127 (1) or FP32 0.
    const std::uint8_t fill = tc.layout == kMx ? 127 : 0;
    for (bool outer_is_row : {true, false}) {
      HostMat x(outer_is_row ? outer : k, outer_is_row ? k : outer,
                outer_is_row ? k + 4 : outer + 6, 0, DType::bf16);
      spread(x);
      const Mat xv = x.view();
      auto value = [&](std::int64_t o, std::int64_t kk) {
        return outer_is_row ? load(xv, o, kk) : load(xv, kk, o);
      };
      // The plain loop: each tile's amax over its real elements, then its values and scale.
      std::vector<std::uint8_t> want(static_cast<std::size_t>(outer * kp + kTail), kByteCanary);
      std::vector<std::uint8_t> want_scales(static_cast<std::size_t>(scale_bytes + kTail),
                                            kByteCanary);
      std::memset(want_scales.data(), fill, static_cast<std::size_t>(scale_bytes));
      for (std::int64_t to = 0; to < tiles_outer; ++to) {
        for (std::int64_t tk = 0; tk < tiles_k; ++tk) {
          const std::int64_t o0 = to * tc.tile.outer, k0 = tk * tc.tile.k;
          const std::int64_t o1 = std::min(outer, o0 + tc.tile.outer);
          const std::int64_t k1 = std::min(kp, k0 + tc.tile.k);
          float amax = 0.0f;
          for (std::int64_t o = o0; o < o1; ++o)
            for (std::int64_t kk = k0; kk < std::min(k1, k); ++kk)
              amax = std::fmax(amax, std::fabs(value(o, kk)));
          const float scale = fp8_tile_scale(amax, tc.tile);
          for (std::int64_t o = o0; o < o1; ++o)
            for (std::int64_t kk = k0; kk < k1; ++kk)
              want[static_cast<std::size_t>(o * kp + kk)] =
                  to_e4m3(kk < k ? fp8_quantize(value(o, kk), scale) : 0.0f);
          const float descale = fp8_descale(scale);
          if (tc.layout == kMx) {
            want_scales[static_cast<std::size_t>(mx_scale_offset(o0, tk, tiles_k))] =
                e8m0_from_descale(descale);
          } else {
            const std::int64_t at = tc.layout == kBlk128 ? blk128_scale_offset(to, tk, tiles_k)
                                                         : vec128_scale_offset(o0, tk, outer);
            std::memcpy(want_scales.data() + 4 * at, &descale, 4);
          }
        }
      }
      // The backend's block (32 x 4 threads) and a small odd one (3 x 2), every thread of every
      // region through the four phases in turn (the barriers between them), in shared memory
      // that starts as NaNs (what a phase reads, an earlier one must have written).
      for (const dim3 block : {dim3(32, 4), dim3(3, 2)}) {
        CAPTURE(tc.what);
        CAPTURE(outer_is_row);
        CAPTURE(block.x);
        std::vector<std::uint8_t> got(want.size(), kByteCanary),
            scales(want_scales.size(), kByteCanary);
        std::memset(scales.data(), fill, static_cast<std::size_t>(scale_bytes));
        std::vector<float> shared(static_cast<std::size_t>(fp8_region_shared_floats(tc.tile)));
        const auto each_thread = [&](const std::function<void(const GridPos&)>& phase) {
          for (std::int64_t y = 0; y < block.y; ++y)
            for (std::int64_t x = 0; x < block.x; ++x) phase(GridPos{x, block.x, y, block.y});
        };
        for (std::int64_t i = 0; i < fp8_regions(tc.tile, outer, kp); ++i) {
          const Fp8Region r = fp8_region(tc.tile, outer, kp, i);
          std::fill(shared.begin(), shared.end(), std::numeric_limits<float>::quiet_NaN());
          float* sm = shared.data();
          each_thread([&](const GridPos& t) { fp8_region_load(t, xv, outer_is_row, k, r, sm); });
          each_thread([&](const GridPos& t) { fp8_region_row_max(t, tc.tile, r, sm); });
          each_thread([&](const GridPos& t) {
            fp8_region_scales(t, tc.tile, tc.layout, outer, kp, r, sm, scales.data());
          });
          each_thread(
              [&](const GridPos& t) { fp8_region_store(t, tc.tile, kp, r, sm, got.data()); });
        }
        check_bytes(got, want, "tile-quantised copy");
        check_bytes(scales, want_scales, "scales");
      }
    }
  }
}

}  // namespace
}  // namespace moebench::cuda
