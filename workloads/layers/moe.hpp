// The MoE block of a layer: router, group-limited top-k, permutation by expert, dispatch
// all-to-all to the experts' ranks (each row with its combine weight), the local experts' SwiGLU
// MLPs as grouped GEMMs, combine all-to-all back, the sum, plus the shared experts on the local
// tokens. Backward runs the reverse all-to-alls and computes every dgrad and wgrad.
//
// As Megatron-Core's grouped experts do (weighted_bias_swiglu), each row's combine weight scales
// its activation before the down projection, so the combine is a plain sum and nothing of the
// experts' output is kept: the weight's gradient is <d(weighted act), act> on the expert's rank,
// with act recomputed from the kept gate/up (element-wise, as Megatron's fused backward does),
// and travels back with the input gradients.
#pragma once

#include <vector>

#include "workloads/layers/layer_context.hpp"
#include "workloads/layers/mlp.hpp"
#include "workloads/routing/permutation.hpp"

namespace moebench {

RouterParams router_params(const RunConfig& c);

class MoeBlock {
 public:
  // y = moe(xn) (overwritten), xn = the normed layer input (tokens x hidden).
  void forward(LayerContext& ctx, int layer, Mat xn, Mat y);
  // dxn (overwritten) from dy; xn: the forward's input, as the caller keeps (or recomputed) it.
  void backward(LayerContext& ctx, int layer, Mat xn, Mat dy, Mat dxn);

 private:
  void experts_forward(LayerContext& ctx, int layer, Mat xe);
  // dxe and dwe (each row's combine-weight gradient, FP32) overwritten.
  void experts_backward(LayerContext& ctx, int layer, Mat dye, Mat dxe, Mat dwe);
  // act = weight * swiglu(gate_up) row by row, act_u = swiglu(gate_up) (overwritten).
  void weighted_act(LayerContext& ctx, Mat gate_up, Mat act_u, Mat act);
  // Starts an all-to-all of the expert group on the critical lane (after the group's barrier with
  // --comm-barrier on); the caller waits for it with ctx.wait().
  CommRequest start_alltoall(LayerContext& ctx, Phase phase, Mat send,
                             const std::vector<std::int64_t>& send_rows,
                             const std::vector<std::int64_t>& send_offsets, Mat recv,
                             const std::vector<std::int64_t>& recv_rows,
                             const std::vector<std::int64_t>& recv_offsets);
  void shared_forward(LayerContext& ctx, int layer, Mat xn, Mat out);
  // dxn = the shared experts' input gradient (overwritten).
  void shared_backward(LayerContext& ctx, int layer, Mat xn, Mat dy, Mat dxn);
  // dxn += (or = without accumulate) the router's input gradient; the router's weight gradient.
  void router_backward(LayerContext& ctx, int layer, Mat xn, Mat dweights, Mat dxn,
                       bool accumulate);
  // The experts' weighted activation (the down projection's input) for this pass: kept, or in
  // scratch (--recompute moe_act, or --fp8-saved-inputs, which keeps its FP8 copy instead).
  Mat expert_act(LayerContext& ctx, std::int64_t rows);

  DispatchPlan plan_;
  ExpertLayout layout_;
  std::int64_t sent_ = 0;  // rows this rank sends (tokens * top_k)
  // Kept for the backward; the forward's other intermediates and the backward's temporaries are
  // the rank's scratch.
  Tensor scores_, indices_;
  Tensor row_token_, row_slot_, expert_source_;
  Tensor xe_, gate_up_, act_;
  Tensor expert_weight_;  // each expert row's combine weight (FP32)
  // --fp8-saved-inputs: each local expert's rows and weighted activation as its weight
  // gradients' FP8 copies (xe_ and act_ then stay empty: the forward uses scratch).
  std::vector<Fp8Input> xe_saved_, act_saved_;
  SwigluMlp shared_;
};

}  // namespace moebench
