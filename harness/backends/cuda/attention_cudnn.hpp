// Core attention through cuDNN's fused flash attention (SDPA), forward and backward, causal,
// with MLA's head dims (192 for q and k, 128 for v), built with cudnn-frontend's graph API: one
// graph per shape and layout, kept for the run. Host code (no CUDA header here); the .cpp is
// compiled only where the build found cudnn-frontend's headers and cuDNN (MOEBENCH_HAVE_CUDNN).
//
// Layout: q, k, v, out and their gradients are the step's row-major views, rows = batch x seq,
// head h at columns [h d, (h + 1) d): cuDNN's [batch, heads, seq, d] with strides (seq x ld, d,
// ld, 1), read in place. stats (rows x heads, FP32) is cuDNN's [batch, heads, seq, 1] log-sum-exp
// of the scaled scores (natural log), written by the forward and read by the backward; it is
// not interchangeable with the batched-GEMM path's, so one shape's forward and backward always
// run the same implementation.
#pragma once

#include <memory>
#include <string>

#include "harness/compute/compute.hpp"

namespace moebench::cuda {

class CudnnAttention {
 public:
  // nullptr where the binary has no cuDNN attention (see unavailable()).
  static std::unique_ptr<CudnnAttention> create(void* stream);
  // Why create() returns nullptr, "" where it does not.
  static std::string unavailable();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether cuDNN has a forward and a backward plan for this shape and these views (the
  // gradients with the inputs' leading dimensions); the answer, and the plans, are kept.
  bool supports(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                const Mat& stats);
  // Only after supports() said yes for the same shape and views.
  void forward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
               const Mat& stats);
  void backward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                const Mat& dout, const Mat& stats, const Mat& dq, const Mat& dk, const Mat& dv);
  // "cuDNN 9.19.0, cudnn-frontend 1.32.0".
  std::string versions() const;
  // Graphs cuDNN refused (check_support or build failed), for the report, and why the last was.
  int refused() const;
  std::string last_refusal() const;

  struct Impl;

 private:
  explicit CudnnAttention(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace moebench::cuda
