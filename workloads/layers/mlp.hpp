// SwiGLU MLP: y = (silu(x W_g) * x W_u) W_d, with W_g and W_u stored side by side as one
// (in, 2f) gate_up weight. Used by the dense layers and the shared experts.
#pragma once

#include "workloads/layers/layer_context.hpp"

namespace moebench {

class SwigluMlp {
 public:
  // y = mlp(xn) (overwritten). Accounts its time to `phase`. With `recompute` (--recompute mlp or
  // shared_experts) gate/up and the activation are not kept: they go to the rank's scratch and
  // the backward recomputes them from xn.
  void forward(LayerContext& ctx, Phase phase, bool recompute, Mat w_gate_up, Mat w_down, Mat xn,
               Mat y);
  // dxn (= or +=, per accumulate) from dy; weight gradients accumulate (+=) over micro-batches.
  // xn: the forward's input, as the caller keeps (or recomputed) it.
  void backward(LayerContext& ctx, Phase phase, bool recompute, Mat w_gate_up, Mat w_down, Mat xn,
                Mat dy, Mat dw_gate_up, Mat dw_down, Mat dxn, bool accumulate);

 private:
  // gate/up and the activation for this pass: kept in the layer, or in scratch.
  std::pair<Mat, Mat> saved(LayerContext& ctx, Phase phase, bool recompute, std::int64_t n,
                            std::int64_t f);
  Tensor gate_up_, act_;
};

}  // namespace moebench
