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

#include "harness/backends/cpu/cpu_rows.hpp"
#include "harness/compute/gemm_shape.hpp"
#include "harness/core/host.hpp"
#include "harness/math/elementwise.hpp"
#include "harness/math/fp8.hpp"
#include "harness/math/random.hpp"
#include "harness/math/route.hpp"

namespace moebench {

using cpu::blas_int;
using cpu::for_rows;
using cpu::row_f32;
using cpu::row_i32;
using cpu::sgemm;

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

// One C = alpha op(A) op(B) + beta C straight on the callers' views.
void cpu::sgemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
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
