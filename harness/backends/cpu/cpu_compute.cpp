#include "harness/backends/cpu/cpu_compute.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "harness/compute/gemm_shape.hpp"
#include "harness/core/host.hpp"
#include "workloads/ops/elementwise.hpp"
#include "workloads/ops/fp8.hpp"
#include "workloads/ops/random.hpp"
#include "workloads/ops/route.hpp"

namespace moebench {

std::string blas_library_name() {
#if defined(MOEBENCH_HAVE_OPENBLAS)
  std::string config = openblas_get_config();
  while (!config.empty() && config.back() == ' ') config.pop_back();
  return config;
#else
  return "CBLAS";
#endif
}

namespace {

constexpr std::size_t kAlignment = 64;

float* row_f32(const Mat& m, std::int64_t r) {
  return m.as<float>() + r * m.ld;
}
std::int32_t* row_i32(const Mat& m, std::int64_t r) {
  return m.as<std::int32_t>() + r * m.ld;
}

int blas_int(std::int64_t v, const char* what) {
  MB_CHECK(v >= 0 && v <= INT_MAX, what << " = " << v << " exceeds the CBLAS integer range");
  return static_cast<int>(v);
}

// Applies f(float* row, r) to every row of an f32 matrix.
template <typename F>
void for_rows(const Mat& m, F&& f) {
  for (std::int64_t r = 0; r < m.rows; ++r) f(row_f32(m, r), r);
}

// Element-wise views seen as one row where every one of them is contiguous, so that the work
// runs as one loop: a parameter group's flat buffers are column vectors, millions of one-element
// rows, and a call per row cost more than the arithmetic (the optimizer's zeroing, copies and
// AdamW). An empty view (no master copy) does not count and stays as it is. Same elements, same
// order, same result. (The cuda backend's cells() does the same for its launches.)
void as_one_row(std::initializer_list<Mat*> views) {
  for (const Mat* v : views) {
    if (v->data != nullptr && !v->contiguous()) return;
  }
  for (Mat* v : views) {
    if (v->data != nullptr && v->numel() > 0) *v = v->reshaped(1, v->numel());
  }
}

// One C = alpha op(A) op(B) + beta C straight on the callers' views.
void sgemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
           const Mat& c) {
  const auto [m, n, k] = gemm_shape(trans_a, trans_b, a, b, c);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // An empty sum (an expert that got no tokens in a weight gradient): C = beta C only.
    const std::int64_t cols = n;  // (clang 14 cannot capture a structured binding)
    for_rows(c, [&](float* row, std::int64_t) {
      for (std::int64_t j = 0; j < cols; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    });
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, blas_int(m, "gemm M"), blas_int(n, "gemm N"),
              blas_int(k, "gemm K"), alpha, a.as<float>(),
              blas_int(std::max<std::int64_t>(1, a.ld), "lda"), b.as<float>(),
              blas_int(std::max<std::int64_t>(1, b.ld), "ldb"), beta, c.as<float>(),
              blas_int(std::max<std::int64_t>(1, c.ld), "ldc"));
}

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

// Index column of a row-movement op (n x 1 i32, as the interface checked): every entry in
// [0, bound), checked here on the host where the values are.
const std::int32_t* checked_index(const Mat& index, std::int64_t n, std::int64_t bound,
                                  const char* op) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t v = *row_i32(index, i);
    MB_CHECK(v >= 0 && v < bound,
             op << ": index[" << i << "] = " << v << " outside [0, " << bound << ")");
  }
  return index.as<std::int32_t>();
}

}  // namespace

CpuCompute::CpuCompute([[maybe_unused]] int blas_threads) {
#if defined(MOEBENCH_HAVE_OPENBLAS)
  if (blas_threads > 0) openblas_set_num_threads(blas_threads);
#endif
}

Tensor CpuCompute::do_alloc(std::int64_t rows, std::int64_t cols, DType dtype) {
  MB_CHECK(dtype == DType::f32 || dtype == DType::i32,
           "the cpu backend stores f32 and i32, not " << dtype_name(dtype));
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * dtype_size(dtype);
  // aligned_alloc wants a multiple of the alignment; never zero so an empty tensor is not "empty".
  const std::size_t padded =
      std::max<std::size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  void* p = std::aligned_alloc(kAlignment, padded);
  if (p == nullptr) {
    std::ostringstream os;
    os << "cpu backend: cannot allocate " << bytes << " bytes (" << rows << "x" << cols << " "
       << dtype_name(dtype) << ")";
    throw RuntimeError(os.str());
  }
  return Tensor(std::shared_ptr<void>(p, std::free), rows, cols, dtype);
}

void CpuCompute::do_upload(const float* host, const Mat& dst) {
  for_rows(dst, [&](float* row, std::int64_t r) {
    std::memcpy(row, host + r * dst.cols, dst.cols * sizeof(float));
  });
}

void CpuCompute::do_upload_i32(const std::int32_t* host, const Mat& dst) {
  for (std::int64_t r = 0; r < dst.rows; ++r)
    std::memcpy(row_i32(dst, r), host + r * dst.cols, dst.cols * sizeof(std::int32_t));
}

void CpuCompute::do_download(const Mat& src, float* host) {
  for_rows(src, [&](float* row, std::int64_t r) {
    std::memcpy(host + r * src.cols, row, src.cols * sizeof(float));
  });
}

void CpuCompute::do_download_i32(const Mat& src, std::int32_t* host) {
  for (std::int64_t r = 0; r < src.rows; ++r)
    std::memcpy(host + r * src.cols, row_i32(src, r), src.cols * sizeof(std::int32_t));
}

std::int64_t CpuCompute::memory_available_bytes() const {
  return host_memory_available_bytes();
}

// Any dtype: zero bits are 0 in f32 and i32 alike.
void CpuCompute::do_zero(const Mat& x_in) {
  Mat x = x_in;
  as_one_row({&x});
  const std::size_t row_bytes = static_cast<std::size_t>(x.cols) * dtype_size(x.dtype);
  for (std::int64_t r = 0; r < x.rows; ++r) {
    std::memset(static_cast<char*>(x.data) + r * x.ld * dtype_size(x.dtype), 0, row_bytes);
  }
}

void CpuCompute::do_fill(const Mat& x_in, float value) {
  Mat x = x_in;
  as_one_row({&x});
  for_rows(x, [&](float* row, std::int64_t) { std::fill(row, row + x.cols, value); });
}

// The dtypes are equal (the cpu backend's floats are all f32): rows move as bytes.
void CpuCompute::do_copy(const Mat& src_in, const Mat& dst_in) {
  Mat src = src_in, dst = dst_in;
  as_one_row({&src, &dst});
  const std::size_t elem = dtype_size(src.dtype);
  for (std::int64_t r = 0; r < src.rows; ++r) {
    std::memmove(static_cast<char*>(dst.data) + r * dst.ld * elem,
                 static_cast<const char*>(src.data) + r * src.ld * elem,
                 static_cast<std::size_t>(src.cols) * elem);
  }
}

void CpuCompute::do_axpby(float alpha, const Mat& x_in, float beta, const Mat& y_in) {
  Mat x = x_in, y = y_in;
  as_one_row({&x, &y});
  for_rows(x, [&](const float* xr, std::int64_t r) {
    float* yr = row_f32(y, r);
    if (beta == 0.0f) {
      for (std::int64_t j = 0; j < x.cols; ++j) yr[j] = alpha * xr[j];
    } else {
      for (std::int64_t j = 0; j < x.cols; ++j) yr[j] = alpha * xr[j] + beta * yr[j];
    }
  });
}

void CpuCompute::do_fill_random(const Mat& x, std::uint64_t seed, std::uint64_t stream,
                                float scale) {
  for_rows(x, [&](float* row, std::int64_t r) {
    const auto base = static_cast<std::uint64_t>(r * x.cols);
    for (std::int64_t j = 0; j < x.cols; ++j)
      row[j] = scale * uniform_pm1(seed, stream, base + static_cast<std::uint64_t>(j));
  });
}

std::string CpuCompute::gemm_path() const {
  return linear_precision_ == LinearPrecision::fp8
             ? "linear layers: fp8 e4m3 emulation (" + describe(fp8_recipe_) +
                   "; inputs rounded to E4M3, then cblas_sgemm; weights quantised once per "
                   "step); router: cblas_sgemm fp32"
             : "cblas_sgemm fp32";
}

std::string CpuCompute::grouped_gemm_path() const {
  return "one GEMM per expert, as gemm_path";
}

std::string CpuCompute::attention_path() const {
  return "loops per sequence and head: causal masked softmax in fp32, log-sum-exp saved";
}

void CpuCompute::do_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                         float beta, const Mat& c) {
  sgemm(trans_a, trans_b, alpha, a, b, beta, c);
}

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

void CpuCompute::do_rmsnorm_forward(const Mat& x, const Mat& weight, float eps, const Mat& y,
                                    const Mat& rstd) {
  for_rows(x, [&](const float* xr, std::int64_t r) {
    *row_f32(rstd, r) = rmsnorm_row_forward(xr, weight.as<float>(), x.cols, eps, row_f32(y, r));
  });
}

void CpuCompute::do_rmsnorm_backward(const Mat& dy, const Mat& x, const Mat& weight,
                                     const Mat& rstd, const Mat& dx, const Mat& dweight) {
  for_rows(x, [&](const float* xr, std::int64_t r) {
    rmsnorm_row_backward(row_f32(dy, r), xr, weight.as<float>(), *row_f32(rstd, r), x.cols,
                         row_f32(dx, r), dweight.as<float>());
  });
}

void CpuCompute::do_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads,
                         std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                         float theta, bool inverse) {
  // cos/sin of every (position, pair), shared by the heads and the sequences of the batch.
  const std::int64_t half = dim / 2;
  const std::int64_t positions = std::min(seq_len, x.rows);
  std::vector<float> cs(static_cast<std::size_t>(positions * half * 2));
  for (std::int64_t pos = 0; pos < positions; ++pos) {
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = rope_angle(pos, i, dim, theta);
      cs[(pos * half + i) * 2] = ::cosf(angle);
      cs[(pos * half + i) * 2 + 1] = inverse ? -::sinf(angle) : ::sinf(angle);
    }
  }
  for_rows(x, [&](float* row, std::int64_t r) {
    const float* t = cs.data() + (r % seq_len) * half * 2;
    for (std::int64_t h = 0; h < heads; ++h) {
      float* seg = row + h * head_stride + offset;
      for (std::int64_t i = 0; i < half; ++i)
        rope_rotate_pair(seg + i, seg + i + half, t[2 * i], t[2 * i + 1]);
    }
  });
}

void CpuCompute::do_swiglu_forward(const Mat& gate_up, const Mat& out) {
  const std::int64_t f = gate_up.cols / 2;
  for_rows(gate_up, [&](const float* gu, std::int64_t r) {
    float* o = row_f32(out, r);
    for (std::int64_t j = 0; j < f; ++j) o[j] = moebench::swiglu_forward(gu[j], gu[f + j]);
  });
}

void CpuCompute::do_swiglu_backward(const Mat& gate_up, const Mat& dout, const Mat& dgate_up) {
  const std::int64_t f = gate_up.cols / 2;
  for_rows(gate_up, [&](const float* gu, std::int64_t r) {
    const float* d = row_f32(dout, r);
    float* dg = row_f32(dgate_up, r);
    for (std::int64_t j = 0; j < f; ++j)
      moebench::swiglu_backward(gu[j], gu[f + j], d[j], dg + j, dg + f + j);
  });
}

float* CpuCompute::scratch(std::size_t floats) {
  if (scratch_.size() < floats) scratch_.resize(floats);
  return scratch_.data();
}

// Attention runs per (sequence, head) on the operands in place (attention_operands.hpp): S =
// scale (Q_k K^T + Q_rope K_rope^T) in one seq x seq buffer, softmax in place (its log-sum-exp
// saved), O = P V. Backward recomputes P from the saved log-sum-exp, as the fused GPU kernels do;
// a shared operand's gradient sums the heads' products.
namespace {

// The interface checked the shapes; every dimension and ld handed to CBLAS below fits its int
// (so plain casts are safe there).
void check_blas_range(const AttentionShape& s, std::initializer_list<const HeadCols*> ops) {
  for (const HeadCols* x : ops) blas_int(x->m.ld, "attention ld");
  blas_int(s.seq_len * s.seq_len, "seq_len^2");
}

// Row-major C = alpha op(A) op(B) + beta C over raw pointers (dimensions checked above).
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// Head h of sequence b of an operand, from column `col` of the head, and its leading dimension.
struct HeadView {
  float* p;
  std::int64_t ld;
};
HeadView head(const HeadCols& x, const AttentionShape& s, std::int64_t b, std::int64_t h,
              std::int64_t col = 0) {
  return {x.head(h).as<float>() + b * s.seq_len * x.m.ld + col, x.m.ld};
}

// Visible keys of query row i.
std::int64_t visible(const AttentionShape& s, std::int64_t i) {
  return s.causal ? i + 1 : s.seq_len;
}

// p (seq x seq) = scale (Q_k K^T + Q_rope K_rope^T) for one head.
void head_scores(const AttentionShape& s, const AttentionOperands& in, std::int64_t b,
                 std::int64_t h, float* p) {
  const std::int64_t t = s.seq_len;
  const HeadView q = head(in.q, s, b, h), k = head(in.k, s, b, h);
  sgemm(false, true, t, t, in.k.width, s.scale, q.p, q.ld, k.p, k.ld, 0.0f, p, t);
  if (in.k_rope.width > 0) {
    const HeadView qr = head(in.q, s, b, h, in.k.width), kr = head(in.k_rope, s, b, h);
    sgemm(false, true, t, t, in.k_rope.width, s.scale, qr.p, qr.ld, kr.p, kr.ld, 1.0f, p, t);
  }
}

}  // namespace

void CpuCompute::do_attention_forward(const AttentionShape& s, const AttentionOperands& in,
                                      const Mat& out, const Mat& stats) {
  const HeadCols o{out, s.v_dim, s.v_dim};
  check_blas_range(s, {&in.q, &in.k, &in.k_rope, &in.v, &o});
  const std::int64_t t = s.seq_len;
  float* p = scratch(static_cast<std::size_t>(t * t));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      head_scores(s, in, b, h, p);
      for (std::int64_t i = 0; i < t; ++i) {
        float* pr = p + i * t;
        const std::int64_t n = visible(s, i);
        float mx = pr[0];
        for (std::int64_t j = 1; j < n; ++j) mx = std::max(mx, pr[j]);
        float sum = 0.0f;
        for (std::int64_t j = 0; j < n; ++j) sum += ::expf(pr[j] - mx);
        const float lse = mx + ::logf(sum);
        for (std::int64_t j = 0; j < n; ++j) pr[j] = ::expf(pr[j] - lse);
        std::fill(pr + n, pr + t, 0.0f);
        row_f32(stats, b * t + i)[h] = lse;
      }
      const HeadView v = head(in.v, s, b, h), oh = head(o, s, b, h);
      sgemm(false, false, t, s.v_dim, t, 1.0f, p, t, v.p, v.ld, 0.0f, oh.p, oh.ld);
    }
  }
}

void CpuCompute::do_attention_backward(const AttentionShape& s, const AttentionOperands& in,
                                       const Mat& out, const Mat& dout, const Mat& stats,
                                       const AttentionOperands& grad) {
  const HeadCols o{out, s.v_dim, s.v_dim}, d_o{dout, s.v_dim, s.v_dim};
  check_blas_range(
      s, {&in.q, &in.k, &in.k_rope, &in.v, &o, &d_o, &grad.q, &grad.k, &grad.k_rope, &grad.v});
  const std::int64_t t = s.seq_len;
  float* p = scratch(static_cast<std::size_t>(2 * t * t));
  float* dp = p + t * t;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      const HeadView v = head(in.v, s, b, h), oh = head(o, s, b, h), doh = head(d_o, s, b, h);
      head_scores(s, in, b, h, p);
      for (std::int64_t i = 0; i < t; ++i) {
        float* pr = p + i * t;
        const std::int64_t n = visible(s, i);
        const float lse = row_f32(stats, b * t + i)[h];
        for (std::int64_t j = 0; j < n; ++j) pr[j] = ::expf(pr[j] - lse);
        std::fill(pr + n, pr + t, 0.0f);
      }
      // dV = P^T dO, dP = dO V^T.
      const HeadView dv = head(grad.v, s, b, h);
      sgemm(true, false, t, s.v_dim, t, 1.0f, p, t, doh.p, doh.ld, 0.0f, dv.p, dv.ld);
      sgemm(false, true, t, t, s.v_dim, 1.0f, doh.p, doh.ld, v.p, v.ld, 0.0f, dp, t);
      // dS = P * (dP - rowsum(dO * O)), in place of dP.
      for (std::int64_t i = 0; i < t; ++i) {
        const float* o_row = oh.p + i * oh.ld;
        const float* do_row = doh.p + i * doh.ld;
        float d = 0.0f;
        for (std::int64_t c = 0; c < s.v_dim; ++c) d += do_row[c] * o_row[c];
        const float* pr = p + i * t;
        float* dr = dp + i * t;
        for (std::int64_t j = 0; j < t; ++j) dr[j] = pr[j] * (dr[j] - d);
      }
      // Per part of the key: dQ_part = scale dS K_part, dK_part = scale dS^T Q_part (summed
      // over the heads where the part is shared).
      std::int64_t col = 0;
      for (const auto& [k, dk] : {std::pair{&in.k, &grad.k}, std::pair{&in.k_rope, &grad.k_rope}}) {
        if (k->width == 0) continue;
        const HeadView kh = head(*k, s, b, h), dkh = head(*dk, s, b, h);
        const HeadView qh = head(in.q, s, b, h, col), dqh = head(grad.q, s, b, h, col);
        sgemm(false, false, t, k->width, t, s.scale, dp, t, kh.p, kh.ld, 0.0f, dqh.p, dqh.ld);
        const float beta = dk->shared() && h > 0 ? 1.0f : 0.0f;
        sgemm(true, false, t, k->width, t, s.scale, dp, t, qh.p, qh.ld, beta, dkh.p, dkh.ld);
        col += k->width;
      }
    }
  }
}

void CpuCompute::do_router_forward(const RouterParams& p, const Mat& logits, const Mat& bias,
                                   std::int64_t first_token, const Mat& scores, const Mat& indices,
                                   const Mat& weights) {
  const float* bias_row = bias.data != nullptr ? bias.as<float>() : nullptr;
  for_rows(logits, [&](const float* lr, std::int64_t r) {
    float* sr = row_f32(scores, r);
    const auto g = static_cast<std::uint64_t>(first_token + r);
    for (std::int32_t e = 0; e < p.experts; ++e) sr[e] = router_logit(p, lr[e], g, e);
    router_scores(p, sr);
    route_token(p, sr, bias_row, g, row_i32(indices, r), row_f32(weights, r));
  });
}

void CpuCompute::do_router_backward(const RouterParams& p, const Mat& scores, const Mat& indices,
                                    const Mat& dweights, const Mat& dlogits) {
  for_rows(scores, [&](const float* sr, std::int64_t r) {
    float* dl = row_f32(dlogits, r);
    std::fill(dl, dl + p.experts, 0.0f);
    route_token_backward(p, sr, row_i32(indices, r), row_f32(dweights, r), dl);
  });
}

void CpuCompute::do_gather_rows(const Mat& src, const Mat& index, const Mat& dst) {
  checked_index(index, dst.rows, src.rows, "gather_rows index");
  for_rows(dst, [&](float* d, std::int64_t i) {
    std::memcpy(d, row_f32(src, *row_i32(index, i)), src.cols * sizeof(float));
  });
}

void CpuCompute::do_scatter_add_rows(const Mat& src, const Mat& index, const Mat& scale,
                                     const Mat& dst) {
  checked_index(index, src.rows, dst.rows, "scatter_add_rows index");
  const bool scaled = scale.data != nullptr;
  for_rows(src, [&](const float* sr, std::int64_t i) {
    float* d = row_f32(dst, *row_i32(index, i));
    const float a = scaled ? *row_f32(scale, i) : 1.0f;
    for (std::int64_t c = 0; c < src.cols; ++c) d[c] += a * sr[c];
  });
}

void CpuCompute::do_gather_rows_scaled(const Mat& src, const Mat& index, const Mat& scale,
                                       const Mat& dst) {
  checked_index(index, dst.rows, src.rows, "gather_rows_scaled index");
  for_rows(dst, [&](float* d, std::int64_t i) {
    const float* sr = row_f32(src, *row_i32(index, i));
    const float a = *row_f32(scale, i);
    for (std::int64_t c = 0; c < src.cols; ++c) d[c] = a * sr[c];
  });
}

void CpuCompute::do_gathered_row_dot(const Mat& a, const Mat& index, const Mat& b, const Mat& out) {
  checked_index(index, b.rows, a.rows, "gathered_row_dot index");
  for_rows(b, [&](const float* br, std::int64_t i) {
    const float* ar = row_f32(a, *row_i32(index, i));
    float dot = 0.0f;
    for (std::int64_t c = 0; c < a.cols; ++c) dot += ar[c] * br[c];
    *row_f32(out, i) = dot;
  });
}

void CpuCompute::do_cross_entropy(const Mat& logits, const Mat& labels, float grad_scale,
                                  const Mat& loss) {
  checked_index(labels, logits.rows, logits.cols, "cross_entropy label");
  for_rows(logits, [&](float* z, std::int64_t r) {
    *row_f32(loss, r) = cross_entropy_row(z, logits.cols, *row_i32(labels, r), grad_scale);
  });
}

void CpuCompute::do_adamw(const AdamWStep& s, const Mat& param_in, const Mat& grad_in,
                          const Mat& m_in, const Mat& v_in, const Mat& master_in) {
  Mat param = param_in, grad = grad_in, m = m_in, v = v_in, master = master_in;
  as_one_row({&param, &grad, &m, &v, &master});
  const bool has_master = master.data != nullptr;
  const AdamWCoeffs c = adamw_coeffs(s);
  for_rows(param, [&](float* pr, std::int64_t r) {
    const float* gr = row_f32(grad, r);
    float* mr = row_f32(m, r);
    float* vr = row_f32(v, r);
    // FP32 storage: the master copy, where one is kept, is the parameter's own value.
    float* ur = has_master ? row_f32(master, r) : pr;
    for (std::int64_t j = 0; j < param.cols; ++j) adamw_update(c, ur + j, gr[j], mr + j, vr + j);
    if (has_master) std::memmove(pr, ur, param.cols * sizeof(float));
  });
}

}  // namespace moebench
