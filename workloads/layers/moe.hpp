// The MoE block of a layer: router, group-limited top-k, permutation by expert, dispatch
// all-to-all to the experts' ranks, the local experts' SwiGLU MLPs as grouped GEMMs, combine
// all-to-all back, the weighted sum, plus the shared experts on the local tokens.
// Backward runs the reverse all-to-alls and computes every dgrad and wgrad.
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
  void experts_backward(LayerContext& ctx, int layer, Mat dye, Mat dxe);
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
  // The experts' activation for this pass: kept, or (--recompute moe_act) in scratch.
  Mat expert_act(LayerContext& ctx, std::int64_t rows);

  DispatchPlan plan_;
  ExpertLayout layout_;
  std::int64_t sent_ = 0;  // rows this rank sends (tokens * top_k)
  // Kept for the backward; the forward's other intermediates and the backward's temporaries are
  // the rank's scratch.
  Tensor scores_, indices_;
  Tensor row_token_, row_slot_, expert_source_, row_weight_;
  Tensor xe_, gate_up_, act_, ysend_;
  SwigluMlp shared_;
};

}  // namespace moebench
