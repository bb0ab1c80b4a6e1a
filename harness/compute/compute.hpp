// The compute interface: every piece of arithmetic the training step runs, on memory the backend
// owns. `cpu` implements it with CBLAS and plain loops over the shared element-wise functions in
// harness/math; `cuda` with cuBLASLt and kernels calling those same functions.
//
// Conventions: matrices are row-major `Mat` views; float arguments are FP32; every op is
// asynchronous with respect to the host on backends that can be, and ordered on one stream;
// `synchronize()` waits for all of it. Ops that "accumulate" add into their output.
//
// The public calls are not virtual: each checks its arguments once for every backend (shapes,
// dtypes, ranges; RuntimeError naming the op otherwise), then calls the protected do_* that a
// backend implements (the non-virtual-interface pattern). A "float" tensor is FP32 or the
// backend's storage type (cpu: FP32 only; cuda: FP32 or BF16). A backend adds only checks of
// its own (CBLAS's int range, cuBLAS's BF16 operands, index values on the host).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "harness/compute/attention_operands.hpp"
#include "harness/compute/backend_kind.hpp"
#include "harness/compute/device_info.hpp"
#include "harness/compute/fp8_recipe.hpp"
#include "harness/compute/gemm_shape.hpp"
#include "harness/core/tensor.hpp"
#include "harness/math/params.hpp"

namespace moebench {

// One GEMM of a grouped call: C = alpha * op(A) * op(B) + beta * C.
struct GemmProblem {
  Mat a;
  Mat b;
  Mat c;
};

// The precision of the linear layers' GEMMs (--precision): `standard` is the backend's storage
// precision (cpu FP32, cuda BF16, FP32 accumulation); `fp8` quantises both inputs of each GEMM
// to E4M3 with one scale per tensor (amax / 448), multiplies with FP32 accumulation and writes
// the output in the storage precision. Attention's core, norms and the router never change.
enum class LinearPrecision { standard, fp8 };

// --precision fp8: the linear GEMMs that ran with E4M3 inputs, and those that fp8 asked for but
// ran in the storage precision because the backend has no FP8 algorithm for their shape.
struct Fp8GemmCounts {
  std::int64_t gemms = 0;
  std::int64_t fallbacks = 0;
  // Weights quantised (each layout a weight is read in counts once): at most once per step when
  // the copies are kept until begin_step(), at every GEMM when they are not
  // (set_fp8_weight_copies).
  std::int64_t weight_quantisations = 0;
};

// What a device backend chose, call by call, counted since construction (the run report's
// meta.kernels.calls): core attention's forward and backward calls through cuDNN's fused SDPA or
// the batched GEMMs, and the graphs cuDNN refused; the BF16 GEMMs cuBLASLt ran and those it had
// no algorithm for (cublasGemmEx); with --grouped-gemm grouped, the grouped calls and the
// problems that ran one GEMM each instead; fp8's counts.
struct KernelCalls {
  std::int64_t attention_cudnn = 0;
  std::int64_t attention_gemm = 0;
  std::int64_t attention_cudnn_refused = 0;
  std::int64_t gemm_cublaslt = 0;
  std::int64_t gemm_fallbacks = 0;
  std::int64_t grouped_calls = 0;
  std::int64_t grouped_loop_problems = 0;
  Fp8GemmCounts fp8;
};

// The tensors alloc() handed out and not yet freed, in bytes, and their high-water mark since
// construction or Compute::reset_allocation_peak(): what the step's own tensors take, on every
// backend (a device backend's library workspaces and caches are not tensors).
struct AllocationStats {
  std::int64_t live_bytes = 0;
  std::int64_t peak_bytes = 0;
};

// --fp8-saved-inputs: a linear GEMM's input kept for its weight gradient (x^T dy, contracted over
// x's rows) as the FP8 copy that GEMM reads, as Transformer Engine keeps its quantised inputs:
// E4M3 bytes and the scales of their tiles, held in `data` (32-bit words of raw bytes, laid out
// by the backend); or, where the backend would not run that GEMM in FP8, a copy of x itself.
struct Fp8Input {
  Tensor data;
  std::int64_t rows = 0, cols = 0;  // x's shape
  bool fp8 = false;                 // false: data is x in its own dtype
  float descale = 1.0f;             // the host backend's per-tensor descale
};

class Compute {
 public:
  virtual ~Compute() = default;
  virtual ComputeBackend kind() const = 0;
  std::string name() const { return to_string(kind()); }
  // The storage type of activations, weights and gradients on this backend.
  virtual DType activation_dtype() const = 0;

  // Which implementation runs, for the report: the GEMMs, the experts' grouped GEMMs, attention.
  virtual std::string gemm_path() const = 0;
  virtual std::string grouped_gemm_path() const = 0;
  virtual std::string attention_path() const = 0;

  // Memory. Contents of a new tensor are unspecified.
  Tensor alloc(std::int64_t rows, std::int64_t cols, DType dtype);
  Tensor alloc(std::int64_t rows, std::int64_t cols) {
    return alloc(rows, cols, activation_dtype());
  }
  AllocationStats allocation_stats() const { return *allocations_; }
  void reset_allocation_peak() { allocations_->peak_bytes = allocations_->live_bytes; }
  void upload(const float* host, Mat dst);  // host FP32 -> dst (converted)
  void upload_i32(const std::int32_t* host, Mat dst);
  void download(Mat src, float* host);             // src -> host FP32; synchronises
  void download_i32(Mat src, std::int32_t* host);  // synchronises
  virtual void synchronize() = 0;
  virtual std::int64_t memory_available_bytes() const = 0;
  // Whether tensors live in host memory that MPI can read and write directly. A device backend
  // says false, and `--comm mpi` then stages its buffers through the host.
  virtual bool memory_is_host() const { return true; }
  // Which memory on this host the tensors live in ("host", or a GPU's PCI bus id): ranks with the
  // same host and domain share it, and the memory check counts them together.
  virtual std::string memory_domain() const { return "host"; }
  // The device the tensors live on; none for a host backend.
  virtual std::optional<DeviceInfo> device_info() const { return std::nullopt; }
  // Memory the backend will still take for itself besides tensors, not yet allocated (cuda: the
  // attention score scratch), for the memory check.
  virtual std::int64_t reserved_bytes() const { return 0; }

  // Element-wise and initialisation.
  void zero(Mat x);  // any dtype
  // Same shape; the same dtype, or float to float (converted).
  void copy(Mat src, Mat dst);
  // y = alpha * x + beta * y; beta == 0 does not read y (the BLAS convention).
  void axpby(float alpha, Mat x, float beta, Mat y);
  // Deterministic pseudo-random fill: element i gets scale * u(seed, stream, i), u uniform in
  // [-1, 1) (harness/math/random.hpp), so any backend and any rank produce the same values.
  void fill_random(Mat x, std::uint64_t seed, std::uint64_t stream, float scale);
  void fill(Mat x, float value);

  // GEMM: C = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T.
  void gemm(bool trans_a, bool trans_b, float alpha, Mat a, Mat b, float beta, Mat c);
  // Independent GEMMs with the same transposes (the experts' MLPs).
  void grouped_gemm(bool trans_a, bool trans_b, float alpha, std::span<const GemmProblem> p,
                    float beta);

  // The linear layers' GEMMs (attention projections, dense and shared MLPs, routed experts):
  // as gemm() and grouped_gemm(), in the precision set_linear_precision() chose. The router's
  // GEMMs and attention's core are not linear layers in this sense and call gemm(). In fp8 each
  // problem of a grouped call is its own pair of tensors (an expert's weight, its slice of
  // tokens) with its own scales.
  // The convention fp8 relies on (harness/compute/fp8_recipe.hpp): without trans_a, B is a weight
  // that does not change until the next begin_step() (its quantised copy is kept until then);
  // with trans_a the GEMM is a weight gradient and both operands are activations.
  void linear_gemm(bool trans_a, bool trans_b, float alpha, Mat a, Mat b, float beta, Mat c);
  void linear_grouped_gemm(bool trans_a, bool trans_b, float alpha, std::span<const GemmProblem> p,
                           float beta);
  // --fp8-saved-inputs: x (a linear GEMM's input) kept for its weight gradient into `wgrad`
  // (x.cols x n): in FP8 (Fp8Input) when the precision is fp8 and the backend runs that GEMM in
  // FP8, else as a copy. linear_wgrad(alpha, s, dy, beta, c) is then c = alpha s^T dy + beta c,
  // with exactly linear_gemm(true, false, alpha, x, dy, beta, c)'s result: the weight gradient
  // quantises x the same way whenever it runs, so only the memory differs.
  Fp8Input save_linear_input(Mat x, Mat wgrad);
  void linear_wgrad(float alpha, const Fp8Input& x, Mat dy, float beta, Mat c);
  // UsageError where the backend has no FP8 arithmetic (cuda below compute capability 8.9).
  virtual void set_linear_precision(LinearPrecision p);
  LinearPrecision linear_precision() const { return linear_precision_; }
  // How fp8 scales its operands (--fp8-recipe); UsageError where the device cannot run the
  // recipe (cuda: blockwise needs Hopper, mxfp8 Blackwell). The host backend emulates all three.
  virtual void set_fp8_recipe(Fp8Recipe r) { fp8_recipe_ = r; }
  Fp8Recipe fp8_recipe() const { return fp8_recipe_; }
  // How grouped_gemm() runs (--grouped-gemm); UsageError where the backend has no grouped GEMM
  // (the host backend runs one GEMM per expert only).
  virtual void set_grouped_gemm_impl(GroupedGemmImpl g);
  GroupedGemmImpl grouped_gemm_impl() const { return grouped_impl_; }
  // How attention runs (--attention-impl); UsageError for cudnn where the backend has no cuDNN.
  virtual void set_attention_impl(AttentionImpl a);
  AttentionImpl attention_impl() const { return attention_impl_; }
  // --fp8-weight-copies: keep each weight's quantised copies (forward and transposed) from its
  // first GEMM of a step until begin_step() (true, the default), or quantise it at every GEMM
  // into scratch and keep nothing (false: no memory for copies, a quantisation per GEMM). The
  // GEMMs' results are the same either way: a weight does not change within a step.
  void set_fp8_weight_copies(bool keep) { keep_fp8_weights_ = keep; }
  bool fp8_weight_copies() const { return keep_fp8_weights_; }
  // A new training step: the weights may have changed (the optimiser ran, or parameters were
  // gathered), so quantised weight copies are dropped.
  virtual void begin_step() {}
  // Counted since construction.
  virtual Fp8GemmCounts fp8_gemm_counts() const { return {}; }
  // The device backend's kernel choices, counted since construction; none on a host backend.
  virtual std::optional<KernelCalls> kernel_calls() const { return std::nullopt; }

  // Timing marks, in stream order and without synchronising: mark() records the point the
  // backend's work has reached (host backends: now; cuda: an event on its stream) and returns its
  // index; after synchronize(), mark_times_s() gives every mark since clear_marks() in seconds
  // since the first of them.
  virtual int mark();
  virtual std::vector<double> mark_times_s();
  virtual void clear_marks() { host_marks_.clear(); }

  // RMSNorm over each row: y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) (saved, rows x 1).
  void rmsnorm_forward(Mat x, Mat weight, float eps, Mat y, Mat rstd);
  // dx = d/dx (overwritten); dweight accumulates.
  void rmsnorm_backward(Mat dy, Mat x, Mat weight, Mat rstd, Mat dx, Mat dweight);

  // Rotary embedding in place on x (rows = batch * seq_len tokens, position = row % seq_len):
  // for each of `heads` heads at column head * head_stride + offset, rotate `dim` elements
  // (pairs (i, i + dim/2), the "rotate half" layout). backward applies the inverse rotation.
  void rope_forward(Mat x, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
                    std::int64_t offset, std::int64_t dim, float theta);
  void rope_backward(Mat dx, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
                     std::int64_t offset, std::int64_t dim, float theta);

  // SwiGLU: gate_up is rows x 2f ([gate | up]); out = silu(gate) * up (rows x f).
  void swiglu_forward(Mat gate_up, Mat out);
  void swiglu_backward(Mat gate_up, Mat dout, Mat dgate_up);

  // Softmax attention per sequence and head over operands by head (attention_operands.hpp):
  // out (rows x heads*v_dim), stats (rows x heads, log-sum-exp, saved for backward). The
  // gradients `grad` have the inputs' layout and are overwritten; a shared operand's (head stride
  // 0) is the sum over the heads. The Mat overloads are plain attention (AttentionOperands::dense).
  void attention_forward(const AttentionShape& s, const AttentionOperands& in, Mat out, Mat stats);
  void attention_backward(const AttentionShape& s, const AttentionOperands& in, Mat out, Mat dout,
                          Mat stats, const AttentionOperands& grad);
  void attention_forward(const AttentionShape& s, Mat q, Mat k, Mat v, Mat out, Mat stats);
  void attention_backward(const AttentionShape& s, Mat q, Mat k, Mat v, Mat out, Mat dout,
                          Mat stats, Mat dq, Mat dk, Mat dv);

  // Router: from logits (tokens x experts) and the selection bias (1 x experts, FP32, or empty),
  // the sigmoid scores (saved, FP32), the chosen experts (tokens x top_k, i32) and their combine
  // weights (tokens x top_k, FP32). first_token is the global index of row 0 (balanced and zipf
  // routing are functions of it). See harness/math/route.hpp.
  void router_forward(const RouterParams& p, Mat logits, Mat bias, std::int64_t first_token,
                      Mat scores, Mat indices, Mat weights);
  // dlogits (overwritten, FP32) from the combine weights' gradient.
  void router_backward(const RouterParams& p, Mat scores, Mat indices, Mat dweights, Mat dlogits);

  // Row movement for the permutation of tokens by expert. index is i32 (n x 1); an index outside
  // its source or destination is a RuntimeError (cuda: at the next synchronisation).
  // gather: dst[i] = src[index[i]].
  void gather_rows(Mat src, Mat index, Mat dst);
  // scatter_add: dst[index[i]] += (scale ? scale[i] : 1) * src[i]. scale is n x 1 or empty.
  void scatter_add_rows(Mat src, Mat index, Mat scale, Mat dst);
  // dst[i] = scale[i] * src[index[i]] (the weighted gather of the combine's backward).
  void gather_rows_scaled(Mat src, Mat index, Mat scale, Mat dst);
  // out[i] = dot(a[index[i]], b[i]) (the gradient of a combine weight).
  void gathered_row_dot(Mat a, Mat index, Mat b, Mat out);

  // Cross-entropy of each row of logits (rows x vocab) against its label (rows x 1, i32, in
  // [0, vocab)), fused with its backward as Megatron-Core's fused cross-entropy is: loss
  // (rows x 1, FP32) gets -log softmax(row)[label], and logits is overwritten with
  // grad_scale * (softmax(row) - onehot(label)), the gradient of grad_scale * sum(loss). A label
  // outside the vocabulary is a RuntimeError (cuda: at the next synchronisation).
  void cross_entropy(Mat logits, Mat labels, float grad_scale, Mat loss);

  // AdamW on a flat parameter range; m and v are the optimiser's moments, FP32 or the storage
  // type (--optimizer-state-dtype bf16: read and written rounded, the arithmetic in FP32). master,
  // when not empty, is the FP32 master copy of a lower-precision param (as mixed-precision trainers
  // keep one): the update reads and writes master, and param receives its value rounded to storage.
  // Empty: param itself is updated.
  void adamw(const AdamWStep& s, Mat param, Mat grad, Mat m, Mat v, Mat master);

 protected:
  // The backends' operations, called with checked arguments.
  virtual Tensor do_alloc(std::int64_t rows, std::int64_t cols, DType dtype) = 0;
  virtual void do_upload(const float* host, const Mat& dst) = 0;
  virtual void do_upload_i32(const std::int32_t* host, const Mat& dst) = 0;
  virtual void do_download(const Mat& src, float* host) = 0;
  virtual void do_download_i32(const Mat& src, std::int32_t* host) = 0;
  virtual void do_zero(const Mat& x) = 0;
  virtual void do_copy(const Mat& src, const Mat& dst) = 0;
  virtual void do_axpby(float alpha, const Mat& x, float beta, const Mat& y) = 0;
  virtual void do_fill_random(const Mat& x, std::uint64_t seed, std::uint64_t stream,
                              float scale) = 0;
  virtual void do_fill(const Mat& x, float value) = 0;
  virtual void do_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                       float beta, const Mat& c) = 0;
  // The default: one do_gemm per problem, in order.
  virtual void do_grouped_gemm(bool trans_a, bool trans_b, float alpha,
                               std::span<const GemmProblem> p, float beta);
  // One linear GEMM with E4M3 inputs (see LinearPrecision), m, n and k all > 0; only called once
  // set_linear_precision(fp8) has succeeded, which a backend without it refuses.
  virtual void do_fp8_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                           float beta, const Mat& c);
  // The FP8 copy of x as the A operand of the weight gradient into wgrad (x and wgrad non-empty,
  // fp8 set): fills out.data (and out.descale) and returns true, or returns false where that GEMM
  // would not run in FP8 (the default).
  virtual bool do_save_fp8_input(const Mat& x, const Mat& wgrad, Fp8Input& out);
  // c = alpha x^T dy + beta c from the copy do_save_fp8_input made.
  virtual void do_fp8_wgrad(float alpha, const Fp8Input& x, const Mat& dy, float beta,
                            const Mat& c);
  virtual void do_rmsnorm_forward(const Mat& x, const Mat& weight, float eps, const Mat& y,
                                  const Mat& rstd) = 0;
  virtual void do_rmsnorm_backward(const Mat& dy, const Mat& x, const Mat& weight, const Mat& rstd,
                                   const Mat& dx, const Mat& dweight) = 0;
  // Both directions of rope: the inverse rotation when `inverse`.
  virtual void do_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads,
                       std::int64_t head_stride, std::int64_t offset, std::int64_t dim, float theta,
                       bool inverse) = 0;
  virtual void do_swiglu_forward(const Mat& gate_up, const Mat& out) = 0;
  virtual void do_swiglu_backward(const Mat& gate_up, const Mat& dout, const Mat& dgate_up) = 0;
  virtual void do_attention_forward(const AttentionShape& s, const AttentionOperands& in,
                                    const Mat& out, const Mat& stats) = 0;
  virtual void do_attention_backward(const AttentionShape& s, const AttentionOperands& in,
                                     const Mat& out, const Mat& dout, const Mat& stats,
                                     const AttentionOperands& grad) = 0;
  virtual void do_router_forward(const RouterParams& p, const Mat& logits, const Mat& bias,
                                 std::int64_t first_token, const Mat& scores, const Mat& indices,
                                 const Mat& weights) = 0;
  virtual void do_router_backward(const RouterParams& p, const Mat& scores, const Mat& indices,
                                  const Mat& dweights, const Mat& dlogits) = 0;
  virtual void do_gather_rows(const Mat& src, const Mat& index, const Mat& dst) = 0;
  virtual void do_scatter_add_rows(const Mat& src, const Mat& index, const Mat& scale,
                                   const Mat& dst) = 0;
  virtual void do_gather_rows_scaled(const Mat& src, const Mat& index, const Mat& scale,
                                     const Mat& dst) = 0;
  virtual void do_gathered_row_dot(const Mat& a, const Mat& index, const Mat& b,
                                   const Mat& out) = 0;
  virtual void do_cross_entropy(const Mat& logits, const Mat& labels, float grad_scale,
                                const Mat& loss) = 0;
  virtual void do_adamw(const AdamWStep& s, const Mat& param, const Mat& grad, const Mat& m,
                        const Mat& v, const Mat& master) = 0;

  LinearPrecision linear_precision_ = LinearPrecision::standard;
  Fp8Recipe fp8_recipe_ = Fp8Recipe::tensor;
  GroupedGemmImpl grouped_impl_ = GroupedGemmImpl::loop;
  AttentionImpl attention_impl_ = AttentionImpl::automatic;
  bool keep_fp8_weights_ = true;

 private:
  // The shared checks: a valid view; float (FP32 or the storage type); a given dtype and shape.
  void check_float(const Mat& m, const char* what) const;
  GemmShape check_gemm(bool trans_a, bool trans_b, const Mat& a, const Mat& b, const Mat& c) const;
  // fp8 where it was asked for and there is something to multiply; else the standard GEMM.
  void linear(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
              const Mat& c, const GemmShape& shape);
  void check_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
                  std::int64_t offset, std::int64_t dim) const;
  // A by-head operand: float, `rows` rows, heads at least its width apart (or 0 apart where
  // may_share), the last head inside the matrix.
  void check_head_cols(const HeadCols& x, std::int64_t heads, std::int64_t rows, bool may_share,
                       const char* what) const;
  void check_attention(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                       const Mat& stats) const;

  std::vector<std::chrono::steady_clock::time_point> host_marks_;
  // Shared with every tensor's deleter, which may outlive the backend object.
  std::shared_ptr<AllocationStats> allocations_ = std::make_shared<AllocationStats>();
};

}  // namespace moebench
