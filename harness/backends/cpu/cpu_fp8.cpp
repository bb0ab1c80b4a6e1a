// The cpu backend's FP8 emulation (--precision fp8): each operand quantised to E4M3 values held in
// FP32 with the recipe's scales (per tensor, or per tile: harness/math/fp8.hpp), multiplied in
// FP32 by the BLAS and descaled; a weight's copies kept for the step. The numerics of an FP8
// GEMM with FP32 accumulation, not its speed.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/cpu/cpu_rows.hpp"
#include "harness/compute/gemm_shape.hpp"
#include "harness/math/fp8.hpp"

namespace moebench {

using cpu::blas_int;
using cpu::for_rows;
using cpu::row_f32;
using cpu::sgemm;

namespace {

// op(X)'s tiles (fp8_recipe.hpp: the tiles in GEMM coordinates, `outer` along M for A and along
// N for B), indexed from X's stored (row i, column j); a tile of 0 extent spans the whole.
struct TileGrid {
  bool outer_is_row = true;
  std::int64_t to = 1, tk = 1, tiles_k = 1, tiles_outer = 1;
  std::size_t at(std::int64_t i, std::int64_t j) const {
    const std::int64_t o = outer_is_row ? i : j, k = outer_is_row ? j : i;
    return static_cast<std::size_t>((o / to) * tiles_k + k / tk);
  }
  std::size_t count() const { return static_cast<std::size_t>(tiles_outer * tiles_k); }
};

TileGrid tile_grid(std::int64_t rows, std::int64_t cols, bool trans, Fp8Operand which,
                   const Fp8Tile& tile) {
  TileGrid g;
  g.outer_is_row = (which == Fp8Operand::a) != trans;
  const std::int64_t outer_extent = g.outer_is_row ? rows : cols;
  const std::int64_t k_extent = g.outer_is_row ? cols : rows;
  g.to = std::max<std::int64_t>(1, tile.outer > 0 ? tile.outer : outer_extent);
  g.tk = std::max<std::int64_t>(1, tile.k > 0 ? tile.k : k_extent);
  g.tiles_k = std::max<std::int64_t>(1, (k_extent + g.tk - 1) / g.tk);
  g.tiles_outer = std::max<std::int64_t>(1, (outer_extent + g.to - 1) / g.to);
  return g;
}

// Each tile's scale: 448 / amax, or MX's power of two.
std::vector<float> tile_scales(const Mat& x, const TileGrid& g, const Fp8Tile& tile) {
  std::vector<float> amax(g.count(), 0.0f);
  for_rows(x, [&](const float* row, std::int64_t i) {
    for (std::int64_t j = 0; j < x.cols; ++j) {
      float& m = amax[g.at(i, j)];
      m = std::max(m, std::fabs(row[j]));
    }
  });
  std::vector<float> scale(amax.size());
  for (std::size_t t = 0; t < amax.size(); ++t) scale[t] = fp8_tile_scale(amax[t], tile);
  return scale;
}

// Quantises op(X) tile by tile and writes the dequantised values, q x descale of its tile, into
// `out` in X's own layout (contiguous, x.rows x x.cols), so the FP32 GEMM then sees exactly the
// values the block-scaled FP8 GEMM multiplies.
void quantize_tiles(const Mat& x, bool trans, Fp8Operand which, const Fp8Tile& tile,
                    std::vector<float>& out) {
  const TileGrid g = tile_grid(x.rows, x.cols, trans, which, tile);
  const std::vector<float> scale = tile_scales(x, g, tile);
  out.resize(static_cast<std::size_t>(x.numel()));
  for_rows(x, [&](const float* row, std::int64_t i) {
    float* q = out.data() + i * x.cols;
    for (std::int64_t j = 0; j < x.cols; ++j) {
      const float sc = scale[g.at(i, j)];
      q[j] = fp8_quantize(row[j], sc) * fp8_descale(sc);
    }
  });
}

// Quantises `m` with its per-tensor scale into `out` (contiguous, m.rows x m.cols); returns the
// descale the product is multiplied by.
float quantize_fp8(const Mat& m, std::vector<float>& out) {
  float amax = 0.0f;
  for_rows(m, [&](const float* row, std::int64_t) {
    for (std::int64_t j = 0; j < m.cols; ++j) amax = std::max(amax, std::fabs(row[j]));
  });
  const float scale = fp8_scale(amax);
  out.resize(static_cast<std::size_t>(m.numel()));
  for_rows(m, [&](const float* row, std::int64_t r) {
    float* q = out.data() + r * m.cols;
    for (std::int64_t j = 0; j < m.cols; ++j) q[j] = fp8_quantize(row[j], scale);
  });
  return fp8_descale(scale);
}
}  // namespace

// One operand's E4M3 copy: per tensor, the quantised values and the descale applied after the
// GEMM; block-scaled, the dequantised values (descale 1). A weight's copy (B without trans_a) is
// kept until begin_step(), or made in scratch at every GEMM without kept copies.
const float* CpuCompute::fp8_operand(const Mat& x, bool trans, Fp8Operand which, bool trans_a,
                                     std::vector<float>& scratch, float& descale) {
  WeightCopy* kept = nullptr;
  if (is_weight(which, trans_a) && !keep_fp8_weights_) ++fp8_weight_quantisations_;
  if (is_weight(which, trans_a) && keep_fp8_weights_) {
    const auto [it, fresh] =
        fp8_weights_.try_emplace(Fp8WeightView{x.data, x.rows, x.cols, x.ld, trans});
    kept = &it->second;
    if (!fresh) {
      descale = kept->descale;
      return kept->values.data();
    }
    ++fp8_weight_quantisations_;
  }
  std::vector<float>& out = kept != nullptr ? kept->values : scratch;
  descale = 1.0f;
  if (fp8_recipe_ == Fp8Recipe::tensor) {
    descale = quantize_fp8(x, out);
  } else {
    quantize_tiles(x, trans, which, operand_tile(fp8_recipe_, which, trans_a), out);
  }
  if (kept != nullptr) kept->descale = descale;
  return out.data();
}

void CpuCompute::do_fp8_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                             float beta, const Mat& c) {
  ++fp8_gemms_;
  float descale_a = 1.0f, descale_b = 1.0f;
  const float* qa_data = fp8_operand(a, trans_a, Fp8Operand::a, trans_a, fp8_a_, descale_a);
  const float* qb_data = fp8_operand(b, trans_b, Fp8Operand::b, trans_a, fp8_b_, descale_b);
  const Mat qa{const_cast<float*>(qa_data), a.rows, a.cols, a.cols, DType::f32};
  const Mat qb{const_cast<float*>(qb_data), b.rows, b.cols, b.cols, DType::f32};
  sgemm(trans_a, trans_b, alpha * descale_a * descale_b, qa, qb, beta, c);
}

// The saved input's words: one FP32 descale per tile of the weight gradient's A operand (per
// tensor: one), then the E4M3 bytes of x in its own layout.
bool CpuCompute::do_save_fp8_input(const Mat& x, const Mat&, Fp8Input& out) {
  const bool per_tensor = fp8_recipe_ == Fp8Recipe::tensor;
  const Fp8Tile tile = per_tensor ? Fp8Tile{} : operand_tile(fp8_recipe_, Fp8Operand::a, true);
  const TileGrid g = tile_grid(x.rows, x.cols, true, Fp8Operand::a, tile);
  const std::vector<float> scale = tile_scales(x, g, tile);
  const auto tiles = static_cast<std::int64_t>(g.count());
  out.data = alloc(tiles + (x.numel() + 3) / 4, 1, DType::i32);
  auto* descale = static_cast<float*>(out.data.data());
  auto* codes = reinterpret_cast<std::uint8_t*>(descale + tiles);
  for (std::int64_t t = 0; t < tiles; ++t) descale[t] = fp8_descale(scale[t]);
  for_rows(x, [&](const float* row, std::int64_t i) {
    std::uint8_t* q = codes + i * x.cols;
    for (std::int64_t j = 0; j < x.cols; ++j)
      q[j] = e4m3_bits(fp8_quantize(row[j], scale[g.at(i, j)]));
  });
  // Per tensor the GEMM multiplies the quantised values and then the descale, as do_fp8_gemm.
  out.descale = per_tensor ? descale[0] : 1.0f;
  return true;
}

void CpuCompute::do_fp8_wgrad(float alpha, const Fp8Input& x, const Mat& dy, float beta,
                              const Mat& c) {
  ++fp8_gemms_;
  const bool per_tensor = fp8_recipe_ == Fp8Recipe::tensor;
  const Fp8Tile tile = per_tensor ? Fp8Tile{} : operand_tile(fp8_recipe_, Fp8Operand::a, true);
  const TileGrid g = tile_grid(x.rows, x.cols, true, Fp8Operand::a, tile);
  const auto* descale = static_cast<const float*>(x.data.data());
  const auto* codes = reinterpret_cast<const std::uint8_t*>(descale + g.count());
  fp8_a_.resize(static_cast<std::size_t>(x.rows * x.cols));
  for (std::int64_t i = 0; i < x.rows; ++i) {
    for (std::int64_t j = 0; j < x.cols; ++j) {
      const std::size_t e = static_cast<std::size_t>(i * x.cols + j);
      const float v = e4m3_value(codes[e]);
      fp8_a_[e] = per_tensor ? v : v * descale[g.at(i, j)];
    }
  }
  float descale_b = 1.0f;
  const float* qb_data = fp8_operand(dy, false, Fp8Operand::b, true, fp8_b_, descale_b);
  const Mat qa{fp8_a_.data(), x.rows, x.cols, x.cols, DType::f32};
  const Mat qb{const_cast<float*>(qb_data), dy.rows, dy.cols, dy.cols, DType::f32};
  sgemm(true, false, alpha * x.descale * descale_b, qa, qb, beta, c);
}

}  // namespace moebench
