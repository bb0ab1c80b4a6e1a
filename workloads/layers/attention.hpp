// Multi-head latent attention (DeepSeek-V2/V3), pre-norm, with its residual:
//   x1 = x + W_o * attn(q(x), k(x), v(x)).
// q: through the q_lora bottleneck (down, RMSNorm, up) or directly when q_lora_rank is null;
// k, v: from the kv_lora bottleneck plus a shared rope key of qk_rope_head_dim; rope on the rope
// parts of q and k. Keeps what backward needs.
#pragma once

#include "workloads/layers/layer_context.hpp"

namespace moebench {

class MlaAttention {
 public:
  // x1 = x + attention(x). x and x1 are tokens x hidden.
  void forward(LayerContext& ctx, int layer, Mat x, Mat x1);
  // dx (overwritten) from dx1 = d loss / d x1, including the residual path.
  void backward(LayerContext& ctx, int layer, Mat dx1, Mat dx);

 private:
  Mat x_;  // the layer input (owned by the caller, alive until backward)
  Tensor xn_, rstd_, cq_, cqn_, rstd_q_, q_, ckv_full_, ckv_, ckvn_, rstd_kv_, krope_, kv_, o_,
      stats_;
  // backward scratch
  Tensor do_, dq_, dkv_, dkrope_, dckvn_, dckv_, dckv_full_, dxn_, dcqn_, dcq_, dtmp_;
};

}  // namespace moebench
