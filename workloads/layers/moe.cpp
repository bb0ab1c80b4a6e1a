#include "workloads/layers/moe.hpp"

#include "harness/core/clock.hpp"
#include "harness/math/route.hpp"
#include "harness/measure/stats.hpp"
#include "workloads/accounting/accounting.hpp"

namespace moebench {

namespace {
Mat upload_index(Compute& c, Tensor& t, const std::vector<std::int32_t>& host) {
  Mat m = ensure_rows(c, t, static_cast<std::int64_t>(host.size()), 1, DType::i32);
  if (!host.empty()) c.upload_i32(host.data(), m);
  return m;
}
}  // namespace

RouterParams router_params(const RunConfig& c) {
  const ModelConfig& m = c.model;
  RouterParams p;
  p.experts = static_cast<std::int32_t>(m.n_routed_experts);
  p.top_k = static_cast<std::int32_t>(m.num_experts_per_tok);
  p.groups = static_cast<std::int32_t>(m.n_group);
  p.topk_groups = static_cast<std::int32_t>(m.topk_group);
  p.scaling = static_cast<float>(m.routed_scaling_factor);
  p.scoring = m.scoring_func == "softmax" ? kScoreSoftmax : kScoreSigmoid;
  p.topk_method = m.topk_method == "greedy"                 ? kTopkGreedy
                  : m.topk_method == "group_limited_greedy" ? kTopkGroupLimitedGreedy
                                                            : kTopkNoauxTc;
  p.norm_topk = m.norm_topk_prob ? 1 : 0;
  if (p.topk_method == kTopkGreedy) {
    // No group limit: balanced routing spreads over all experts alike.
    p.groups = 1;
    p.topk_groups = 1;
  }
  switch (c.workload.routing.mode) {
    case RoutingMode::router:
      p.mode = kRouteRouter;
      break;
    case RoutingMode::balanced:
      p.mode = kRouteBalanced;
      break;
    case RoutingMode::zipf:
      p.mode = kRouteZipf;
      break;
    case RoutingMode::random:
      p.mode = kRouteRandom;
      break;
  }
  p.zipf_exponent = static_cast<float>(c.workload.routing.zipf_exponent);
  p.seed = c.seed;
  return p;
}

CommRequest MoeBlock::start_alltoall(LayerContext& ctx, Phase phase, Mat send,
                                     const std::vector<std::int64_t>& send_rows,
                                     const std::vector<std::int64_t>& send_offsets, Mat recv,
                                     const std::vector<std::int64_t>& recv_rows,
                                     const std::vector<std::int64_t>& recv_offsets) {
  ctx.wait_for_group(Group::expert);
  auto scope = ctx.timer.scope(phase);
  const CommRequest r =
      ctx.track(phase, ctx.comm.start_alltoallv(Group::expert, send, send_rows, send_offsets, recv,
                                                recv_rows, recv_offsets, CommLane::critical));
  const int ep = ctx.comm.info(Group::expert).size;
  ctx.add_bytes(phase, static_cast<double>(send.rows) * send.cols * dtype_size(send.dtype),
                bus_bandwidth_factor(CollectiveKind::alltoall, ep), ep);
  return r;
}

void MoeBlock::forward(LayerContext& ctx, int layer, Mat xn, Mat y) {
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const ModelConfig& m = ctx.config.model;
  const std::int64_t n = ctx.tokens, h = m.hidden_size, E = m.n_routed_experts;
  const std::int64_t k = m.num_experts_per_tok;
  RouterParams rp = router_params(ctx.config);
  rp.layer = static_cast<std::uint64_t>(layer);
  const bool shared = m.n_shared_experts > 0;
  sent_ = n * k;
  Mat weights = ctx.scratch.get("moe.weights", n, k, DType::f32);

  {
    auto scope = ctx.timer.scope(Phase::router);
    Mat logits = ctx.scratch.get("moe.logits", n, E, DType::f32);
    c.gemm(false, false, 1.0f, xn, p.param(layer, ParamKind::router), 0.0f, logits);
    c.router_forward(rp, logits, p.router_bias(layer), ctx.first_token,
                     ensure_rows(c, scores_, n, E, DType::f32),
                     ensure_rows(c, indices_, n, k, DType::i32), weights);
    ctx.add_flops(Phase::router, static_cast<double>(n) * router_flops_per_token(m));
    // The counts the all-to-all needs: the host synchronisation of the dispatch. Nothing is in
    // flight on the communicator here (pipeline exchanges complete before the passes they
    // precede); synchronising it first lets a device backend watch for a hung collective with its
    // timeout before the host blocks on the compute stream.
    ctx.comm.synchronize();
    std::vector<std::int32_t> idx(static_cast<std::size_t>(n * k));
    c.download_i32(indices_.view().row_slice(0, n), idx.data());
    plan_ = make_dispatch_plan(idx, n, static_cast<int>(k), static_cast<int>(E),
                               ctx.comm.info(Group::expert).size);
  }

  Mat send = ctx.scratch.get("moe.send", sent_, h);
  Mat row_weight = ctx.scratch.get("moe.row_weight", sent_, 1, DType::f32);
  {
    auto scope = ctx.timer.scope(Phase::permute);
    Mat row_token = upload_index(c, row_token_, plan_.row_token);
    Mat row_slot = upload_index(c, row_slot_, plan_.row_slot);
    c.gather_rows(xn, row_token, send);
    c.gather_rows(weights.reshaped(n * k, 1), row_slot, row_weight);
  }

  std::vector<std::int64_t> recv_expert_rows;
  ctx.wait_for_group(Group::expert);
  {
    // A blocking host exchange: its host time is the collective's own (busy) time too.
    auto scope = ctx.timer.scope(Phase::dispatch);
    const Clock::time_point start = Clock::now();
    recv_expert_rows = ctx.comm.alltoall_counts(Group::expert, plan_.send_expert_rows);
    ctx.sample.busy_s[static_cast<std::size_t>(Phase::dispatch)] += seconds_since(start);
  }
  layout_ = make_expert_layout(recv_expert_rows, ctx.comm.info(Group::expert).size,
                               ctx.params.local_experts());
  const std::int64_t r = layout_.total_rows;
  Mat recv = ctx.scratch.get("moe.recv", r, h);
  Mat recv_weight = ctx.scratch.get("moe.recv_weight", r, 1, DType::f32);
  Mat shared_out = shared ? ctx.scratch.get("moe.shared_out", n, h) : Mat{};
  // The rows and their combine weights (FP32, as Megatron-Core dispatches its probabilities).
  const CommRequest dispatch =
      start_alltoall(ctx, Phase::dispatch, send, plan_.send_rows, plan_.send_offsets, recv,
                     layout_.recv_rows, layout_.recv_offsets);
  const CommRequest dispatch_weights =
      start_alltoall(ctx, Phase::dispatch, row_weight, plan_.send_rows, plan_.send_offsets,
                     recv_weight, layout_.recv_rows, layout_.recv_offsets);
  // The shared experts need only the local tokens: they hide the dispatch.
  if (shared && ctx.overlap()) shared_forward(ctx, layer, xn, shared_out);
  ctx.wait(Phase::dispatch, dispatch);
  ctx.wait(Phase::dispatch, dispatch_weights);

  Mat xe =
      ctx.config.saves_fp8_inputs() ? ctx.scratch.get("moe.xe", r, h) : ensure_rows(c, xe_, r, h);
  {
    auto scope = ctx.timer.scope(Phase::permute);
    Mat source = upload_index(c, expert_source_, layout_.expert_row_source);
    c.gather_rows(recv, source, xe);
    c.gather_rows(recv_weight, source, ensure_rows(c, expert_weight_, r, 1, DType::f32));
  }
  experts_forward(ctx, layer, xe);
  Mat yr = ctx.scratch.get("moe.yr", r, h);
  {
    auto scope = ctx.timer.scope(Phase::permute);
    c.zero(yr);
    c.scatter_add_rows(ctx.scratch.get("moe.ye", r, h), expert_source_.view().row_slice(0, r),
                       Mat{}, yr);
  }
  // The experts' weighted outputs come back into the dispatch's send buffer (done with).
  ctx.wait(Phase::combine,
           start_alltoall(ctx, Phase::combine, yr, layout_.recv_rows, layout_.recv_offsets, send,
                          plan_.send_rows, plan_.send_offsets));

  {
    auto scope = ctx.timer.scope(Phase::permute);
    c.zero(y);
    c.scatter_add_rows(send, row_token_.view().row_slice(0, sent_), Mat{}, y);
  }

  if (shared) {
    if (!ctx.overlap()) shared_forward(ctx, layer, xn, shared_out);
    auto scope = ctx.timer.scope(Phase::shared_expert);
    c.axpby(1.0f, shared_out, 1.0f, y);
  }
}

void MoeBlock::shared_forward(LayerContext& ctx, int layer, Mat xn, Mat out) {
  ParamStore& p = ctx.params;
  shared_.forward(ctx, Phase::shared_expert, ctx.config.workload.recompute.shared_experts,
                  p.param(layer, ParamKind::shared_gate_up), p.param(layer, ParamKind::shared_down),
                  xn, out);
}

void MoeBlock::shared_backward(LayerContext& ctx, int layer, Mat xn, Mat dy, Mat dxn) {
  ParamStore& p = ctx.params;
  shared_.backward(
      ctx, Phase::shared_expert, ctx.config.workload.recompute.shared_experts,
      p.param(layer, ParamKind::shared_gate_up), p.param(layer, ParamKind::shared_down), xn, dy,
      p.grad(layer, ParamKind::shared_gate_up), p.grad(layer, ParamKind::shared_down), dxn, false);
}

void MoeBlock::router_backward(LayerContext& ctx, int layer, Mat xn, Mat dweights, Mat dxn,
                               bool accumulate) {
  auto scope = ctx.timer.scope(Phase::router);
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const std::int64_t n = ctx.tokens, E = ctx.config.model.n_routed_experts;
  Mat dlogits = ctx.scratch.get("moe.dlogits", n, E, DType::f32);
  c.router_backward(router_params(ctx.config), scores_.view().row_slice(0, n),
                    indices_.view().row_slice(0, n), dweights, dlogits);
  c.gemm(false, true, 1.0f, dlogits, p.param(layer, ParamKind::router), accumulate ? 1.0f : 0.0f,
         dxn);
  c.gemm(true, false, 1.0f, xn, dlogits, 1.0f, p.grad(layer, ParamKind::router));
}

void MoeBlock::weighted_act(LayerContext& ctx, Mat gate_up, Mat act_u, Mat act) {
  const std::int64_t r = gate_up.rows;
  ctx.compute.swiglu_forward(gate_up, act_u);
  ctx.compute.gather_rows_scaled(act_u, ctx.scratch.iota(r), expert_weight_.view().row_slice(0, r),
                                 act);
}

Mat MoeBlock::expert_act(LayerContext& ctx, std::int64_t rows) {
  const std::int64_t f = ctx.config.model.moe_intermediate_size;
  if (ctx.config.workload.recompute.moe_act || ctx.config.saves_fp8_inputs()) {
    return ctx.scratch.get("moe.act", rows, f);
  }
  return ensure_rows(ctx.compute, act_, rows, f);
}

void MoeBlock::experts_forward(LayerContext& ctx, int layer, Mat xe) {
  auto scope = ctx.timer.scope(Phase::experts);
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const std::int64_t r = layout_.total_rows, h = ctx.config.model.hidden_size;
  const std::int64_t f = ctx.config.model.moe_intermediate_size;
  Mat gate_up = ensure_rows(c, gate_up_, r, 2 * f);
  Mat act = expert_act(ctx, r);
  Mat ye = ctx.scratch.get("moe.ye", r, h);
  std::vector<GemmProblem> up, down;
  for (int e = 0; e < p.local_experts(); ++e) {
    const std::int64_t rows = layout_.expert_rows[e], first = layout_.expert_offsets[e];
    if (rows == 0) continue;
    up.push_back({xe.row_slice(first, rows), p.param(layer, ParamKind::expert_gate_up, e),
                  gate_up.row_slice(first, rows)});
    down.push_back({act.row_slice(first, rows), p.param(layer, ParamKind::expert_down, e),
                    ye.row_slice(first, rows)});
  }
  c.linear_grouped_gemm(false, false, 1.0f, up, 0.0f);
  weighted_act(ctx, gate_up, ctx.scratch.get("moe.act_u", r, f), act);
  c.linear_grouped_gemm(false, false, 1.0f, down, 0.0f);
  if (ctx.config.saves_fp8_inputs()) {
    // Each expert's inputs as its weight gradients will read them (recomputed activations are
    // not kept at all).
    const bool keep_act = !ctx.config.workload.recompute.moe_act;
    xe_saved_.assign(static_cast<std::size_t>(p.local_experts()), Fp8Input{});
    act_saved_.assign(static_cast<std::size_t>(p.local_experts()), Fp8Input{});
    for (int e = 0; e < p.local_experts(); ++e) {
      const std::int64_t rows = layout_.expert_rows[e], first = layout_.expert_offsets[e];
      if (rows == 0) continue;
      const auto i = static_cast<std::size_t>(e);
      xe_saved_[i] = c.save_linear_input(xe.row_slice(first, rows),
                                         p.grad(layer, ParamKind::expert_gate_up, e));
      if (keep_act) {
        act_saved_[i] = c.save_linear_input(act.row_slice(first, rows),
                                            p.grad(layer, ParamKind::expert_down, e));
      }
    }
  }
  ctx.add_flops(Phase::experts, 3.0 * 3.0 * 2.0 * static_cast<double>(r) * h * f);
}

void MoeBlock::backward(LayerContext& ctx, int layer, Mat xn, Mat dy, Mat dxn) {
  Compute& c = ctx.compute;
  const ModelConfig& m = ctx.config.model;
  const std::int64_t n = ctx.tokens, h = m.hidden_size;
  const std::int64_t k = m.num_experts_per_tok, r = layout_.total_rows;
  const Mat row_token = row_token_.view().row_slice(0, sent_);
  const Mat source = expert_source_.view().row_slice(0, r);
  const bool shared = m.n_shared_experts > 0, overlap = ctx.overlap();

  // dxn collects three terms, in this order with and without --overlap (the same rounding): the
  // shared experts' (written), the router's (added), the routed experts' (scattered in last).
  bool dxn_written = false;
  if (shared && !overlap) {
    shared_backward(ctx, layer, xn, dy, dxn);
    dxn_written = true;
  }
  Mat dy_send = ctx.scratch.get("moe.dy_send", sent_, h);
  {
    auto scope = ctx.timer.scope(Phase::permute);
    c.gather_rows(dy, row_token, dy_send);
  }
  // The combine's reverse: gradients travel to the experts' ranks, behind the shared experts'
  // backward.
  Mat dyr = ctx.scratch.get("moe.dyr", r, h);
  const CommRequest combine =
      start_alltoall(ctx, Phase::combine, dy_send, plan_.send_rows, plan_.send_offsets, dyr,
                     layout_.recv_rows, layout_.recv_offsets);
  if (shared && overlap) {
    shared_backward(ctx, layer, xn, dy, dxn);
    dxn_written = true;
  }
  ctx.wait(Phase::combine, combine);
  Mat dye = ctx.scratch.get("moe.dye", r, h);
  {
    auto scope = ctx.timer.scope(Phase::permute);
    c.gather_rows(dyr, source, dye);
  }
  Mat dxe = ctx.scratch.get("moe.dxe", r, h);
  Mat dwe = ctx.scratch.get("moe.dwe", r, 1, DType::f32);
  experts_backward(ctx, layer, dye, dxe, dwe);
  Mat dxr = ctx.scratch.get("moe.dxr", r, h);
  Mat dwr = ctx.scratch.get("moe.dwr", r, 1, DType::f32);
  {
    auto scope = ctx.timer.scope(Phase::permute);
    c.zero(dxr);
    c.scatter_add_rows(dxe, source, Mat{}, dxr);
    c.zero(dwr);
    c.scatter_add_rows(dwe, source, Mat{}, dwr);
  }
  // The dispatch's reverse: the combine weights' gradients and the input gradients travel back
  // to the tokens' ranks; the router's backward (it needs only the former) hides the latter.
  Mat dw_rows = ctx.scratch.get("moe.dw_rows", sent_, 1, DType::f32);
  Mat dx_send = ctx.scratch.get("moe.dx_send", sent_, h);
  const CommRequest dispatch_weights =
      start_alltoall(ctx, Phase::dispatch, dwr, layout_.recv_rows, layout_.recv_offsets, dw_rows,
                     plan_.send_rows, plan_.send_offsets);
  CommRequest dispatch{};
  if (overlap) {
    dispatch = start_alltoall(ctx, Phase::dispatch, dxr, layout_.recv_rows, layout_.recv_offsets,
                              dx_send, plan_.send_rows, plan_.send_offsets);
  }
  ctx.wait(Phase::dispatch, dispatch_weights);
  Mat dweights = ctx.scratch.get("moe.dweights", n, k, DType::f32);
  {
    auto scope = ctx.timer.scope(Phase::permute);
    c.zero(dweights);
    c.scatter_add_rows(dw_rows, row_slot_.view().row_slice(0, sent_), Mat{},
                       dweights.reshaped(n * k, 1));
  }
  router_backward(ctx, layer, xn, dweights, dxn, dxn_written);
  if (!overlap) {
    dispatch = start_alltoall(ctx, Phase::dispatch, dxr, layout_.recv_rows, layout_.recv_offsets,
                              dx_send, plan_.send_rows, plan_.send_offsets);
  }
  ctx.wait(Phase::dispatch, dispatch);
  auto scope = ctx.timer.scope(Phase::permute);
  c.scatter_add_rows(dx_send, row_token, Mat{}, dxn);
}

void MoeBlock::experts_backward(LayerContext& ctx, int layer, Mat dye, Mat dxe, Mat dwe) {
  auto scope = ctx.timer.scope(Phase::experts);
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const std::int64_t r = layout_.total_rows;
  const std::int64_t f = ctx.config.model.moe_intermediate_size;
  const bool saved = ctx.config.saves_fp8_inputs();
  Mat xe = saved ? Mat{} : xe_.view().row_slice(0, r);
  Mat gate_up = gate_up_.view().row_slice(0, r);
  Mat weight = expert_weight_.view().row_slice(0, r);
  Mat iota = ctx.scratch.iota(r);
  // The unweighted activation, for the weights' gradient (Megatron's fused weighted SwiGLU
  // backward recomputes it too); with --recompute moe_act the weighted one from it as well.
  Mat act_u = ctx.scratch.get("moe.act_u", r, f);
  Mat act = expert_act(ctx, r);
  if (ctx.config.workload.recompute.moe_act) {
    weighted_act(ctx, gate_up, act_u, act);
  } else {
    c.swiglu_forward(gate_up, act_u);
  }
  Mat dact_w = ctx.scratch.get("moe.dact_w", r, f);
  Mat dact = ctx.scratch.get("moe.dact", r, f);
  Mat dgate_up = ctx.scratch.get("moe.dgate_up", r, 2 * f);
  const bool act_saved = saved && !ctx.config.workload.recompute.moe_act;
  std::vector<GemmProblem> dgrad_down, wgrad_down, dgrad_up, wgrad_up;
  for (int e = 0; e < p.local_experts(); ++e) {
    const std::int64_t rows = layout_.expert_rows[e], first = layout_.expert_offsets[e];
    if (rows == 0) {
      // An expert that received no tokens has zero gradients (already zeroed).
      continue;
    }
    dgrad_down.push_back({dye.row_slice(first, rows), p.param(layer, ParamKind::expert_down, e),
                          dact_w.row_slice(first, rows)});
    wgrad_down.push_back({act_saved ? Mat{} : act.row_slice(first, rows),
                          dye.row_slice(first, rows), p.grad(layer, ParamKind::expert_down, e)});
    dgrad_up.push_back({dgate_up.row_slice(first, rows),
                        p.param(layer, ParamKind::expert_gate_up, e), dxe.row_slice(first, rows)});
    wgrad_up.push_back({saved ? Mat{} : xe.row_slice(first, rows), dgate_up.row_slice(first, rows),
                        p.grad(layer, ParamKind::expert_gate_up, e)});
  }
  // The weight gradients from the inputs' FP8 copies (--fp8-saved-inputs), expert by expert as
  // fp8 runs them anyway, or as one grouped call.
  const auto wgrads = [&](const std::vector<GemmProblem>& problems,
                          const std::vector<Fp8Input>& inputs, bool from_saved) {
    if (!from_saved) {
      c.linear_grouped_gemm(true, false, 1.0f, problems, 1.0f);
      return;
    }
    std::size_t i = 0;
    for (const Fp8Input& x : inputs) {
      if (x.rows == 0) continue;
      c.linear_wgrad(1.0f, x, problems[i].b, 1.0f, problems[i].c);
      ++i;
    }
  };
  c.linear_grouped_gemm(false, true, 1.0f, dgrad_down, 0.0f);
  wgrads(wgrad_down, act_saved_, act_saved);
  // act_w = weight * act_u: d weight = <d act_w, act_u>, d act_u = weight * d act_w.
  c.gathered_row_dot(dact_w, iota, act_u, dwe);
  c.gather_rows_scaled(dact_w, iota, weight, dact);
  c.swiglu_backward(gate_up, dact, dgate_up);
  c.linear_grouped_gemm(false, true, 1.0f, dgrad_up, 0.0f);
  wgrads(wgrad_up, xe_saved_, saved);
  // The copies were this micro-batch's: their memory goes now.
  xe_saved_.clear();
  act_saved_.clear();
}

}  // namespace moebench
