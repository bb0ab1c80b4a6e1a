// Multi-head latent attention (DeepSeek-V2/V3), pre-norm, with its residual:
//   x1 = x + W_o * attn(q(x), k(x), v(x)).
// q: through the q_lora bottleneck (down, RMSNorm, up) or directly when q_lora_rank is null;
// k, v: from the kv_lora bottleneck plus a shared rope key of qk_rope_head_dim; rope on the rope
// parts of q and k. Keeps what backward needs, except what --recompute names (layernorm: the
// normed input; mla_up_proj: q and the kv up-projection; core_attn: the output and the softmax
// statistics), which live in the rank's scratch and are recomputed at the start of backward.
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
  // Where the forward's tensors are for this pass: kept in the layer, or (recomputed) scratch.
  struct Saved {
    Mat xn, q, kv, o, stats;
  };
  Saved saved(LayerContext& ctx);
  // The up-projections and rope: q from the q latent (or xn), kv from the normed kv latent.
  void up_projections(LayerContext& ctx, int layer, Mat xn, Mat q, Mat kv);

  Mat x_;  // the layer input (owned by the caller, alive until backward)
  Tensor xn_, rstd_, cq_, cqn_, rstd_q_, q_, ckv_, ckvn_, rstd_kv_, krope_, kv_, o_, stats_;
};

}  // namespace moebench
