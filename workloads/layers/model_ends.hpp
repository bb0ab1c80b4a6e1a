// The model's ends (--head on): the embedding of token ids on the first stage, and on the last the
// final norm, the output head, the cross-entropy loss and DeepSeek-V3's MTP layers.
//
// Token ids come as one i32 tensor of tokens x (mtp + 2) per micro-batch: column j holds the id of
// the token j positions on (token_ids(), workloads/step), so column 0 is the input, column 1 the
// main head's label, and MTP depth k embeds column k + 1 and predicts column k + 2.
//
// The head, in Megatron-Core's order: n = final_norm(h); loss_0 = CE(n W_out, labels). MTP depth k
// (k = 0, 1, ...): x = [enorm(embed(next ids)); hnorm(prev)] W_eh, prev = n for k = 0, then
// y = transformer layer(x), loss_(k+1) = CE(mtp_norm(y) W_out, labels of depth k), prev = y.
// The embedding and W_out are shared. Each loss is the mean over the micro-batch's tokens, the MTP
// ones scaled by kMtpLossScale / mtp, as Megatron-Core's mtp_loss_scaling_factor does.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "workloads/layers/transformer_layer.hpp"

namespace moebench {

// Megatron-Core's default mtp_loss_scaling_factor (DeepSeek-V3 used 0.3, then 0.1).
constexpr float kMtpLossScale = 0.1f;

// The first stage's embedding: out = the embedding rows of ids (tokens x 1, i32); its gradient
// accumulates dout into those rows.
void embedding_forward(LayerContext& ctx, Mat ids, Mat out);
void embedding_backward(LayerContext& ctx, Mat ids, Mat dout);

class ModelHead {
 public:
  explicit ModelHead(const Workload& w);

  // h: the last decoder layer's output (tokens x hidden), kept until backward; ids: the
  // micro-batch's token ids; losses (tokens x (mtp + 1), FP32): each token's loss per head.
  // grad_scale: d (step loss) / d (a token's main loss), 1 / the micro-batch's tokens.
  void forward(LayerContext& ctx, Mat h, Mat ids, float grad_scale, Mat losses);
  // dh: d loss / d h (overwritten). done(layer) is called as each layer index's gradients
  // become final (output head, MTP layers, final norm), for the gradient buckets.
  void backward(LayerContext& ctx, Mat ids, Mat dh, const std::function<void(int)>& done);

 private:
  struct Depth {
    explicit Depth(int layer) : layer(layer), transformer(layer) {}
    int layer;
    TransformerLayer transformer;
    Tensor e, en, en_rstd, prev_n, prev_rstd, x, y, m, m_rstd, logits;
  };

  Mat h_;  // the decoder's output, owned by the caller
  Tensor n_, rstd_, logits_;
  std::vector<std::unique_ptr<Depth>> depths_;
};

}  // namespace moebench
