// The step-time model assembled from a run's accounting, on configurations small enough to price
// by hand (the arithmetic is in the comments, not computed by the functions under test): one
// dense layer's passes, a 1F1B pipeline of two of them, the data-parallel exchanges they hide, a
// calibration's scaling, an offloaded expert input's copies, and the grouped GEMM's efficiency
// curve.
#include "workloads/predict/predict_model.hpp"

#include <string>

#include <doctest/doctest.h>

#include "harness/core/error.hpp"
#include "workloads/accounting/accounting.hpp"

namespace moebench {
namespace {

// Sums and products of a few exact decimals: 1e-12 relative covers their rounding.
constexpr double kEps = 1e-12;

// The tiny model (h 256, dense ffn 512), one dense layer without attention and without the
// model's ends, 8 tokens a micro-batch, FP32, no optimizer.
RunConfig dense_slice(int layers, int pp, int world, std::int64_t global_batch) {
  RunConfig c;
  c.model = preset("deepseek-v3-tiny");
  c.workload.seq_len = 8;
  c.workload.layers = layers;
  c.workload.dense_layers = layers;
  c.workload.attention = false;
  c.workload.global_batch = global_batch;
  c.layout.world = world;
  c.layout.pp = pp;
  c.optimizer = Optimizer::none;
  c.precision = Precision::fp32;
  return c;
}

// 1 TFLOP/s, 100 GB/s of memory, FP32 storage, no NVLink, a free scale-out link.
Hardware toy_hardware() {
  Hardware hw;
  hw.gemm_flops = 1e12;
  hw.attention_flops = 1e12;
  hw.memory_bandwidth = 1e11;
  hw.nvlink_domain = 1;
  hw.scale_out = LinkCost{0, 1e30};
  hw.nvlink = hw.scale_out;
  hw.storage_bytes = 4;
  return hw;
}

// One micro-batch through the layer, by hand:
//  - the MLP's GEMMs: 18 x 256 x 512 / 3 = 786,432 FLOPs a token, x 8 tokens at 1e12: 6.291456 us;
//  - with attention off, the layer's input norm: 2 x 256 elements a token, x 8 x 4 bytes at
//    1e11: 0.16384 us;
//  - the MLP's norm and residual (5 x 256) and SwiGLU (3 x 512): 2,816 elements a token: 0.90112
//  us.
constexpr double kGemm = 6.291456e-6, kNorm = 1.6384e-7, kMlpElementwise = 9.0112e-7;
constexpr double kForward = kGemm + kNorm + kMlpElementwise;  // 7.356416 us; the backward twice

// A predicted phase's time by its name (-1 where the prediction has no such phase).
double phase_time(const Prediction& p, const std::string& name) {
  for (const PredictedPhase& ph : p.phases) {
    if (ph.name == name) return ph.time_s;
  }
  return -1.0;
}

TEST_CASE("predict: one dense layer's step is its forward and its twice-as-long backward") {
  const Prediction p = predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), Efficiencies{});
  CHECK(p.step_s == doctest::Approx(3 * kForward).epsilon(kEps));  // 22.069248 us
  REQUIRE(p.stage_forward_s.size() == 1);
  CHECK(p.stage_forward_s[0] == doctest::Approx(kForward).epsilon(kEps));
  CHECK(p.stage_backward_s[0] == doctest::Approx(2 * kForward).epsilon(kEps));
  double sum = 0;
  for (const PredictedPhase& ph : p.phases) {
    sum += ph.time_s;
    if (ph.name == "attention") CHECK(ph.time_s == doctest::Approx(3 * kNorm).epsilon(kEps));
    if (ph.name == "dense_mlp") {
      CHECK(ph.time_s == doctest::Approx(3 * (kGemm + kMlpElementwise)).epsilon(kEps));
    }
    if (ph.name == "pp_bubble" || ph.name == "grad_reduce") CHECK(ph.time_s == 0.0);
  }
  CHECK(sum == doctest::Approx(p.step_s).epsilon(kEps));  // the phases add up to the step
  // Half the efficiency doubles the GEMMs' share only.
  Efficiencies half;
  half.dense_gemm = 0.5;
  const Prediction slow = predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), half);
  CHECK(slow.step_s == doctest::Approx(3 * (kForward + kGemm)).epsilon(kEps));
}

TEST_CASE("predict: two equal stages in 1F1B take (m + P - 1) passes of forward and backward") {
  // pp 2, one layer a stage, 4 micro-batches (global batch 4, dp 1): (4 + 1) x 3 x 7.356416 us,
  // and the first stage waits (P - 1) / (m + P - 1) = 1/5 of it.
  const Prediction p = predict_step(dense_slice(2, 2, 2, 4), toy_hardware(), Efficiencies{});
  CHECK(p.step_s == doctest::Approx(5 * 3 * kForward).epsilon(kEps));
  CHECK(p.bubble_fraction == doctest::Approx(0.2).epsilon(1e-9));
  REQUIRE(p.rank_phases.size() == 2);
}

TEST_CASE("predict: ZeRO-1's all-gather hides behind the first forward only where overlapped") {
  // One layer, dp 2 (world 2, global batch 2: one micro-batch a rank), ZeRO-1, --overlap on, over
  // a 1 GB/s link: the reduce-scatter and the all-gather each take far longer than the passes.
  // The reduction starts with the backward (at kForward) and outlasts the rank's end (3 kForward)
  // by reduce - 2 kForward; moebench's step then waits for the whole all-gather, a trainer that
  // overlaps it (Megatron's overlap_param_gather) for all of it but the first forward.
  RunConfig c = dense_slice(1, 1, 2, 2);
  c.grad_reduce = GradReduce::reduce_scatter;
  c.overlap = true;
  Hardware hw = toy_hardware();
  hw.scale_out = LinkCost{0, 1e9};
  const Prediction own = predict_step(c, hw, Efficiencies{});
  REQUIRE(own.grad_reduce_s > 3 * kForward);
  REQUIRE(own.param_gather_s > kForward);
  CHECK(phase_time(own, "grad_reduce") ==
        doctest::Approx(own.grad_reduce_s - 2 * kForward + own.param_gather_s).epsilon(kEps));
  TrainerRules megatron;
  megatron.param_gather_overlap = true;
  const Prediction overlapped = predict_step(c, hw, Efficiencies{}, megatron);
  CHECK(phase_time(overlapped, "grad_reduce") ==
        doctest::Approx(phase_time(own, "grad_reduce") - kForward).epsilon(kEps));
}

TEST_CASE("predict: only moebench's step hides the all-to-alls behind the shared expert") {
  // One MoE layer (no dense one), EP 2 over 2 ranks, --overlap on, over a 1 GB/s link: each
  // exchange outlasts the shared expert and the router. moebench's step hides part of the
  // dispatch behind the shared expert (and the reverses behind its and the router's backward); a
  // recipe's trainer without the all-to-all overlap (Megatron's moe_shared_expert_overlap off)
  // waits for each exchange whole: dispatch and combine each the layer's two exchanges, forward
  // and backward, as priced before any overlap.
  RunConfig c = dense_slice(1, 1, 2, 2);
  c.workload.dense_layers = 0;
  c.layout.ep = 2;
  c.overlap = true;
  Hardware hw = toy_hardware();
  hw.scale_out = LinkCost{0, 1e9};
  const Prediction own = predict_step(c, hw, Efficiencies{});
  REQUIRE(own.alltoall_s > 0);
  CHECK(phase_time(own, "dispatch") < own.alltoall_s);
  CHECK(phase_time(own, "combine") < own.alltoall_s);
  TrainerRules megatron;
  megatron.shared_expert_overlap = false;
  const Prediction exposed = predict_step(c, hw, Efficiencies{}, megatron);
  CHECK(phase_time(exposed, "dispatch") == doctest::Approx(exposed.alltoall_s).epsilon(kEps));
  CHECK(phase_time(exposed, "combine") == doctest::Approx(exposed.alltoall_s).epsilon(kEps));
  CHECK(exposed.step_s > own.step_s);
}

TEST_CASE("predict: a calibration scales its phases and adds the measured waiting") {
  Calibration cal;
  cal.phase_scale["dense_mlp"] = 2.0;
  cal.wait_fraction = 0.5;
  const Prediction p =
      predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), Efficiencies{}, {}, &cal);
  // (3 x 0.16384 + 2 x 3 x (6.291456 + 0.90112)) us, then half of it again waiting.
  const double passes = 3 * kNorm + 2 * 3 * (kGemm + kMlpElementwise);
  CHECK(p.step_s == doctest::Approx(1.5 * passes).epsilon(kEps));
  CHECK(p.calibrated);
}

TEST_CASE("predict: softmax's exponentials bound core attention where the SFUs are slower") {
  // The layer with attention: its core attention's forward FLOPs F (the accounting's count, 8
  // tokens), one exponential per 2 (qk + v) of them, the MMAs at 1e12 FLOP/s.
  RunConfig c = dense_slice(1, 1, 1, 1);
  c.workload.attention = true;
  const double f = core_attention_flops_per_token(c.model, 8) / 3.0 * 8;
  const double per_exp = 2.0 * static_cast<double>(c.model.qk_head_dim() + c.model.v_head_dim);
  Hardware hw = toy_hardware();
  const Prediction mma = predict_step(c, hw, Efficiencies{});
  // SFUs at a quarter of 1e12 / per_exp: each pass's exponentials take 4 F / 1e12, the forward's
  // in place of its F of MMAs (+3 F), the backward's in place of its 2 F (+2 F): 5 F more.
  hw.exp_per_s = 1e12 / per_exp / 4;
  CHECK(predict_step(c, hw, Efficiencies{}).step_s - mma.step_s ==
        doctest::Approx(5 * f / 1e12).epsilon(1e-9));
  // SFUs twice as fast (the exponentials take F / 2): the MMAs bound both passes, nothing changes.
  hw.exp_per_s = 1e12 / per_exp * 2;
  CHECK(predict_step(c, hw, Efficiencies{}).step_s == doctest::Approx(mma.step_s).epsilon(kEps));
}

TEST_CASE("predict: a trainer's host gaps lengthen each pass's compute by its figure") {
  // Partial CUDA graphs at 0.1: the one layer's passes, 3 x 7.356416 us, take 1.1 x as long;
  // none at 0.25: 1.25 x; the whole step in graphs (HostGaps::none): as without.
  Efficiencies e;
  e.host_overhead_partial_graphs = 0.1;
  e.host_overhead_no_graphs = 0.25;
  TrainerRules rules;
  CHECK(predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), e, rules).step_s ==
        doctest::Approx(3 * kForward).epsilon(kEps));
  rules.host_gaps = HostGaps::partial_graphs;
  const Prediction partial = predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), e, rules);
  CHECK(partial.step_s == doctest::Approx(1.1 * 3 * kForward).epsilon(kEps));
  CHECK(partial.stage_backward_s[0] == doctest::Approx(1.1 * 2 * kForward).epsilon(kEps));
  rules.host_gaps = HostGaps::no_graphs;
  CHECK(predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), e, rules).step_s ==
        doctest::Approx(1.25 * 3 * kForward).epsilon(kEps));
  CHECK(host_overhead(e, HostGaps::none) == 0.0);
  // A figure of 1 or more (the host doubling every pass) is refused, as a negative one is.
  e.host_overhead_no_graphs = 1.0;
  CHECK_THROWS_AS(predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), e, rules), UsageError);
  e.host_overhead_no_graphs = -0.1;
  CHECK_THROWS_AS(predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), e, rules), UsageError);
}

TEST_CASE("predict: an offloaded expert input costs only where its copies outlast the layer") {
  // One MoE layer, EP 1 (no exchange), one micro-batch of 8 tokens: its experts receive 8 x 4
  // rows (top-4) of 256 FP32 elements, 32,768 bytes copied out after the forward and back
  // before the backward, each under that pass's compute.
  RunConfig c = dense_slice(1, 1, 1, 1);
  c.workload.dense_layers = 0;
  Hardware hw = toy_hardware();
  const Prediction plain = predict_step(c, hw, Efficiencies{});
  TrainerRules rules;
  rules.offload_expert_fc1 = true;
  // No host link figure: not priced, nothing changes.
  const Prediction unpriced = predict_step(c, hw, Efficiencies{}, rules);
  CHECK_FALSE(unpriced.offload.priced);
  CHECK(unpriced.step_s == doctest::Approx(plain.step_s).epsilon(kEps));
  // A fast link: priced, hidden.
  hw.host_link_bandwidth = 1e15;
  const Prediction hidden = predict_step(c, hw, Efficiencies{}, rules);
  REQUIRE(hidden.offload.priced);
  CHECK(hidden.offload.bytes == 32768.0);
  CHECK(hidden.offload.copy_s == doctest::Approx(32768.0 / 1e15).epsilon(kEps));
  CHECK(hidden.offload_exposed_s == 0.0);
  CHECK(hidden.step_s == doctest::Approx(plain.step_s).epsilon(kEps));
  // The layer's passes are its stage's (no exchange, no model ends); the backward is longer.
  const double f = hidden.offload.layer_forward_s, b = hidden.offload.layer_backward_s;
  CHECK(f == doctest::Approx(plain.stage_forward_s[0]).epsilon(kEps));
  CHECK(b == doctest::Approx(plain.stage_backward_s[0]).epsilon(kEps));
  REQUIRE(b > 1.5 * f);
  // A copy of 1.5 forwards: the copy out exposes half a forward, the copy back none. (Differences
  // of two steps of a few us each: 1e-9 relative covers the cancellation.)
  hw.host_link_bandwidth = 32768.0 / (1.5 * f);
  const Prediction half = predict_step(c, hw, Efficiencies{}, rules);
  CHECK(half.offload_exposed_s == doctest::Approx(0.5 * f).epsilon(1e-9));
  CHECK(half.step_s - plain.step_s == doctest::Approx(0.5 * f).epsilon(1e-9));
  CHECK(phase_time(half, "experts") - phase_time(plain, "experts") ==
        doctest::Approx(0.5 * f).epsilon(1e-9));
  // With host gaps of 0.1 the forward the copy hides under is 1.1 f: 0.4 f exposed, a wait the
  // gaps do not lengthen.
  Efficiencies gaps;
  gaps.host_overhead_partial_graphs = 0.1;
  TrainerRules partial = rules;
  partial.host_gaps = HostGaps::partial_graphs;
  TrainerRules partial_plain;
  partial_plain.host_gaps = HostGaps::partial_graphs;
  const Prediction slowed = predict_step(c, hw, gaps, partial);
  CHECK(slowed.offload.layer_forward_s == doctest::Approx(1.1 * f).epsilon(kEps));
  CHECK(slowed.offload_exposed_s == doctest::Approx(0.4 * f).epsilon(1e-9));
  CHECK(slowed.step_s - predict_step(c, hw, gaps, partial_plain).step_s ==
        doctest::Approx(0.4 * f).epsilon(1e-9));
  // A copy of 2 backwards: both exposed, 2 b - f and b.
  hw.host_link_bandwidth = 32768.0 / (2 * b);
  CHECK(predict_step(c, hw, Efficiencies{}, rules).step_s - plain.step_s ==
        doctest::Approx(3 * b - f).epsilon(1e-9));
  // As the backward keeps the input in FP8: one byte an element, and one E8M0 scale per 32 with
  // MXFP8 (32 x 256 x 33 / 32 = 8,448 bytes).
  hw.host_link_bandwidth = 1e15;
  c.precision = Precision::fp8;
  CHECK(predict_step(c, hw, Efficiencies{}, rules).offload.bytes == 8192.0);
  c.fp8_recipe = Fp8Recipe::mxfp8;
  CHECK(predict_step(c, hw, Efficiencies{}, rules).offload.bytes == 8448.0);
}

TEST_CASE("predict: the grouped GEMM reaches half its efficiency at the half-rows") {
  Efficiencies e;
  e.grouped_gemm = 0.66;
  e.grouped_gemm_half_rows = 128;
  CHECK(grouped_gemm_efficiency(e, 128) == doctest::Approx(0.33).epsilon(kEps));
  CHECK(grouped_gemm_efficiency(e, 1152) == doctest::Approx(0.66 * 0.9).epsilon(kEps));
  Efficiencies bad;
  bad.attention = 0;
  CHECK_THROWS_AS(predict_step(dense_slice(1, 1, 1, 1), toy_hardware(), bad), UsageError);
  Hardware none = toy_hardware();
  none.gemm_flops = 0;
  CHECK_THROWS_AS(predict_step(dense_slice(1, 1, 1, 1), none, Efficiencies{}), UsageError);
}

}  // namespace
}  // namespace moebench
