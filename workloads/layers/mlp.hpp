// SwiGLU MLP: y = (silu(x W_g) * x W_u) W_d, with W_g and W_u stored side by side as one
// (in, 2f) gate_up weight. Used by the dense layers and the shared experts.
#pragma once

#include "workloads/layers/layer_context.hpp"

namespace moebench {

class SwigluMlp {
 public:
  // y = mlp(xn) (overwritten). Accounts its time to `phase`.
  void forward(LayerContext& ctx, Phase phase, Mat w_gate_up, Mat w_down, Mat xn, Mat y);
  // dxn (= or +=, per accumulate) from dy; weight gradients accumulate (+=) over micro-batches.
  void backward(LayerContext& ctx, Phase phase, Mat w_gate_up, Mat w_down, Mat dy, Mat dw_gate_up,
                Mat dw_down, Mat dxn, bool accumulate);

 private:
  Mat xn_;
  Tensor gate_up_, act_, dact_, dgate_up_;
};

}  // namespace moebench
