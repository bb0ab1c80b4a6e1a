// One pre-norm transformer layer: x1 = x + MLA(norm(x)); out = x1 + F(norm(x1)), F the dense
// SwiGLU MLP or the MoE block. With --recompute layernorm, norm(x1) is recomputed in the backward.
#pragma once

#include "workloads/layers/attention.hpp"
#include "workloads/layers/mlp.hpp"
#include "workloads/layers/moe.hpp"

namespace moebench {

class TransformerLayer {
 public:
  explicit TransformerLayer(int index) : index_(index) {}
  void forward(LayerContext& ctx, Mat x, Mat out);
  void backward(LayerContext& ctx, Mat dout, Mat dx);

 private:
  Phase mlp_phase(const LayerContext& ctx) const;
  // norm(x1) for this pass: kept, or (recomputed) scratch.
  Mat xn2(LayerContext& ctx);

  int index_;
  MlaAttention attention_;
  SwigluMlp dense_;
  MoeBlock moe_;
  Tensor x1_, xn2_, rstd2_;
};

}  // namespace moebench
