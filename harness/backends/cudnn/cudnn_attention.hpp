// Core attention through cuDNN's fused flash attention (SDPA), forward and backward, causal,
// with MLA's head dims (192 for q and k, 128 for v), built with cudnn-frontend's graph API: one
// graph per shape and layout, kept for the run. Host code, no CUDA header here: the cuda backend
// calls it (attention_packed.cuh); tests/cudnn checks its graphs against the frontend's own
// validation on a machine without a GPU. cudnn_attention.cpp is compiled where the build found
// cuDNN and cudnn-frontend's headers (third_party/cudnn.cmake), cudnn_absent.cpp otherwise.
//
// Layout: q, k, v, out and their gradients are the step's row-major views, rows = batch x seq,
// head h at columns [h d, (h + 1) d): cuDNN's [batch, heads, seq, d] with strides (seq x ld, d,
// ld, 1), read in place. The statistics (the log-sum-exp of the scaled scores, natural log, FP32;
// written by the forward, read by the backward) are packed [batch, heads, seq, 1], strides
// (heads x seq, seq, 1, 1): the only non-ragged layout cudnn-frontend lets sdpa_backward read
// below cuDNN 9.26 (and the forward write below 9.12). The caller keeps them there, a
// `batch x heads` by `seq` FP32 view (stats_view), and moves them to and from its own layout.
// They are not interchangeable with the batched-GEMM path's, so one shape's forward and backward
// always run the same implementation.
#pragma once

#include <memory>
#include <string>

#include "harness/compute/attention_operands.hpp"

namespace moebench {

class CudnnAttention {
 public:
  // nullptr where cuDNN cannot run here, and why: the binary has none (cudnn_absent.cpp), or
  // cuDNN's handle could not be created (no usable device, a library that does not load).
  static std::unique_ptr<CudnnAttention> create(void* stream, std::string& why);
  // cudnn-frontend's own checks (validate()) of the forward and the backward graph for these
  // views on a device of compute capability `sm` (90: Hopper, 100: Blackwell), against the cuDNN
  // library this process loaded, on the host: no device, no handle, no data read. "" where both
  // pass, else the frontend's message.
  static std::string validate(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v,
                              const Mat& out, int sm);
  // The statistics' packed [batch, heads, seq, 1] view at data.
  static Mat stats_view(void* data, const AttentionShape& s) {
    return Mat{data, s.batch * s.heads, s.seq_len, s.seq_len, DType::f32};
  }
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether cuDNN has a forward and a backward plan for this shape and these views (the
  // gradients with the inputs' leading dimensions, stats a stats_view); the answer, and the
  // plans, are kept.
  bool supports(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                const Mat& stats);
  // Only after supports() said yes for the same shape and views.
  void forward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
               const Mat& stats);
  void backward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                const Mat& dout, const Mat& stats, const Mat& dq, const Mat& dk, const Mat& dv);
  // "cuDNN 9.19.0, cudnn-frontend 1.32.0": the library this process loaded, the headers it was
  // built with ("" without cuDNN).
  static std::string versions();
  // Graphs cuDNN refused (check_support or build failed), for the report, and why the last was.
  int refused() const;
  std::string last_refusal() const;

  struct Impl;

 private:
  explicit CudnnAttention(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace moebench
