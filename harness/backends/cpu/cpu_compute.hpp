// The `cpu` compute backend: FP32 host memory, GEMMs through CBLAS, everything else plain loops
// over the shared element-wise and routing functions. It is the reference the cuda backend is
// checked against and a benchmark target of its own, so GEMMs go straight to the BLAS on the
// callers' views without copies.
#pragma once

#include <string>
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

  std::string name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::f32; }
  std::string gemm_path() const override;
  std::string grouped_gemm_path() const override;
  std::string attention_path() const override;

  Tensor alloc(std::int64_t rows, std::int64_t cols, DType dtype) override;
  using Compute::alloc;
  void upload(const float* host, Mat dst) override;
  void upload_i32(const std::int32_t* host, Mat dst) override;
  void download(Mat src, float* host) override;
  void download_i32(Mat src, std::int32_t* host) override;
  void synchronize() override {}
  // MemAvailable of the whole node (from /proc/meminfo); callers running several ranks on a node
  // divide by the ranks per node.
  std::int64_t memory_available_bytes() const override;

  void zero(Mat x) override;
  void copy(Mat src, Mat dst) override;
  // beta == 0 does not read y (the BLAS convention), so y may be uninitialised.
  void axpby(float alpha, Mat x, float beta, Mat y) override;
  void fill_random(Mat x, std::uint64_t seed, std::uint64_t stream, float scale) override;
  void fill(Mat x, float value) override;

  void gemm(bool trans_a, bool trans_b, float alpha, Mat a, Mat b, float beta, Mat c) override;
  void grouped_gemm(bool trans_a, bool trans_b, float alpha, std::span<const GemmProblem> p,
                    float beta) override;

  // --precision fp8, emulated: each operand is quantised to E4M3 values (held in FP32) with its
  // own per-tensor scale (workloads/ops/fp8.hpp), multiplied in FP32 by the BLAS and descaled.
  // The numerics of an FP8 GEMM with FP32 accumulation, not its speed.
  void set_linear_precision(LinearPrecision p) override { linear_precision_ = p; }
  Fp8GemmCounts fp8_gemm_counts() const override { return {fp8_gemms_, 0}; }

  void rmsnorm_forward(Mat x, Mat weight, float eps, Mat y, Mat rstd) override;
  void rmsnorm_backward(Mat dy, Mat x, Mat weight, Mat rstd, Mat dx, Mat dweight) override;
  void rope_forward(Mat x, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
                    std::int64_t offset, std::int64_t dim, float theta) override;
  void rope_backward(Mat dx, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
                     std::int64_t offset, std::int64_t dim, float theta) override;
  void swiglu_forward(Mat gate_up, Mat out) override;
  void swiglu_backward(Mat gate_up, Mat dout, Mat dgate_up) override;

  void attention_forward(const AttentionShape& s, Mat q, Mat k, Mat v, Mat out, Mat stats) override;
  void attention_backward(const AttentionShape& s, Mat q, Mat k, Mat v, Mat out, Mat dout,
                          Mat stats, Mat dq, Mat dk, Mat dv) override;

  void router_forward(const RouterParams& p, Mat logits, Mat bias, std::int64_t first_token,
                      Mat scores, Mat indices, Mat weights) override;
  void router_backward(const RouterParams& p, Mat scores, Mat indices, Mat dweights,
                       Mat dlogits) override;

  void gather_rows(Mat src, Mat index, Mat dst) override;
  void scatter_add_rows(Mat src, Mat index, Mat scale, Mat dst) override;
  void gather_rows_scaled(Mat src, Mat index, Mat scale, Mat dst) override;
  void gathered_row_dot(Mat a, Mat index, Mat b, Mat out) override;

  void adamw(const AdamWStep& s, Mat param, Mat grad, Mat m, Mat v, Mat master) override;

 private:
  void rope_apply(Mat x, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
                  std::int64_t offset, std::int64_t dim, float theta, bool inverse);
  float* scratch(std::size_t floats);
  // One FP8-emulated GEMM: E4M3 copies of both inputs, FP32 CBLAS, both descales.
  void fp8_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
                const Mat& c) override;

  // Attention's seq x seq score buffers, kept between calls so a step does not fault in fresh
  // pages for every layer.
  std::vector<float> scratch_;
  // The quantised copies of the FP8 GEMM's operands, kept between calls for the same reason.
  std::vector<float> fp8_a_, fp8_b_;
  std::int64_t fp8_gemms_ = 0;
};

}  // namespace moebench
