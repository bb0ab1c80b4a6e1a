#include "harness/backends/cpu/cpu_compute.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "harness/compute/gemm_shape.hpp"
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

void check_mat(const Mat& m, DType dtype, const char* what) {
  MB_CHECK(m.dtype == dtype, what << " is " << dtype_name(m.dtype) << ", the cpu backend expects "
                                  << dtype_name(dtype));
  MB_CHECK(m.rows >= 0 && m.cols >= 0 && m.ld >= m.cols,
           what << " has shape " << m.rows << "x" << m.cols << " with ld " << m.ld);
  MB_CHECK(m.data != nullptr || m.numel() == 0, what << " has no data");
}

void check_shape(const Mat& m, std::int64_t rows, std::int64_t cols, DType dtype,
                 const char* what) {
  check_mat(m, dtype, what);
  MB_CHECK(m.rows == rows && m.cols == cols,
           what << " is " << m.rows << "x" << m.cols << ", expected " << rows << "x" << cols);
}

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

// One C = alpha op(A) op(B) + beta C straight on the callers' views.
void sgemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
           const Mat& c) {
  check_mat(a, DType::f32, "gemm A");
  check_mat(b, DType::f32, "gemm B");
  check_mat(c, DType::f32, "gemm C");
  const auto [m, n, k] = gemm_shape(trans_a, trans_b, a, b, c);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // An empty sum (an expert that got no tokens in a weight gradient): C = beta C only.
    for_rows(c, [&](float* row, std::int64_t) {
      for (std::int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
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

// Index column of a row-movement op: n x 1 i32, every entry in [0, bound).
const std::int32_t* checked_index(const Mat& index, std::int64_t n, std::int64_t bound,
                                  const char* op) {
  check_shape(index, n, 1, DType::i32, op);
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

Tensor CpuCompute::alloc(std::int64_t rows, std::int64_t cols, DType dtype) {
  MB_CHECK(rows >= 0 && cols >= 0, "alloc of " << rows << "x" << cols);
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

void CpuCompute::upload(const float* host, Mat dst) {
  check_mat(dst, DType::f32, "upload destination");
  for_rows(dst, [&](float* row, std::int64_t r) {
    std::memcpy(row, host + r * dst.cols, dst.cols * sizeof(float));
  });
}

void CpuCompute::upload_i32(const std::int32_t* host, Mat dst) {
  check_mat(dst, DType::i32, "upload_i32 destination");
  for (std::int64_t r = 0; r < dst.rows; ++r)
    std::memcpy(row_i32(dst, r), host + r * dst.cols, dst.cols * sizeof(std::int32_t));
}

void CpuCompute::download(Mat src, float* host) {
  check_mat(src, DType::f32, "download source");
  for_rows(src, [&](float* row, std::int64_t r) {
    std::memcpy(host + r * src.cols, row, src.cols * sizeof(float));
  });
}

void CpuCompute::download_i32(Mat src, std::int32_t* host) {
  check_mat(src, DType::i32, "download_i32 source");
  for (std::int64_t r = 0; r < src.rows; ++r)
    std::memcpy(host + r * src.cols, row_i32(src, r), src.cols * sizeof(std::int32_t));
}

std::int64_t CpuCompute::memory_available_bytes() const {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;  // reported in kB
  }
  throw RuntimeError("cpu backend: no MemAvailable in /proc/meminfo");
}

void CpuCompute::zero(Mat x) {
  fill(x, 0.0f);
}

void CpuCompute::fill(Mat x, float value) {
  check_mat(x, DType::f32, "fill");
  for_rows(x, [&](float* row, std::int64_t) { std::fill(row, row + x.cols, value); });
}

void CpuCompute::copy(Mat src, Mat dst) {
  check_mat(src, DType::f32, "copy source");
  check_shape(dst, src.rows, src.cols, DType::f32, "copy destination");
  for_rows(src, [&](float* row, std::int64_t r) {
    std::memmove(row_f32(dst, r), row, src.cols * sizeof(float));
  });
}

void CpuCompute::axpby(float alpha, Mat x, float beta, Mat y) {
  check_mat(x, DType::f32, "axpby x");
  check_shape(y, x.rows, x.cols, DType::f32, "axpby y");
  for_rows(x, [&](const float* xr, std::int64_t r) {
    float* yr = row_f32(y, r);
    if (beta == 0.0f) {
      for (std::int64_t j = 0; j < x.cols; ++j) yr[j] = alpha * xr[j];
    } else {
      for (std::int64_t j = 0; j < x.cols; ++j) yr[j] = alpha * xr[j] + beta * yr[j];
    }
  });
}

void CpuCompute::fill_random(Mat x, std::uint64_t seed, std::uint64_t stream, float scale) {
  check_mat(x, DType::f32, "fill_random");
  for_rows(x, [&](float* row, std::int64_t r) {
    const auto base = static_cast<std::uint64_t>(r * x.cols);
    for (std::int64_t j = 0; j < x.cols; ++j)
      row[j] = scale * uniform_pm1(seed, stream, base + static_cast<std::uint64_t>(j));
  });
}

std::string CpuCompute::gemm_path() const {
  return linear_precision_ == LinearPrecision::fp8
             ? "linear layers: fp8 e4m3 emulation (per-tensor scales, inputs rounded to E4M3, "
               "then cblas_sgemm); router: cblas_sgemm fp32"
             : "cblas_sgemm fp32";
}

std::string CpuCompute::grouped_gemm_path() const {
  return "one GEMM per expert, as gemm_path";
}

std::string CpuCompute::attention_path() const {
  return "loops per sequence and head: causal masked softmax in fp32, log-sum-exp saved";
}

void CpuCompute::gemm(bool trans_a, bool trans_b, float alpha, Mat a, Mat b, float beta, Mat c) {
  sgemm(trans_a, trans_b, alpha, a, b, beta, c);
}

void CpuCompute::grouped_gemm(bool trans_a, bool trans_b, float alpha,
                              std::span<const GemmProblem> p, float beta) {
  for (const GemmProblem& g : p) sgemm(trans_a, trans_b, alpha, g.a, g.b, beta, g.c);
}

void CpuCompute::fp8_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                          float beta, const Mat& c) {
  check_mat(a, DType::f32, "gemm A");
  check_mat(b, DType::f32, "gemm B");
  check_mat(c, DType::f32, "gemm C");
  const auto [m, n, k] = gemm_shape(trans_a, trans_b, a, b, c);
  if (m == 0 || n == 0 || k == 0) {
    sgemm(trans_a, trans_b, alpha, a, b, beta, c);  // nothing to quantise
    return;
  }
  ++fp8_gemms_;
  const float descale_a = quantize_fp8(a, fp8_a_);
  const float descale_b = quantize_fp8(b, fp8_b_);
  const Mat qa{fp8_a_.data(), a.rows, a.cols, a.cols, DType::f32};
  const Mat qb{fp8_b_.data(), b.rows, b.cols, b.cols, DType::f32};
  sgemm(trans_a, trans_b, alpha * descale_a * descale_b, qa, qb, beta, c);
}

void CpuCompute::rmsnorm_forward(Mat x, Mat weight, float eps, Mat y, Mat rstd) {
  check_mat(x, DType::f32, "rmsnorm x");
  check_shape(weight, 1, x.cols, DType::f32, "rmsnorm weight");
  check_shape(y, x.rows, x.cols, DType::f32, "rmsnorm y");
  check_shape(rstd, x.rows, 1, DType::f32, "rmsnorm rstd");
  MB_CHECK(x.cols > 0, "rmsnorm of zero columns");
  for_rows(x, [&](const float* xr, std::int64_t r) {
    *row_f32(rstd, r) = rmsnorm_row_forward(xr, weight.as<float>(), x.cols, eps, row_f32(y, r));
  });
}

void CpuCompute::rmsnorm_backward(Mat dy, Mat x, Mat weight, Mat rstd, Mat dx, Mat dweight) {
  check_mat(x, DType::f32, "rmsnorm x");
  check_shape(dy, x.rows, x.cols, DType::f32, "rmsnorm dy");
  check_shape(weight, 1, x.cols, DType::f32, "rmsnorm weight");
  check_shape(rstd, x.rows, 1, DType::f32, "rmsnorm rstd");
  check_shape(dx, x.rows, x.cols, DType::f32, "rmsnorm dx");
  check_shape(dweight, 1, x.cols, DType::f32, "rmsnorm dweight");
  for_rows(x, [&](const float* xr, std::int64_t r) {
    rmsnorm_row_backward(row_f32(dy, r), xr, weight.as<float>(), *row_f32(rstd, r), x.cols,
                         row_f32(dx, r), dweight.as<float>());
  });
}

void CpuCompute::rope_apply(Mat x, std::int64_t seq_len, std::int64_t heads,
                            std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                            float theta, bool inverse) {
  check_mat(x, DType::f32, "rope x");
  MB_CHECK(seq_len > 0 && heads > 0 && dim > 0 && dim % 2 == 0 && offset >= 0,
           "rope: seq_len " << seq_len << ", heads " << heads << ", dim " << dim
                            << " (even), offset " << offset);
  MB_CHECK((heads - 1) * head_stride + offset + dim <= x.cols,
           "rope: head " << heads - 1 << " at column " << (heads - 1) * head_stride + offset
                         << " + " << dim << " exceeds " << x.cols << " columns");
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

void CpuCompute::rope_forward(Mat x, std::int64_t seq_len, std::int64_t heads,
                              std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                              float theta) {
  rope_apply(x, seq_len, heads, head_stride, offset, dim, theta, false);
}

void CpuCompute::rope_backward(Mat dx, std::int64_t seq_len, std::int64_t heads,
                               std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                               float theta) {
  rope_apply(dx, seq_len, heads, head_stride, offset, dim, theta, true);
}

void CpuCompute::swiglu_forward(Mat gate_up, Mat out) {
  check_mat(gate_up, DType::f32, "swiglu gate_up");
  MB_CHECK(gate_up.cols % 2 == 0, "swiglu gate_up has odd width " << gate_up.cols);
  const std::int64_t f = gate_up.cols / 2;
  check_shape(out, gate_up.rows, f, DType::f32, "swiglu out");
  for_rows(gate_up, [&](const float* gu, std::int64_t r) {
    float* o = row_f32(out, r);
    for (std::int64_t j = 0; j < f; ++j) o[j] = moebench::swiglu_forward(gu[j], gu[f + j]);
  });
}

void CpuCompute::swiglu_backward(Mat gate_up, Mat dout, Mat dgate_up) {
  check_mat(gate_up, DType::f32, "swiglu gate_up");
  MB_CHECK(gate_up.cols % 2 == 0, "swiglu gate_up has odd width " << gate_up.cols);
  const std::int64_t f = gate_up.cols / 2;
  check_shape(dout, gate_up.rows, f, DType::f32, "swiglu dout");
  check_shape(dgate_up, gate_up.rows, gate_up.cols, DType::f32, "swiglu dgate_up");
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

// Attention runs per (sequence, head) on the callers' strided views: S = scale Q K^T in one
// seq x seq buffer, softmax in place (its log-sum-exp saved), O = P V. Backward recomputes P
// from the saved log-sum-exp, as the fused GPU kernels do.
namespace {

void check_attention(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v,
                     const Mat& out, const Mat& stats) {
  MB_CHECK(s.batch >= 0 && s.seq_len > 0 && s.heads > 0 && s.qk_dim > 0 && s.v_dim > 0,
           "attention shape: batch " << s.batch << ", seq_len " << s.seq_len << ", heads "
                                     << s.heads << ", qk_dim " << s.qk_dim << ", v_dim "
                                     << s.v_dim);
  const std::int64_t rows = s.batch * s.seq_len;
  check_shape(q, rows, s.heads * s.qk_dim, DType::f32, "attention q");
  check_shape(k, rows, s.heads * s.qk_dim, DType::f32, "attention k");
  check_shape(v, rows, s.heads * s.v_dim, DType::f32, "attention v");
  check_shape(out, rows, s.heads * s.v_dim, DType::f32, "attention out");
  check_shape(stats, rows, s.heads, DType::f32, "attention stats");
  // Every dimension and ld handed to CBLAS below fits its int (so plain casts are safe there).
  for (const Mat* m : {&q, &k, &v, &out}) blas_int(m->ld, "attention ld");
  blas_int(s.seq_len * s.seq_len, "seq_len^2");
}

// The first element of (sequence b, head h) in a q/k/v-shaped matrix of head width `width`.
float* head_ptr(const Mat& m, const AttentionShape& s, std::int64_t b, std::int64_t h,
                std::int64_t width) {
  return m.as<float>() + b * s.seq_len * m.ld + h * width;
}

// Visible keys of query row i.
std::int64_t visible(const AttentionShape& s, std::int64_t i) {
  return s.causal ? i + 1 : s.seq_len;
}

// p (seq x seq) = scale Q K^T for one head.
void head_scores(const AttentionShape& s, const Mat& q, const Mat& k, std::int64_t b,
                 std::int64_t h, float* p) {
  const int t = blas_int(s.seq_len, "seq_len");
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, blas_int(s.qk_dim, "qk_dim"), s.scale,
              head_ptr(q, s, b, h, s.qk_dim), blas_int(q.ld, "ld"), head_ptr(k, s, b, h, s.qk_dim),
              blas_int(k.ld, "ld"), 0.0f, p, t);
}

}  // namespace

void CpuCompute::attention_forward(const AttentionShape& s, Mat q, Mat k, Mat v, Mat out,
                                   Mat stats) {
  check_attention(s, q, k, v, out, stats);
  const std::int64_t t = s.seq_len;
  float* p = scratch(static_cast<std::size_t>(t * t));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      head_scores(s, q, k, b, h, p);
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
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(t),
                  static_cast<int>(s.v_dim), static_cast<int>(t), 1.0f, p, static_cast<int>(t),
                  head_ptr(v, s, b, h, s.v_dim), static_cast<int>(v.ld), 0.0f,
                  head_ptr(out, s, b, h, s.v_dim), static_cast<int>(out.ld));
    }
  }
}

void CpuCompute::attention_backward(const AttentionShape& s, Mat q, Mat k, Mat v, Mat out, Mat dout,
                                    Mat stats, Mat dq, Mat dk, Mat dv) {
  check_attention(s, q, k, v, out, stats);
  check_shape(dout, out.rows, out.cols, DType::f32, "attention dout");
  check_shape(dq, q.rows, q.cols, DType::f32, "attention dq");
  check_shape(dk, k.rows, k.cols, DType::f32, "attention dk");
  check_shape(dv, v.rows, v.cols, DType::f32, "attention dv");
  for (const Mat* m : {&dout, &dq, &dk, &dv}) blas_int(m->ld, "attention ld");
  const std::int64_t t = s.seq_len;
  const int ti = static_cast<int>(t);
  const int qk = static_cast<int>(s.qk_dim);
  const int vd = static_cast<int>(s.v_dim);
  float* p = scratch(static_cast<std::size_t>(2 * t * t));
  float* dp = p + t * t;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      const float* qp = head_ptr(q, s, b, h, s.qk_dim);
      const float* kp = head_ptr(k, s, b, h, s.qk_dim);
      const float* vp = head_ptr(v, s, b, h, s.v_dim);
      const float* op = head_ptr(out, s, b, h, s.v_dim);
      const float* dop = head_ptr(dout, s, b, h, s.v_dim);
      head_scores(s, q, k, b, h, p);
      for (std::int64_t i = 0; i < t; ++i) {
        float* pr = p + i * t;
        const std::int64_t n = visible(s, i);
        const float lse = row_f32(stats, b * t + i)[h];
        for (std::int64_t j = 0; j < n; ++j) pr[j] = ::expf(pr[j] - lse);
        std::fill(pr + n, pr + t, 0.0f);
      }
      // dV = P^T dO, dP = dO V^T.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ti, vd, ti, 1.0f, p, ti, dop,
                  static_cast<int>(dout.ld), 0.0f, head_ptr(dv, s, b, h, s.v_dim),
                  static_cast<int>(dv.ld));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ti, ti, vd, 1.0f, dop,
                  static_cast<int>(dout.ld), vp, static_cast<int>(v.ld), 0.0f, dp, ti);
      // dS = P * (dP - rowsum(dO * O)), in place of dP.
      for (std::int64_t i = 0; i < t; ++i) {
        const float* o_row = op + i * out.ld;
        const float* do_row = dop + i * dout.ld;
        float d = 0.0f;
        for (std::int64_t c = 0; c < s.v_dim; ++c) d += do_row[c] * o_row[c];
        const float* pr = p + i * t;
        float* dr = dp + i * t;
        for (std::int64_t j = 0; j < t; ++j) dr[j] = pr[j] * (dr[j] - d);
      }
      // dQ = scale dS K, dK = scale dS^T Q.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ti, qk, ti, s.scale, dp, ti, kp,
                  static_cast<int>(k.ld), 0.0f, head_ptr(dq, s, b, h, s.qk_dim),
                  static_cast<int>(dq.ld));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ti, qk, ti, s.scale, dp, ti, qp,
                  static_cast<int>(q.ld), 0.0f, head_ptr(dk, s, b, h, s.qk_dim),
                  static_cast<int>(dk.ld));
    }
  }
}

void CpuCompute::router_forward(const RouterParams& p, Mat logits, Mat bias,
                                std::int64_t first_token, Mat scores, Mat indices, Mat weights) {
  MB_CHECK(p.experts > 0 && p.experts <= kMaxExperts && p.top_k > 0 && p.top_k <= kMaxTopK &&
               p.top_k <= p.experts,
           "router: " << p.experts << " experts (at most " << kMaxExperts << "), top_k " << p.top_k
                      << " (at most " << kMaxTopK << ")");
  check_shape(logits, logits.rows, p.experts, DType::f32, "router logits");
  const std::int64_t tokens = logits.rows;
  const float* bias_row = nullptr;
  if (bias.data != nullptr) {
    check_shape(bias, 1, p.experts, DType::f32, "router bias");
    bias_row = bias.as<float>();
  }
  check_shape(scores, tokens, p.experts, DType::f32, "router scores");
  check_shape(indices, tokens, p.top_k, DType::i32, "router indices");
  check_shape(weights, tokens, p.top_k, DType::f32, "router weights");
  for_rows(logits, [&](const float* lr, std::int64_t r) {
    float* sr = row_f32(scores, r);
    for (std::int32_t e = 0; e < p.experts; ++e) sr[e] = sigmoid(lr[e]);
    route_token(p, sr, bias_row, static_cast<std::uint64_t>(first_token + r), row_i32(indices, r),
                row_f32(weights, r));
  });
}

void CpuCompute::router_backward(const RouterParams& p, Mat scores, Mat indices, Mat dweights,
                                 Mat dlogits) {
  check_shape(scores, scores.rows, p.experts, DType::f32, "router scores");
  check_shape(indices, scores.rows, p.top_k, DType::i32, "router indices");
  check_shape(dweights, scores.rows, p.top_k, DType::f32, "router dweights");
  check_shape(dlogits, scores.rows, p.experts, DType::f32, "router dlogits");
  for_rows(scores, [&](const float* sr, std::int64_t r) {
    float* dl = row_f32(dlogits, r);
    std::fill(dl, dl + p.experts, 0.0f);
    route_token_backward(p, sr, row_i32(indices, r), row_f32(dweights, r), dl);
  });
}

void CpuCompute::gather_rows(Mat src, Mat index, Mat dst) {
  check_mat(src, DType::f32, "gather_rows src");
  check_shape(dst, dst.rows, src.cols, DType::f32, "gather_rows dst");
  checked_index(index, dst.rows, src.rows, "gather_rows index");
  for_rows(dst, [&](float* d, std::int64_t i) {
    std::memcpy(d, row_f32(src, *row_i32(index, i)), src.cols * sizeof(float));
  });
}

void CpuCompute::scatter_add_rows(Mat src, Mat index, Mat scale, Mat dst) {
  check_mat(src, DType::f32, "scatter_add_rows src");
  check_shape(dst, dst.rows, src.cols, DType::f32, "scatter_add_rows dst");
  checked_index(index, src.rows, dst.rows, "scatter_add_rows index");
  const bool scaled = scale.data != nullptr;
  if (scaled) check_shape(scale, src.rows, 1, DType::f32, "scatter_add_rows scale");
  for_rows(src, [&](const float* sr, std::int64_t i) {
    float* d = row_f32(dst, *row_i32(index, i));
    const float a = scaled ? *row_f32(scale, i) : 1.0f;
    for (std::int64_t c = 0; c < src.cols; ++c) d[c] += a * sr[c];
  });
}

void CpuCompute::gather_rows_scaled(Mat src, Mat index, Mat scale, Mat dst) {
  check_mat(src, DType::f32, "gather_rows_scaled src");
  check_shape(dst, dst.rows, src.cols, DType::f32, "gather_rows_scaled dst");
  checked_index(index, dst.rows, src.rows, "gather_rows_scaled index");
  check_shape(scale, dst.rows, 1, DType::f32, "gather_rows_scaled scale");
  for_rows(dst, [&](float* d, std::int64_t i) {
    const float* sr = row_f32(src, *row_i32(index, i));
    const float a = *row_f32(scale, i);
    for (std::int64_t c = 0; c < src.cols; ++c) d[c] = a * sr[c];
  });
}

void CpuCompute::gathered_row_dot(Mat a, Mat index, Mat b, Mat out) {
  check_mat(a, DType::f32, "gathered_row_dot a");
  check_shape(b, b.rows, a.cols, DType::f32, "gathered_row_dot b");
  checked_index(index, b.rows, a.rows, "gathered_row_dot index");
  check_shape(out, b.rows, 1, DType::f32, "gathered_row_dot out");
  for_rows(b, [&](const float* br, std::int64_t i) {
    const float* ar = row_f32(a, *row_i32(index, i));
    float dot = 0.0f;
    for (std::int64_t c = 0; c < a.cols; ++c) dot += ar[c] * br[c];
    *row_f32(out, i) = dot;
  });
}

void CpuCompute::adamw(const AdamWStep& s, Mat param, Mat grad, Mat m, Mat v, Mat master) {
  check_mat(param, DType::f32, "adamw param");
  check_shape(grad, param.rows, param.cols, DType::f32, "adamw grad");
  check_shape(m, param.rows, param.cols, DType::f32, "adamw m");
  check_shape(v, param.rows, param.cols, DType::f32, "adamw v");
  const bool has_master = master.data != nullptr;
  if (has_master) check_shape(master, param.rows, param.cols, DType::f32, "adamw master");
  MB_CHECK(s.step >= 1, "adamw step " << s.step << " (1-based)");
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
