#include "harness/compute/compute.hpp"

#include <algorithm>
#include <string>

#include "harness/math/route.hpp"

namespace moebench {

namespace {

void check_mat(const Mat& m, const char* what) {
  MB_CHECK(m.rows >= 0 && m.cols >= 0 && m.ld >= m.cols,
           what << " has shape " << m.rows << "x" << m.cols << " with ld " << m.ld);
  MB_CHECK(m.data != nullptr || m.numel() == 0, what << " has no data");
}

void check_dtype(const Mat& m, DType dtype, const char* what) {
  check_mat(m, what);
  MB_CHECK(m.dtype == dtype,
           what << " is " << dtype_name(m.dtype) << ", expected " << dtype_name(dtype));
}

void check_shape(const Mat& m, std::int64_t rows, std::int64_t cols, const char* what) {
  MB_CHECK(m.rows == rows && m.cols == cols,
           what << " is " << m.rows << "x" << m.cols << ", expected " << rows << "x" << cols);
}

void check_index(const Mat& index, std::int64_t n, const char* what) {
  check_dtype(index, DType::i32, what);
  check_shape(index, n, 1, what);
}

}  // namespace

void Compute::check_float(const Mat& m, const char* what) const {
  check_mat(m, what);
  MB_CHECK(m.dtype == DType::f32 || m.dtype == activation_dtype(),
           what << " is " << dtype_name(m.dtype) << "; the " << name() << " backend computes on f32"
                << (activation_dtype() == DType::f32
                        ? std::string()
                        : std::string(" or ") + dtype_name(activation_dtype())));
}

// ---- memory ---------------------------------------------------------------------------------

Tensor Compute::alloc(std::int64_t rows, std::int64_t cols, DType dtype) {
  MB_CHECK(rows >= 0 && cols >= 0, "alloc of " << rows << "x" << cols);
  Tensor t = do_alloc(rows, cols, dtype);
  const auto bytes = static_cast<std::int64_t>(t.bytes());
  allocations_->live_bytes += bytes;
  allocations_->peak_bytes = std::max(allocations_->peak_bytes, allocations_->live_bytes);
  // The backend's tensor, released with the counted one.
  std::shared_ptr<AllocationStats> stats = allocations_;
  void* data = t.data();
  return Tensor(std::shared_ptr<void>(
                    data, [t = std::move(t), stats, bytes](void*) { stats->live_bytes -= bytes; }),
                rows, cols, dtype);
}

void Compute::upload(const float* host, Mat dst) {
  check_float(dst, "upload destination");
  MB_CHECK(host != nullptr || dst.numel() == 0, "upload from no host data");
  do_upload(host, dst);
}

void Compute::upload_i32(const std::int32_t* host, Mat dst) {
  check_dtype(dst, DType::i32, "upload_i32 destination");
  MB_CHECK(host != nullptr || dst.numel() == 0, "upload_i32 from no host data");
  do_upload_i32(host, dst);
}

void Compute::download(Mat src, float* host) {
  check_float(src, "download source");
  MB_CHECK(host != nullptr || src.numel() == 0, "download to no host memory");
  do_download(src, host);
}

void Compute::download_i32(Mat src, std::int32_t* host) {
  check_dtype(src, DType::i32, "download_i32 source");
  MB_CHECK(host != nullptr || src.numel() == 0, "download_i32 to no host memory");
  do_download_i32(src, host);
}

// ---- element-wise ---------------------------------------------------------------------------

void Compute::zero(Mat x) {
  check_mat(x, "zero");
  do_zero(x);
}

void Compute::copy(Mat src, Mat dst) {
  check_mat(src, "copy source");
  check_mat(dst, "copy destination");
  check_shape(dst, src.rows, src.cols, "copy destination");
  if (src.dtype != dst.dtype) {
    check_float(src, "copy source");
    check_float(dst, "copy destination");
  }
  do_copy(src, dst);
}

void Compute::axpby(float alpha, Mat x, float beta, Mat y) {
  check_float(x, "axpby x");
  check_float(y, "axpby y");
  check_shape(y, x.rows, x.cols, "axpby y");
  do_axpby(alpha, x, beta, y);
}

void Compute::fill_random(Mat x, std::uint64_t seed, std::uint64_t stream, float scale) {
  check_float(x, "fill_random");
  do_fill_random(x, seed, stream, scale);
}

void Compute::fill(Mat x, float value) {
  check_float(x, "fill");
  do_fill(x, value);
}

// ---- GEMMs ----------------------------------------------------------------------------------

GemmShape Compute::check_gemm(bool trans_a, bool trans_b, const Mat& a, const Mat& b,
                              const Mat& c) const {
  check_float(a, "gemm A");
  check_float(b, "gemm B");
  check_float(c, "gemm C");
  return gemm_shape(trans_a, trans_b, a, b, c);
}

void Compute::linear(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                     float beta, const Mat& c, const GemmShape& shape) {
  // An empty product has nothing to quantise: the standard GEMM does C = beta C.
  if (linear_precision_ == LinearPrecision::fp8 && shape.m > 0 && shape.n > 0 && shape.k > 0) {
    do_fp8_gemm(trans_a, trans_b, alpha, a, b, beta, c);
  } else {
    do_gemm(trans_a, trans_b, alpha, a, b, beta, c);
  }
}

void Compute::gemm(bool trans_a, bool trans_b, float alpha, Mat a, Mat b, float beta, Mat c) {
  check_gemm(trans_a, trans_b, a, b, c);
  do_gemm(trans_a, trans_b, alpha, a, b, beta, c);
}

void Compute::grouped_gemm(bool trans_a, bool trans_b, float alpha, std::span<const GemmProblem> p,
                           float beta) {
  for (const GemmProblem& g : p) check_gemm(trans_a, trans_b, g.a, g.b, g.c);
  do_grouped_gemm(trans_a, trans_b, alpha, p, beta);
}

void Compute::linear_gemm(bool trans_a, bool trans_b, float alpha, Mat a, Mat b, float beta,
                          Mat c) {
  linear(trans_a, trans_b, alpha, a, b, beta, c, check_gemm(trans_a, trans_b, a, b, c));
}

void Compute::linear_grouped_gemm(bool trans_a, bool trans_b, float alpha,
                                  std::span<const GemmProblem> p, float beta) {
  std::vector<GemmShape> shapes;
  for (const GemmProblem& g : p) shapes.push_back(check_gemm(trans_a, trans_b, g.a, g.b, g.c));
  if (linear_precision_ != LinearPrecision::fp8) {
    do_grouped_gemm(trans_a, trans_b, alpha, p, beta);
    return;
  }
  for (std::size_t i = 0; i < p.size(); ++i) {
    linear(trans_a, trans_b, alpha, p[i].a, p[i].b, beta, p[i].c, shapes[i]);
  }
}

Fp8Input Compute::save_linear_input(Mat x, Mat wgrad) {
  check_float(x, "save_linear_input x");
  check_float(wgrad, "save_linear_input wgrad");
  if (wgrad.rows != x.cols) {
    throw RuntimeError("save_linear_input: the weight gradient has " + std::to_string(wgrad.rows) +
                       " rows, x has " + std::to_string(x.cols) + " columns");
  }
  Fp8Input s;
  s.rows = x.rows;
  s.cols = x.cols;
  if (linear_precision_ == LinearPrecision::fp8 && x.numel() > 0 && wgrad.numel() > 0 &&
      do_save_fp8_input(x, wgrad, s)) {
    s.fp8 = true;
    return s;
  }
  s.data = alloc(x.rows, x.cols, x.dtype);
  copy(x, s.data);
  return s;
}

void Compute::linear_wgrad(float alpha, const Fp8Input& x, Mat dy, float beta, Mat c) {
  if (!x.fp8) {
    linear_gemm(true, false, alpha, x.data, dy, beta, c);
    return;
  }
  check_float(dy, "linear_wgrad dy");
  check_float(c, "linear_wgrad c");
  if (dy.rows != x.rows || c.rows != x.cols || c.cols != dy.cols) {
    throw RuntimeError("linear_wgrad: x^T dy with x " + std::to_string(x.rows) + " x " +
                       std::to_string(x.cols) + ", dy " + std::to_string(dy.rows) + " x " +
                       std::to_string(dy.cols) + " into c " + std::to_string(c.rows) + " x " +
                       std::to_string(c.cols));
  }
  do_fp8_wgrad(alpha, x, dy, beta, c);
}

bool Compute::do_save_fp8_input(const Mat&, const Mat&, Fp8Input&) {
  return false;
}

void Compute::do_fp8_wgrad(float, const Fp8Input&, const Mat&, float, const Mat&) {
  throw RuntimeError("the " + name() + " backend has no fp8 saved inputs");
}

void Compute::do_grouped_gemm(bool trans_a, bool trans_b, float alpha,
                              std::span<const GemmProblem> p, float beta) {
  for (const GemmProblem& g : p) do_gemm(trans_a, trans_b, alpha, g.a, g.b, beta, g.c);
}

void Compute::set_grouped_gemm_impl(GroupedGemmImpl g) {
  if (g != GroupedGemmImpl::loop) {
    throw UsageError("--grouped-gemm " + std::string(to_string(g)) +
                     " is not available with --backend " + name() +
                     " (it has no grouped GEMM); valid: loop");
  }
  grouped_impl_ = g;
}

void Compute::set_attention_impl(AttentionImpl a) {
  if (a == AttentionImpl::cudnn) {
    throw UsageError("--attention-impl cudnn is not available with --backend " + name() +
                     " (cuDNN runs on the cuda backend); valid: auto or gemm");
  }
  attention_impl_ = a;
}

void Compute::set_linear_precision(LinearPrecision p) {
  if (p != LinearPrecision::standard) {
    throw UsageError("--precision fp8 is not available with --backend " + name());
  }
  linear_precision_ = p;
}

void Compute::do_fp8_gemm(bool, bool, float, const Mat&, const Mat&, float, const Mat&) {
  throw RuntimeError("the " + name() + " backend has no fp8 GEMM");
}

// ---- marks ----------------------------------------------------------------------------------

int Compute::mark() {
  host_marks_.push_back(std::chrono::steady_clock::now());
  return static_cast<int>(host_marks_.size()) - 1;
}

std::vector<double> Compute::mark_times_s() {
  std::vector<double> t;
  for (const auto& m : host_marks_) {
    t.push_back(std::chrono::duration<double>(m - host_marks_.front()).count());
  }
  return t;
}

// ---- normalisation, rope, SwiGLU ------------------------------------------------------------

void Compute::rmsnorm_forward(Mat x, Mat weight, float eps, Mat y, Mat rstd) {
  check_float(x, "rmsnorm x");
  check_float(weight, "rmsnorm weight");
  check_shape(weight, 1, x.cols, "rmsnorm weight");
  check_float(y, "rmsnorm y");
  check_shape(y, x.rows, x.cols, "rmsnorm y");
  check_float(rstd, "rmsnorm rstd");
  check_shape(rstd, x.rows, 1, "rmsnorm rstd");
  MB_CHECK(x.cols > 0, "rmsnorm of zero columns");
  do_rmsnorm_forward(x, weight, eps, y, rstd);
}

void Compute::rmsnorm_backward(Mat dy, Mat x, Mat weight, Mat rstd, Mat dx, Mat dweight) {
  check_float(x, "rmsnorm x");
  check_float(dy, "rmsnorm dy");
  check_shape(dy, x.rows, x.cols, "rmsnorm dy");
  check_float(weight, "rmsnorm weight");
  check_shape(weight, 1, x.cols, "rmsnorm weight");
  check_float(rstd, "rmsnorm rstd");
  check_shape(rstd, x.rows, 1, "rmsnorm rstd");
  check_float(dx, "rmsnorm dx");
  check_shape(dx, x.rows, x.cols, "rmsnorm dx");
  check_float(dweight, "rmsnorm dweight");
  check_shape(dweight, 1, x.cols, "rmsnorm dweight");
  MB_CHECK(x.cols > 0, "rmsnorm of zero columns");
  do_rmsnorm_backward(dy, x, weight, rstd, dx, dweight);
}

void Compute::check_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads,
                         std::int64_t head_stride, std::int64_t offset, std::int64_t dim) const {
  check_float(x, "rope x");
  MB_CHECK(seq_len > 0 && heads > 0 && dim > 0 && dim % 2 == 0 && offset >= 0,
           "rope: seq_len " << seq_len << ", heads " << heads << ", dim " << dim
                            << " (even), offset " << offset);
  MB_CHECK((heads - 1) * head_stride + offset + dim <= x.cols,
           "rope: head " << heads - 1 << " at column " << (heads - 1) * head_stride + offset
                         << " + " << dim << " exceeds " << x.cols << " columns");
}

void Compute::rope_forward(Mat x, std::int64_t seq_len, std::int64_t heads,
                           std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                           float theta) {
  check_rope(x, seq_len, heads, head_stride, offset, dim);
  do_rope(x, seq_len, heads, head_stride, offset, dim, theta, false);
}

void Compute::rope_backward(Mat dx, std::int64_t seq_len, std::int64_t heads,
                            std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                            float theta) {
  check_rope(dx, seq_len, heads, head_stride, offset, dim);
  do_rope(dx, seq_len, heads, head_stride, offset, dim, theta, true);
}

void Compute::swiglu_forward(Mat gate_up, Mat out) {
  check_float(gate_up, "swiglu gate_up");
  MB_CHECK(gate_up.cols % 2 == 0, "swiglu gate_up has odd width " << gate_up.cols);
  check_float(out, "swiglu out");
  check_shape(out, gate_up.rows, gate_up.cols / 2, "swiglu out");
  do_swiglu_forward(gate_up, out);
}

void Compute::swiglu_backward(Mat gate_up, Mat dout, Mat dgate_up) {
  check_float(gate_up, "swiglu gate_up");
  MB_CHECK(gate_up.cols % 2 == 0, "swiglu gate_up has odd width " << gate_up.cols);
  check_float(dout, "swiglu dout");
  check_shape(dout, gate_up.rows, gate_up.cols / 2, "swiglu dout");
  check_float(dgate_up, "swiglu dgate_up");
  check_shape(dgate_up, gate_up.rows, gate_up.cols, "swiglu dgate_up");
  do_swiglu_backward(gate_up, dout, dgate_up);
}

// ---- attention ------------------------------------------------------------------------------

void Compute::check_head_cols(const HeadCols& x, std::int64_t heads, std::int64_t rows,
                              bool may_share, const char* what) const {
  check_float(x.m, what);
  MB_CHECK(x.m.rows == rows, what << " has " << x.m.rows << " rows; the shape says " << rows);
  MB_CHECK(x.head_stride >= x.width || (may_share && x.head_stride == 0),
           what << ": a head stride of " << x.head_stride << " columns for heads " << x.width
                << " wide; want >= the width" << (may_share ? ", or 0 (shared by the heads)" : ""));
  const std::int64_t end = (heads - 1) * x.head_stride + x.width;
  MB_CHECK(end <= x.m.cols, what << ": head " << heads - 1 << " ends at column " << end << " of a "
                                 << x.m.cols << "-column matrix");
}

void Compute::check_attention(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                              const Mat& stats) const {
  MB_CHECK(s.batch >= 0 && s.seq_len > 0 && s.heads > 0 && s.qk_dim > 0 && s.v_dim > 0,
           "attention shape: batch " << s.batch << ", seq_len " << s.seq_len << ", heads "
                                     << s.heads << ", qk_dim " << s.qk_dim << ", v_dim "
                                     << s.v_dim);
  MB_CHECK(in.q.width == s.qk_dim && in.v.width == s.v_dim && in.k.width > 0 &&
               in.k_rope.width >= 0 && in.k.width + in.k_rope.width == s.qk_dim,
           "attention operands: q "
               << in.q.width << ", k " << in.k.width << " + " << in.k_rope.width << ", v "
               << in.v.width << " columns a head; the shape says " << s.qk_dim << " for q and k, "
               << s.v_dim << " for v");
  const std::int64_t rows = s.batch * s.seq_len;
  check_head_cols(in.q, s.heads, rows, false, "attention q");
  check_head_cols(in.k, s.heads, rows, true, "attention k");
  if (in.k_rope.width > 0) check_head_cols(in.k_rope, s.heads, rows, true, "attention k_rope");
  check_head_cols(in.v, s.heads, rows, false, "attention v");
  check_float(out, "attention out");
  check_shape(out, rows, s.heads * s.v_dim, "attention out");
  check_float(stats, "attention stats");
  check_shape(stats, rows, s.heads, "attention stats");
}

void Compute::attention_forward(const AttentionShape& s, const AttentionOperands& in, Mat out,
                                Mat stats) {
  check_attention(s, in, out, stats);
  do_attention_forward(s, in, out, stats);
}

void Compute::attention_backward(const AttentionShape& s, const AttentionOperands& in, Mat out,
                                 Mat dout, Mat stats, const AttentionOperands& grad) {
  check_attention(s, in, out, stats);
  check_float(dout, "attention dout");
  check_shape(dout, out.rows, out.cols, "attention dout");
  const struct {
    const HeadCols* g;
    const HeadCols* like;
    const char* what;
  } grads[] = {{&grad.q, &in.q, "attention dq"},
               {&grad.k, &in.k, "attention dk"},
               {&grad.k_rope, &in.k_rope, "attention dk_rope"},
               {&grad.v, &in.v, "attention dv"}};
  for (const auto& x : grads) {
    MB_CHECK(x.g->width == x.like->width && x.g->head_stride == x.like->head_stride,
             x.what << ": " << x.g->width << " columns a head " << x.g->head_stride
                    << " apart; its input has " << x.like->width << ", " << x.like->head_stride
                    << " apart");
    if (x.g->width > 0) check_head_cols(*x.g, s.heads, out.rows, true, x.what);
  }
  do_attention_backward(s, in, out, dout, stats, grad);
}

void Compute::attention_forward(const AttentionShape& s, Mat q, Mat k, Mat v, Mat out, Mat stats) {
  attention_forward(s, AttentionOperands::dense(s, q, k, v), out, stats);
}

void Compute::attention_backward(const AttentionShape& s, Mat q, Mat k, Mat v, Mat out, Mat dout,
                                 Mat stats, Mat dq, Mat dk, Mat dv) {
  attention_backward(s, AttentionOperands::dense(s, q, k, v), out, dout, stats,
                     AttentionOperands::dense(s, dq, dk, dv));
}

// ---- routing and row movement ---------------------------------------------------------------

void Compute::router_forward(const RouterParams& p, Mat logits, Mat bias, std::int64_t first_token,
                             Mat scores, Mat indices, Mat weights) {
  MB_CHECK(p.experts > 0 && p.experts <= kMaxExperts && p.top_k > 0 && p.top_k <= kMaxTopK &&
               p.top_k <= p.experts,
           "router: " << p.experts << " experts (at most " << kMaxExperts << "), top_k " << p.top_k
                      << " (at most " << kMaxTopK << ")");
  check_float(logits, "router logits");
  check_shape(logits, logits.rows, p.experts, "router logits");
  const std::int64_t tokens = logits.rows;
  if (bias.data != nullptr) {
    check_dtype(bias, DType::f32, "router bias");
    check_shape(bias, 1, p.experts, "router bias");
  }
  check_dtype(scores, DType::f32, "router scores");
  check_shape(scores, tokens, p.experts, "router scores");
  check_dtype(indices, DType::i32, "router indices");
  check_shape(indices, tokens, p.top_k, "router indices");
  check_dtype(weights, DType::f32, "router weights");
  check_shape(weights, tokens, p.top_k, "router weights");
  do_router_forward(p, logits, bias, first_token, scores, indices, weights);
}

void Compute::router_backward(const RouterParams& p, Mat scores, Mat indices, Mat dweights,
                              Mat dlogits) {
  MB_CHECK(p.experts > 0 && p.experts <= kMaxExperts && p.top_k > 0 && p.top_k <= kMaxTopK,
           "router: " << p.experts << " experts, top_k " << p.top_k);
  check_dtype(scores, DType::f32, "router scores");
  check_shape(scores, scores.rows, p.experts, "router scores");
  check_dtype(indices, DType::i32, "router indices");
  check_shape(indices, scores.rows, p.top_k, "router indices");
  check_dtype(dweights, DType::f32, "router dweights");
  check_shape(dweights, scores.rows, p.top_k, "router dweights");
  check_dtype(dlogits, DType::f32, "router dlogits");
  check_shape(dlogits, scores.rows, p.experts, "router dlogits");
  do_router_backward(p, scores, indices, dweights, dlogits);
}

void Compute::gather_rows(Mat src, Mat index, Mat dst) {
  check_float(src, "gather_rows src");
  check_float(dst, "gather_rows dst");
  check_shape(dst, dst.rows, src.cols, "gather_rows dst");
  check_index(index, dst.rows, "gather_rows index");
  do_gather_rows(src, index, dst);
}

void Compute::scatter_add_rows(Mat src, Mat index, Mat scale, Mat dst) {
  check_float(src, "scatter_add_rows src");
  check_float(dst, "scatter_add_rows dst");
  check_shape(dst, dst.rows, src.cols, "scatter_add_rows dst");
  check_index(index, src.rows, "scatter_add_rows index");
  if (scale.data != nullptr) {
    check_float(scale, "scatter_add_rows scale");
    check_shape(scale, src.rows, 1, "scatter_add_rows scale");
  }
  do_scatter_add_rows(src, index, scale, dst);
}

void Compute::gather_rows_scaled(Mat src, Mat index, Mat scale, Mat dst) {
  check_float(src, "gather_rows_scaled src");
  check_float(dst, "gather_rows_scaled dst");
  check_shape(dst, dst.rows, src.cols, "gather_rows_scaled dst");
  check_index(index, dst.rows, "gather_rows_scaled index");
  check_float(scale, "gather_rows_scaled scale");
  check_shape(scale, dst.rows, 1, "gather_rows_scaled scale");
  do_gather_rows_scaled(src, index, scale, dst);
}

void Compute::gathered_row_dot(Mat a, Mat index, Mat b, Mat out) {
  check_float(a, "gathered_row_dot a");
  check_float(b, "gathered_row_dot b");
  check_shape(b, b.rows, a.cols, "gathered_row_dot b");
  check_index(index, b.rows, "gathered_row_dot index");
  check_float(out, "gathered_row_dot out");
  check_shape(out, b.rows, 1, "gathered_row_dot out");
  do_gathered_row_dot(a, index, b, out);
}

// ---- the loss -------------------------------------------------------------------------------

void Compute::cross_entropy(Mat logits, Mat labels, float grad_scale, Mat loss) {
  check_float(logits, "cross_entropy logits");
  MB_CHECK(logits.cols > 0, "cross_entropy over an empty vocabulary");
  check_index(labels, logits.rows, "cross_entropy labels");
  check_dtype(loss, DType::f32, "cross_entropy loss");
  check_shape(loss, logits.rows, 1, "cross_entropy loss");
  do_cross_entropy(logits, labels, grad_scale, loss);
}

// ---- the optimizer --------------------------------------------------------------------------

void Compute::adamw(const AdamWStep& s, Mat param, Mat grad, Mat m, Mat v, Mat master) {
  check_float(param, "adamw param");
  check_float(grad, "adamw grad");
  check_shape(grad, param.rows, param.cols, "adamw grad");
  check_float(m, "adamw m");
  check_shape(m, param.rows, param.cols, "adamw m");
  check_float(v, "adamw v");
  check_shape(v, param.rows, param.cols, "adamw v");
  if (master.data != nullptr) {
    check_dtype(master, DType::f32, "adamw master");
    check_shape(master, param.rows, param.cols, "adamw master");
  }
  MB_CHECK(s.step >= 1, "adamw step " << s.step << " (1-based)");
  do_adamw(s, param, grad, m, v, master);
}

}  // namespace moebench
