#include "workloads/predict/predict_model.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"
#include "workloads/accounting/accounting.hpp"
#include "workloads/accounting/memory_model.hpp"

namespace moebench {

namespace {

// The phases a predicted step is split into: the run's phase names (`moebench phases`).
enum Phase {
  kAttention,
  kDenseMlp,
  kRouter,
  kPermute,
  kDispatch,
  kExperts,
  kSharedExpert,
  kCombine,
  kHead,
  kGradReduce,
  kOptimizer,
  kCommWait,
  kPpBubble,
  kPhaseCount
};
constexpr std::array<const char*, kPhaseCount> kPhaseNames = {
    "attention", "dense_mlp", "router",      "permute",   "dispatch",  "experts",  "shared_expert",
    "combine",   "head",      "grad_reduce", "optimizer", "comm_wait", "pp_bubble"};
constexpr std::array<const char*, kPhaseCount> kPhaseWhat = {
    "MLA projections (GEMMs at the run's precision), core attention, norms, rope, residuals",
    "the dense layers' SwiGLU MLPs",
    "router GEMM, scores and top-k",
    "ordering tokens by expert and back (memory-bound)",
    "all-to-all of tokens to the experts' ranks and its reverse, where not hidden",
    "the routed experts' grouped GEMMs and SwiGLU",
    "the shared experts' MLP",
    "all-to-all of expert outputs back and its reverse",
    "embedding, output head GEMM, cross-entropy, MTP projections",
    "data-parallel gradient reduce-scatter or all-reduce and ZeRO-1's all-gather, where not "
    "hidden behind the backward and the next forward",
    "AdamW on the rank's shard, zeroing the gradients (memory-bound)",
    "waiting at collectives' barriers and time in no phase, as the calibration run measured it",
    "the pipeline's fill and drain and its point-to-point transfers"};

using PhaseTimes = std::array<double, kPhaseCount>;

void check_fraction(double v, const char* name) {
  if (!(v > 0 && v <= 1)) {
    throw UsageError(std::string("efficiency ") + name + " must be in (0, 1], got " +
                     std::to_string(v));
  }
}

// One micro-batch through one stage: its forward and backward time per phase.
struct StagePass {
  PhaseTimes forward{};
  PhaseTimes backward{};
  // Waiting for offloaded expert inputs' copies, added to the experts phase once the host's gaps
  // and a calibration have scaled the compute (a copy's wait is neither).
  double offload_wait_forward = 0, offload_wait_backward = 0;
  double forward_s() const {
    double t = 0;
    for (double v : forward) t += v;
    return t;
  }
  double backward_s() const {
    double t = 0;
    for (double v : backward) t += v;
    return t;
  }
};

struct Pricing {
  const RunConfig& c;
  const Hardware& hw;
  const Efficiencies& eff;
  const TrainerRules& rules;
  double tokens = 0;  // rows of one micro-batch on one rank
  double grouped_eff = 0;
  double rows_per_expert = 0;
  double host = 0;  // the fraction the trainer's host adds to each pass (applied after pricing)
  LinkCost ep_nvlink{}, ep_scale_out{};

  double gemm(double flops) const { return compute_time_s(flops, hw.gemm_flops, eff.dense_gemm); }
  double grouped(double flops) const { return compute_time_s(flops, hw.gemm_flops, grouped_eff); }
  // Core attention of `fwd_flops` forward (the accounting's count), `mma_factor` times its MMAs
  // (1 forward, 2 backward), each pass computing the softmax's exponentials once (the backward
  // recomputes them): the MMAs at the tensor cores' peak, the exponentials (one per 2 (qk + v)
  // of the MMAs' forward FLOPs, counted as the accounting counts those) at the SFUs' rate, the
  // slower of the two (FlashAttention overlaps them), both at the attention efficiency.
  double attention(double fwd_flops, double mma_factor) const {
    const double peak = rules.fp8_attention && hw.fp8_flops > 0 ? hw.fp8_flops : hw.attention_flops;
    const double mma = compute_time_s(fwd_flops * mma_factor, peak, eff.attention);
    const double flops_per_exp =
        2.0 * static_cast<double>(c.model.qk_head_dim() + c.model.v_head_dim);
    if (!(hw.exp_per_s > 0) || !(flops_per_exp > 0)) return mma;
    return std::max(mma, fwd_flops / flops_per_exp / (hw.exp_per_s * eff.attention));
  }
  double memory(double bytes) const { return bytes / (hw.memory_bandwidth * eff.memory); }
  // Element-wise traffic of `elements` per token read and written once, in storage precision.
  double elementwise(double elements) const {
    return memory(elements * tokens * static_cast<double>(hw.storage_bytes));
  }
  // Quantising `elements` per token to FP8 (read in storage precision, write one byte), where
  // the run computes in FP8.
  double quantise(double elements) const {
    if (c.precision != Precision::fp8) return 0;
    return memory(elements * tokens * (static_cast<double>(hw.storage_bytes) + 1.0));
  }
};

// Backward GEMMs: the data and the weight gradient, twice the forward's FLOPs; the element-wise
// backward reads the saved input and the output gradient and writes the input gradient, twice
// the forward's traffic.
constexpr double kBackwardFactor = 2.0;

// A stage's compute so far in one direction (its all-to-alls left out).
double compute_s(const PhaseTimes& pass) {
  double t = 0;
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    if (ph != kDispatch && ph != kCombine) t += pass[ph];
  }
  return t;
}

// Bytes per element of a GEMM input as the backward keeps it: FP8 with its scales as Transformer
// Engine keeps them (E8M0 with MXFP8), storage precision otherwise.
double saved_input_bytes(const Pricing& p) {
  return p.c.precision == Precision::fp8 ? fp8_saved_input_bytes(p.c.fp8_recipe, true)
                                         : static_cast<double>(p.hw.storage_bytes);
}

// A MoE layer's expert input offloaded (TrainerRules::offload_expert_fc1): the rows the rank's
// experts receive, as the backward keeps them, copied out under the layer's forward compute and
// back under its backward compute (`forward_s` and `backward_s` as priced, lengthened here by the
// host's gaps), on copy engines beside the compute.
ExpertInputOffload expert_input_offload(const Pricing& p, double forward_s, double backward_s) {
  ExpertInputOffload o;
  if (!p.rules.offload_expert_fc1 || !(p.hw.host_link_bandwidth > 0)) return o;
  const double per_element = saved_input_bytes(p);
  o.priced = true;
  o.bytes = p.tokens * static_cast<double>(p.c.model.num_experts_per_tok) *
            static_cast<double>(p.c.model.hidden_size) * per_element;
  o.copy_s = o.bytes / p.hw.host_link_bandwidth;
  o.layer_forward_s = forward_s * (1.0 + p.host);
  o.layer_backward_s = backward_s * (1.0 + p.host);
  o.exposed_forward_s = std::max(0.0, o.copy_s - o.layer_forward_s);
  o.exposed_backward_s = std::max(0.0, o.copy_s - o.layer_backward_s);
  return o;
}

// One all-to-all of one MoE layer and micro-batch (dispatch or combine, either direction).
double moe_alltoall_s(const Pricing& p) {
  const ModelConfig& m = p.c.model;
  const int k = static_cast<int>(m.num_experts_per_tok);
  const double row = static_cast<double>(m.hidden_size) * p.hw.storage_bytes;
  const int domain = std::max(1, p.hw.nvlink_domain);
  if (p.rules.dispatcher == Dispatcher::dedup) {
    return dedup_alltoall_cost(p.tokens, k, row, p.c.layout.ep, domain, p.ep_nvlink, p.ep_scale_out)
        .time_s;
  }
  return alltoall_cost(p.tokens * k * row, p.c.layout.ep, domain, p.ep_nvlink, p.ep_scale_out)
      .time_s;
}

// One transformer layer (dense or MoE, attention on or off) of one micro-batch; what its expert
// input's offload costs (not priced for a dense layer or without the offload).
ExpertInputOffload price_layer(const Pricing& p, bool dense, StagePass& s) {
  const double forward_before = compute_s(s.forward);
  const double backward_before = compute_s(s.backward);
  const ModelConfig& m = p.c.model;
  const double t = p.tokens;
  const double h = static_cast<double>(m.hidden_size);
  const Recompute& r = p.c.workload.recompute;
  if (p.c.workload.attention) {
    const double core = core_attention_flops_per_token(m, p.c.workload.seq_len) / 3.0 * t;
    const double proj = (mla_flops_per_token(m, p.c.workload.seq_len) / 3.0 * t) - core;
    const double heads = static_cast<double>(m.num_attention_heads);
    const double ql = m.q_lora_rank ? static_cast<double>(*m.q_lora_rank) : 0.0;
    const double kvl = static_cast<double>(m.kv_lora_rank);
    const double rope = static_cast<double>(m.qk_rope_head_dim);
    const double qk = static_cast<double>(m.qk_head_dim());
    const double v = static_cast<double>(m.v_head_dim);
    // Norms (input, q and kv latents), rope on q and the shared key, k assembled per head, the
    // residual add.
    const double elems =
        2 * h + 2 * ql + 2 * kvl + 2 * (heads * rope + rope) + 2 * heads * qk + 3 * h;
    const double quant = h + ql + kvl + heads * v;
    const double fwd =
        p.gemm(proj) + p.attention(core, 1) + p.elementwise(elems) + p.quantise(quant);
    s.forward[kAttention] += fwd;
    double bwd = kBackwardFactor * (p.gemm(proj) + p.elementwise(elems) + p.quantise(quant)) +
                 p.attention(core, kBackwardFactor);
    // --recompute repeats forward work in the backward.
    if (r.core_attn) bwd += p.attention(core, 1);
    if (r.mla_up_proj) {
      bwd +=
          p.gemm(t * (gemm_flops(1, heads * qk, ql > 0 ? ql : h) +
                      gemm_flops(1, heads * (static_cast<double>(m.qk_nope_head_dim) + v), kvl)));
    }
    if (r.layernorm) bwd += p.elementwise(4 * h);
    s.backward[kAttention] += bwd;
  } else {
    s.forward[kAttention] += p.elementwise(2 * h);
    s.backward[kAttention] += kBackwardFactor * p.elementwise(2 * h);
  }
  const double norm_residual = 2 * h + 3 * h;  // the pre-MLP norm and the residual add
  if (dense) {
    const double inter = static_cast<double>(m.intermediate_size);
    const double f = dense_mlp_flops_per_token(m) / 3.0 * t;
    const double fwd = p.gemm(f) + p.elementwise(norm_residual + 3 * inter) + p.quantise(h + inter);
    s.forward[kDenseMlp] += fwd;
    s.backward[kDenseMlp] += kBackwardFactor * fwd + (r.mlp ? p.gemm(f * 2.0 / 3.0) : 0.0);
    return {};
  }
  const double k = static_cast<double>(m.num_experts_per_tok);
  const double ffn = static_cast<double>(m.moe_intermediate_size);
  const double shared = static_cast<double>(m.n_shared_experts) * ffn;
  const double experts = static_cast<double>(m.n_routed_experts);
  // Router: its GEMM and the scores, selection and top-k over the experts.
  const double router = p.gemm(router_flops_per_token(m) / 3.0 * t) + p.elementwise(3 * experts);
  s.forward[kRouter] += router;
  s.backward[kRouter] += kBackwardFactor * router;
  // Permute: the rows copied out in expert order and back, weighted and summed.
  const double permute = p.elementwise(2 * k * h + 2 * k * h + h);
  s.forward[kPermute] += permute;
  s.backward[kPermute] += kBackwardFactor * permute;
  // The experts: the grouped GEMMs at the rows each local expert receives, the SwiGLU.
  const double routed = routed_experts_flops_per_token(m) / 3.0 * t;
  const double ex = p.grouped(routed) + p.elementwise(3 * k * ffn) + p.quantise(k * h + k * ffn);
  s.forward[kExperts] += ex;
  s.backward[kExperts] += kBackwardFactor * ex + (r.moe_act ? p.elementwise(3 * k * ffn) : 0.0);
  const double sh = shared > 0 ? p.gemm(shared_experts_flops_per_token(m) / 3.0 * t) +
                                     p.elementwise(3 * shared + 3 * h) + p.quantise(h + shared)
                               : 0.0;
  s.forward[kSharedExpert] += sh + p.elementwise(norm_residual);
  s.backward[kSharedExpert] += kBackwardFactor * (sh + p.elementwise(norm_residual)) +
                               (r.shared_experts ? sh * 2.0 / 3.0 : 0.0);
  // The layer's compute, forward and backward: what its exchanges and copies can hide under.
  const double layer_forward = compute_s(s.forward) - forward_before;
  const double layer_backward = compute_s(s.backward) - backward_before;
  const ExpertInputOffload offload = expert_input_offload(p, layer_forward, layer_backward);
  // The all-to-alls: each rank sends its rows (top-k per token) to the experts' ranks, in
  // storage precision, and gets the outputs back; the backward runs both in reverse.
  const double a2a = moe_alltoall_s(p);
  if (p.rules.ep_overlap && p.hw.concurrent_communication) {
    // Under another micro-batch's compute: the layer's four exchanges (forward and backward)
    // exposed where they outlast its forward and backward compute, and the compute slowed
    // meanwhile by the SMs the dispatcher's kernels hold.
    const double sm_share =
        p.hw.sms > 0 ? std::min(0.99, static_cast<double>(p.rules.ep_comm_sms) / p.hw.sms) : 0.0;
    const double exposed =
        overlapped_exchange_s(4 * a2a, layer_forward + layer_backward, sm_share) / 4;
    for (int ph : {kDispatch, kCombine}) {
      s.forward[ph] += exposed;
      s.backward[ph] += exposed;
    }
  } else if (p.c.overlap && p.rules.shared_expert_overlap && p.hw.concurrent_communication) {
    // moebench's --overlap: the shared expert runs while the dispatch is in flight (forward) and
    // while the combine's reverse is (backward); the router's backward while the dispatch's
    // reverse is.
    s.forward[kDispatch] += std::max(0.0, a2a - sh);
    s.forward[kCombine] += a2a;
    s.backward[kCombine] += std::max(0.0, a2a - kBackwardFactor * sh);
    s.backward[kDispatch] += std::max(0.0, a2a - kBackwardFactor * router);
  } else {
    s.forward[kDispatch] += a2a;
    s.forward[kCombine] += a2a;
    s.backward[kDispatch] += a2a;
    s.backward[kCombine] += a2a;
  }
  // Where the copies outlast the compute they hide under, the layer waits for them.
  s.offload_wait_forward += offload.exposed_forward_s;
  s.offload_wait_backward += offload.exposed_backward_s;
  return offload;
}

// The model's ends on a stage: the embedding, the MTP modules' own parts (their transformer
// layers are priced as layers), the output head and its loss (once per head: main and MTP).
void price_ends(const Pricing& p, const PipelineStage& st, StagePass& s) {
  const ModelConfig& m = p.c.model;
  const double t = p.tokens;
  const double h = static_cast<double>(m.hidden_size);
  const double vocab = static_cast<double>(m.vocab_size);
  double fwd = 0;
  if (st.embedding) fwd += p.elementwise(2 * h);
  const double mtp = static_cast<double>(st.mtp);
  // Each MTP module: two norms and the eh projection (2h -> h).
  fwd += mtp * (p.elementwise(4 * h) + p.gemm(gemm_flops(t, h, 2 * h)) + p.quantise(2 * h));
  const double heads = (st.loss ? 1.0 : 0.0) + mtp;
  // The final norm, the head GEMM (BF16 in the recipes: its output feeds the loss), the logits
  // written, read by the softmax and its gradient written.
  fwd += heads * (p.elementwise(2 * h) +
                  compute_time_s(gemm_flops(t, vocab, h), p.hw.attention_flops, p.eff.dense_gemm) +
                  p.elementwise(3 * vocab));
  s.forward[kHead] += fwd;
  s.backward[kHead] += kBackwardFactor * fwd;
}

LinkCost scaled(const LinkCost& l, double efficiency) {
  return LinkCost{l.latency_s, l.bandwidth_bytes_per_s * efficiency};
}

}  // namespace

double grouped_gemm_efficiency(const Efficiencies& e, double rows_per_expert) {
  if (rows_per_expert <= 0) return e.grouped_gemm;
  return e.grouped_gemm * rows_per_expert / (rows_per_expert + e.grouped_gemm_half_rows);
}

double host_overhead(const Efficiencies& e, HostGaps gaps) {
  switch (gaps) {
    case HostGaps::none:
      return 0.0;
    case HostGaps::partial_graphs:
      return e.host_overhead_partial_graphs;
    case HostGaps::no_graphs:
      return e.host_overhead_no_graphs;
  }
  return 0.0;
}

Prediction predict_step(const RunConfig& c, const Hardware& hw, const Efficiencies& eff,
                        const TrainerRules& rules, const Calibration* calibration) {
  for (const double h : {eff.host_overhead_partial_graphs, eff.host_overhead_no_graphs}) {
    if (!(h >= 0 && h < 1)) {
      throw UsageError("efficiency host_overhead must be in [0, 1), got " + std::to_string(h));
    }
  }
  check_fraction(eff.dense_gemm, "dense_gemm");
  check_fraction(eff.grouped_gemm, "grouped_gemm");
  check_fraction(eff.attention, "attention");
  check_fraction(eff.memory, "memory");
  check_fraction(eff.nvlink, "nvlink");
  check_fraction(eff.scale_out, "scale_out");
  if (!(hw.gemm_flops > 0) || !(hw.attention_flops > 0) || !(hw.memory_bandwidth > 0)) {
    throw UsageError("the system has no peak for this run's precision or no memory bandwidth");
  }
  const ModelConfig& m = c.model;
  const PipelineLayout layout = pipeline_layout(c);
  const PipelineShape shape = pipeline_shape(c);
  const int world = c.layout.world;
  const int ep = c.layout.ep;
  const int pp = c.layout.pp;
  const int dp = c.layout.dp();
  const int edp = c.layout.edp();
  const int domain = std::max(1, hw.nvlink_domain);

  Pricing p{c, hw, eff, rules};
  p.tokens = static_cast<double>(c.workload.tokens_per_rank());
  p.rows_per_expert = p.tokens * static_cast<double>(m.num_experts_per_tok) * ep /
                      static_cast<double>(std::max<std::int64_t>(1, m.n_routed_experts));
  p.grouped_eff = grouped_gemm_efficiency(eff, p.rows_per_expert);
  p.ep_nvlink = scaled(hw.nvlink, eff.nvlink);
  p.ep_scale_out = scaled(hw.scale_out, eff.scale_out);
  // The trainer's host lengthens each pass's compute by the gaps it leaves between kernels where
  // its launches are not captured in CUDA graphs (the exchanges are priced as the links give them).
  p.host = host_overhead(eff, rules.host_gaps);

  // Every virtual stage's passes.
  const std::size_t stages = layout.stages.size();
  std::vector<StagePass> pass(stages);
  ExpertInputOffload offload;
  const bool mtp_moe = c.workload.moe_layers() > 0;
  for (std::size_t i = 0; i < stages; ++i) {
    const PipelineStage& st = layout.stages[i];
    // Every MoE layer's offload is the same (the same rows on every rank and layer).
    const auto layer = [&](bool dense) {
      const ExpertInputOffload o = price_layer(p, dense, pass[i]);
      if (o.priced) offload = o;
    };
    for (int l = st.first_layer; l < st.first_layer + st.layers; ++l) {
      layer(l < c.workload.dense_layers);
    }
    for (int k = 0; k < st.mtp; ++k) layer(!mtp_moe);
    price_ends(p, st, pass[i]);
  }
  // A calibration scales each phase as the measured run found it.
  const auto scale = [&](int ph) {
    if (!calibration) return 1.0;
    const auto it = calibration->phase_scale.find(kPhaseNames[ph]);
    return it == calibration->phase_scale.end() ? 1.0 : it->second;
  };
  for (StagePass& sp : pass) {
    for (int ph = 0; ph < kPhaseCount; ++ph) {
      const double f = scale(ph) * (ph == kDispatch || ph == kCombine ? 1.0 : 1.0 + p.host);
      sp.forward[ph] *= f;
      sp.backward[ph] *= f;
    }
    sp.forward[kExperts] += sp.offload_wait_forward;
    sp.backward[kExperts] += sp.offload_wait_backward;
  }
  // Point-to-point: one micro-batch's activations (or their gradients) between neighbouring
  // pipeline ranks, world / pp ranks apart: over NVLink only when the whole pipeline shares a
  // domain.
  const double act_bytes = p.tokens * static_cast<double>(m.hidden_size) * hw.storage_bytes;
  const bool pipe_in_domain = pp > 1 && (world / pp) * (pp - 1) < domain;
  PipelineTimes times;
  times.p2p_s =
      pp > 1 ? transfer_time_s(pipe_in_domain ? p.ep_nvlink : p.ep_scale_out, act_bytes) : 0.0;
  for (const StagePass& s : pass) {
    times.forward_s.push_back(s.forward_s());
    times.backward_s.push_back(s.backward_s());
  }
  const SimulatedPipeline sim = simulate_pipeline(shape, times);

  Prediction out;
  out.pipeline_s = sim.step_s;
  out.stage_forward_s = times.forward_s;
  out.stage_backward_s = times.backward_s;
  out.p2p_s = times.p2p_s;
  out.rows_per_expert = p.rows_per_expert;
  out.grouped_gemm_efficiency = p.grouped_eff;
  // The rank that sets the step: the last to finish.
  int crit = 0;
  for (int r = 1; r < pp; ++r) {
    if (sim.end_s[static_cast<std::size_t>(r)] > sim.end_s[static_cast<std::size_t>(crit)])
      crit = r;
  }
  out.critical_pp_rank = crit;
  const double mb = static_cast<double>(shape.microbatches);
  // A pipeline rank's passes in one step, phase by phase, and its waiting.
  const auto rank_phases = [&](int r) {
    PhaseTimes t{};
    for (int chunk = 0; chunk < c.layout.vp; ++chunk) {
      const StagePass& sp = pass[static_cast<std::size_t>(layout.stage_index(r, chunk))];
      for (int ph = 0; ph < kPhaseCount; ++ph) t[ph] += mb * (sp.forward[ph] + sp.backward[ph]);
    }
    t[kPpBubble] = sim.step_s - sim.busy_s[static_cast<std::size_t>(r)];
    return t;
  };
  PhaseTimes phases = rank_phases(crit);

  // The critical rank's parameters: the dense ones (attention, dense MLPs, shared experts,
  // routers, the ends), reduced over the dp ranks of its stage, and its local experts', over edp.
  const ParamCounts pc = param_counts(m);
  const double local_experts =
      static_cast<double>(m.n_routed_experts) / std::max(1, ep) * static_cast<double>(pc.expert);
  // Per chunk of the critical rank, and over all of them.
  std::vector<double> chunk_dense(static_cast<std::size_t>(c.layout.vp), 0.0);
  std::vector<double> chunk_expert(chunk_dense.size(), 0.0);
  double moe_layers_rank = 0;
  for (int chunk = 0; chunk < c.layout.vp; ++chunk) {
    const PipelineStage& st = layout.stage(crit, chunk);
    double& dense_here = chunk_dense[static_cast<std::size_t>(chunk)];
    double& expert_here = chunk_expert[static_cast<std::size_t>(chunk)];
    const auto layer = [&](bool dense) {
      dense_here += static_cast<double>(layer_attention_params(m, pc, c.workload.attention));
      if (dense) {
        dense_here += static_cast<double>(pc.dense_mlp_per_layer);
      } else {
        dense_here += static_cast<double>(pc.shared_experts + pc.router);
        expert_here += local_experts;
        moe_layers_rank += 1;
      }
    };
    for (int l = st.first_layer; l < st.first_layer + st.layers; ++l) {
      layer(l < c.workload.dense_layers);
    }
    for (int k = 0; k < st.mtp; ++k) {
      layer(!mtp_moe);
      dense_here += static_cast<double>(pc.mtp_own);
    }
    if (st.embedding) dense_here += static_cast<double>(pc.embedding);
    if (st.loss) dense_here += static_cast<double>(pc.output_head);
  }
  const double dense_params = std::accumulate(chunk_dense.begin(), chunk_dense.end(), 0.0);
  const double expert_params = std::accumulate(chunk_expert.begin(), chunk_expert.end(), 0.0);
  // The gradient reduction and ZeRO-1's all-gather, per step. Both groups span the world / pp
  // consecutive ranks of a pipeline stage: over NVLink when those fit a domain.
  const double grad_bytes =
      rules.grad_reduce_bytes > 0 ? rules.grad_reduce_bytes : hw.storage_bytes;
  const LinkCost link = world / pp <= domain ? p.ep_nvlink : p.ep_scale_out;
  const bool zero1 = c.grad_reduce == GradReduce::reduce_scatter;
  const double passes = zero1 ? 1.0 : 2.0;  // all-reduce: reduce-scatter then all-gather
  std::vector<double> chunk_reduce, chunk_gather;
  for (std::size_t k = 0; k < chunk_dense.size(); ++k) {
    chunk_reduce.push_back(passes * (ring_half_time_s(chunk_dense[k] * grad_bytes, dp, link) +
                                     ring_half_time_s(chunk_expert[k] * grad_bytes, edp, link)));
    chunk_gather.push_back(zero1
                               ? ring_half_time_s(chunk_dense[k] * hw.storage_bytes, dp, link) +
                                     ring_half_time_s(chunk_expert[k] * hw.storage_bytes, edp, link)
                               : 0.0);
  }
  const double reduce = std::accumulate(chunk_reduce.begin(), chunk_reduce.end(), 0.0);
  const double gather = std::accumulate(chunk_gather.begin(), chunk_gather.end(), 0.0);
  out.grad_reduce_s = reduce;
  out.param_gather_s = gather;
  // Hidden (with --overlap on) as the schedule allows: each chunk's reduction under the passes
  // from its last backward on; where the trainer overlaps it, its all-gather under those before
  // its first forward's end (the next step's).
  const bool hide = c.overlap && hw.concurrent_communication;
  const DataParallelExposure exposed =
      hide ? exposed_data_parallel(shape, sim, crit, chunk_reduce, chunk_gather)
           : DataParallelExposure{reduce, gather};
  const double exposed_reduce = exposed.reduce_s;
  const double exposed_gather = rules.param_gather_overlap ? exposed.gather_s : gather;
  phases[kGradReduce] = (exposed_reduce + exposed_gather) * scale(kGradReduce);

  // The optimizer: AdamW over the rank's shard (ZeRO-1) or all its parameters, FP32 master
  // weights, moments and main gradients read, the moments and weights written; then every local
  // FP32 main gradient zeroed.
  const double shard =
      zero1 ? dense_params / dp + expert_params / edp : dense_params + expert_params;
  const double moment = c.optimizer_state_dtype == OptimizerStateDtype::bf16 ? 2.0 : 4.0;
  const double adam_bytes = shard * (4 + 4 + 2 * moment + 4 + 2 * moment + hw.storage_bytes);
  phases[kOptimizer] =
      c.optimizer == Optimizer::adamw
          ? p.memory(adam_bytes + (dense_params + expert_params) * 4.0) * scale(kOptimizer)
          : 0.0;
  if (calibration) {
    phases[kCommWait] =
        calibration->wait_fraction * (sim.step_s + phases[kGradReduce] + phases[kOptimizer]);
  }

  out.step_s = sim.step_s + phases[kGradReduce] + phases[kOptimizer] + phases[kCommWait];
  out.bubble_fraction = sim.step_s > 0 ? phases[kPpBubble] / sim.step_s : 0.0;
  out.calibrated = calibration != nullptr;
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    out.phases.push_back(PredictedPhase{kPhaseNames[ph], phases[ph], kPhaseWhat[ph]});
  }
  // Every pipeline rank's own passes and wait, with the critical rank's step-end terms.
  for (int r = 0; r < pp; ++r) {
    PhaseTimes own = rank_phases(r);
    for (int ph : {kGradReduce, kOptimizer, kCommWait}) own[ph] = phases[ph];
    std::vector<PredictedPhase> list;
    for (int ph = 0; ph < kPhaseCount; ++ph) {
      list.push_back(PredictedPhase{kPhaseNames[ph], own[ph], kPhaseWhat[ph]});
    }
    out.rank_phases.push_back(list);
  }
  // The all-to-alls priced for one step before overlap, for --explain: each MoE layer's two
  // exchanges (dispatch or combine) forward and backward.
  out.alltoall_s = 2 * moe_alltoall_s(p) * moe_layers_rank * mb;
  out.offload = offload;
  out.offload_exposed_s =
      (offload.exposed_forward_s + offload.exposed_backward_s) * moe_layers_rank * mb;
  const double flops = account_instantiated(c).flops_per_step;
  out.tflops_per_gpu = flops / out.step_s / world / 1e12;
  out.tokens_per_s_per_gpu = static_cast<double>(tokens_per_step(c)) / out.step_s / world;
  return out;
}

nlohmann::json to_json(const Prediction& p) {
  nlohmann::ordered_json j;
  j["step_s"] = p.step_s;
  j["pipeline_s"] = p.pipeline_s;
  j["bubble_fraction"] = p.bubble_fraction;
  j["tflops_per_gpu"] = p.tflops_per_gpu;
  j["tokens_per_s_per_gpu"] = p.tokens_per_s_per_gpu;
  j["critical_pp_rank"] = p.critical_pp_rank;
  nlohmann::ordered_json phases = nlohmann::ordered_json::object();
  for (const PredictedPhase& ph : p.phases) phases[ph.name] = ph.time_s;
  j["phase_time_s"] = phases;
  j["stage_forward_s"] = p.stage_forward_s;
  j["stage_backward_s"] = p.stage_backward_s;
  j["p2p_s"] = p.p2p_s;
  j["communication_before_overlap_s"] = {{"dispatch", p.alltoall_s},
                                         {"combine", p.alltoall_s},
                                         {"grad_reduce", p.grad_reduce_s},
                                         {"param_allgather", p.param_gather_s}};
  j["rows_per_expert"] = p.rows_per_expert;
  j["grouped_gemm_efficiency"] = p.grouped_gemm_efficiency;
  if (p.offload.priced) {
    j["expert_input_offload"] =
        nlohmann::ordered_json{{"bytes_per_layer", p.offload.bytes},
                               {"copy_s", p.offload.copy_s},
                               {"layer_forward_s", p.offload.layer_forward_s},
                               {"layer_backward_s", p.offload.layer_backward_s},
                               {"exposed_s", p.offload_exposed_s}};
  } else {
    j["expert_input_offload"] = nullptr;
  }
  j["calibrated"] = p.calibrated;
  return j;
}

}  // namespace moebench
