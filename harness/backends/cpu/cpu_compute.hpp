// The `cpu` compute backend: FP32 host memory, GEMMs through CBLAS, everything else plain loops
// over the shared element-wise and routing functions. It is the reference the cuda backend is
// checked against and a benchmark target of its own, so GEMMs go straight to the BLAS on the
// callers' views without copies.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "harness/compute/compute.hpp"

namespace moebench {

// The CBLAS the backend links, for the run record ("OpenBLAS 0.3.21 ..." or "CBLAS").
std::string blas_library_name();

class CpuCompute : public Compute {
 public:
  // blas_threads: OpenBLAS threads for this process (ranks share a node's cores); <= 0 leaves
  // the library's own choice.
  explicit CpuCompute(int blas_threads);

  ComputeBackend kind() const override { return ComputeBackend::cpu; }
  DType activation_dtype() const override { return DType::f32; }
  std::string gemm_path() const override;
  std::string grouped_gemm_path() const override;
  std::string attention_path() const override;
  void synchronize() override {}
  // MemAvailable of the whole node (from /proc/meminfo); callers running several ranks on a node
  // divide by the ranks per node.
  std::int64_t memory_available_bytes() const override;

  // --precision fp8, emulated: each operand is quantised to E4M3 values (held in FP32) with the
  // recipe's scales (per tensor, or per tile: harness/math/fp8.hpp), multiplied in FP32 by the
  // BLAS and descaled. The numerics of an FP8 GEMM with FP32 accumulation, not its speed. All
  // three recipes run here.
  void set_linear_precision(LinearPrecision p) override { linear_precision_ = p; }
  Fp8GemmCounts fp8_gemm_counts() const override {
    return {fp8_gemms_, 0, fp8_weight_quantisations_};
  }
  void begin_step() override { fp8_weights_.clear(); }

 protected:
  Tensor do_alloc(std::int64_t rows, std::int64_t cols, DType dtype) override;
  void do_upload(const float* host, const Mat& dst) override;
  void do_upload_i32(const std::int32_t* host, const Mat& dst) override;
  void do_download(const Mat& src, float* host) override;
  void do_download_i32(const Mat& src, std::int32_t* host) override;
  void do_zero(const Mat& x) override;
  void do_copy(const Mat& src, const Mat& dst) override;
  void do_axpby(float alpha, const Mat& x, float beta, const Mat& y) override;
  void do_fill_random(const Mat& x, std::uint64_t seed, std::uint64_t stream, float scale) override;
  void do_fill(const Mat& x, float value) override;
  void do_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
               const Mat& c) override;
  // One FP8-emulated GEMM: E4M3 copies of both inputs, FP32 CBLAS, both descales.
  void do_fp8_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
                   const Mat& c) override;
  // --fp8-saved-inputs: the E4M3 bytes and the tiles' descales; the weight gradient decodes them
  // to the values do_fp8_gemm would have multiplied.
  bool do_save_fp8_input(const Mat& x, const Mat& wgrad, Fp8Input& out) override;
  void do_fp8_wgrad(float alpha, const Fp8Input& x, const Mat& dy, float beta,
                    const Mat& c) override;
  void do_rmsnorm_forward(const Mat& x, const Mat& weight, float eps, const Mat& y,
                          const Mat& rstd) override;
  void do_rmsnorm_backward(const Mat& dy, const Mat& x, const Mat& weight, const Mat& rstd,
                           const Mat& dx, const Mat& dweight) override;
  void do_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
               std::int64_t offset, std::int64_t dim, float theta, bool inverse) override;
  void do_swiglu_forward(const Mat& gate_up, const Mat& out) override;
  void do_swiglu_backward(const Mat& gate_up, const Mat& dout, const Mat& dgate_up) override;
  void do_attention_forward(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                            const Mat& stats) override;
  void do_attention_backward(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                             const Mat& dout, const Mat& stats,
                             const AttentionOperands& grad) override;
  void do_router_forward(const RouterParams& p, const Mat& logits, const Mat& bias,
                         std::int64_t first_token, const Mat& scores, const Mat& indices,
                         const Mat& weights) override;
  void do_router_backward(const RouterParams& p, const Mat& scores, const Mat& indices,
                          const Mat& dweights, const Mat& dlogits) override;
  void do_gather_rows(const Mat& src, const Mat& index, const Mat& dst) override;
  void do_scatter_add_rows(const Mat& src, const Mat& index, const Mat& scale,
                           const Mat& dst) override;
  void do_gather_rows_scaled(const Mat& src, const Mat& index, const Mat& scale,
                             const Mat& dst) override;
  void do_gathered_row_dot(const Mat& a, const Mat& index, const Mat& b, const Mat& out) override;
  void do_cross_entropy(const Mat& logits, const Mat& labels, float grad_scale,
                        const Mat& loss) override;
  void do_adamw(const AdamWStep& s, const Mat& param, const Mat& grad, const Mat& m, const Mat& v,
                const Mat& master) override;

 private:
  float* scratch(std::size_t floats);

  // Attention's seq x seq score buffers, kept between calls so a step does not fault in fresh
  // pages for every layer.
  std::vector<float> scratch_;
  const float* fp8_operand(const Mat& x, bool trans, Fp8Operand which, bool trans_a,
                           std::vector<float>& scratch, float& descale);

  // The quantised copies of the FP8 GEMM's activation operands, kept between calls for the same
  // reason.
  std::vector<float> fp8_a_, fp8_b_;
  // The weights' copies, one per weight view and transpose, until begin_step().
  struct WeightCopy {
    std::vector<float> values;
    float descale = 1.0f;
  };
  std::unordered_map<Fp8WeightView, WeightCopy, Fp8WeightViewHash> fp8_weights_;
  std::int64_t fp8_gemms_ = 0;
  std::int64_t fp8_weight_quantisations_ = 0;
};

}  // namespace moebench
