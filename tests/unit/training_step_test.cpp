// TrainingStep on one process (world 1, EP 1): its gradients against central finite differences
// of the step's own loss, its wiring against a hand-built layer stack, repeatability, the ZeRO-1
// and AdamW paths, the accounting it reports, the corrupt-dispatch hook, and gradient accumulation
// over micro-batches.
//
// The step's loss is L = sum(dY .* Y), Y its output and dY the seeded output gradient its backward
// starts from. dY and the input X are private, but the header documents them as pure functions of
// (seed, global sequence index); the test regenerates them with the streams of
// training_step.cpp, and the stack test below proves the regeneration right (the same X gives the
// step's output, the same dY its input gradient), so the finite differences test the real step.
#include "workloads/step/training_step.hpp"

#include <doctest/doctest.h>

#include "harness/backends/fault/fault_communicator.hpp"
#include "harness/measure/stats.hpp"
#include "tests/unit/layer_fixture.hpp"

namespace moebench {
namespace {

using namespace layer_test;

// training_step.cpp's streams: 2s for the input of sequence s, 2s + 1 for its output gradient.
Tensor step_data(Harness& hx, bool output_grad) {
  const std::int64_t seq = hx.config.workload.seq_len;
  Tensor t = hx.compute->alloc(hx.tokens(), hx.hidden());
  for (std::int64_t b = 0; b < hx.config.workload.micro_batch; ++b) {
    const std::uint64_t s = static_cast<std::uint64_t>(b);
    hx.compute->fill_random(t.view().row_slice(b * seq, seq), hx.config.seed,
                            mix64((1ULL << 62) + 2 * s + (output_grad ? 1 : 0)), 1.0f);
  }
  return t;
}

Vec reduced(Harness& hx, const TrainingStep& step, ParamGroup g) {
  return hx.read(step.reduced_grads(g).row_slice(0, step.params().numel(g)));
}

// Results of one step may differ from another computation of the same values only by rounding:
// the same kernels on the same shapes give identical bits, so 1e-6 relative to the tensor's
// largest value is generous and far below any wiring mistake (an O(1) change).
void check_close(const Vec& got, const Vec& want, const char* what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  const double tol = 1e-6 * std::max(1.0f, max_abs_of(want));
  long long bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += std::abs(got[i] - want[i]) > tol ? 1 : 0;
  CHECK(bad == 0);
}

// A step run once on one process, from its config.
struct RanStep {
  explicit RanStep(const RunConfig& c) : hx(c), step(hx.config, hx.topo, *hx.compute, *hx.comm) {
    step.initialize();
    step.run();
  }
  Harness hx;
  TrainingStep step;
};

// Gradients summed over micro-batches in a different order than one GEMM sums them: 1e-5 of the
// largest value (FP32 sums of a few hundred terms differ by far less).
void check_accumulated(Harness& hb, const TrainingStep& b, Harness& ha, const TrainingStep& a) {
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    const Vec got = reduced(hb, b, g), want = reduced(ha, a, g);
    REQUIRE(got.size() == want.size());
    const double tol = 1e-5 * std::max(1.0f, max_abs_of(want));
    long long bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) bad += std::abs(got[i] - want[i]) > tol ? 1 : 0;
    CHECK(bad == 0);
  }
}

TEST_CASE("TrainingStep equals the layer stack run by hand from the documented input and dY") {
  Harness hx(tiny_run(2, 1));
  TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
  step.initialize();
  step.run();

  // By hand: forward through both layers, backward from dY, with the harness's own parameters
  // (initialised from the same seed).
  const std::int64_t n = hx.tokens(), h = hx.hidden();
  std::vector<TransformerLayer> layers;
  for (int l = 0; l < 2; ++l) layers.emplace_back(l);
  std::vector<Tensor> acts = {step_data(hx, false), hx.compute->alloc(n, h),
                              hx.compute->alloc(n, h)};
  for (int l = 0; l < 2; ++l) layers[l].forward(hx.ctx, acts[l], acts[l + 1]);
  hx.params.zero_grads();
  Tensor dy = step_data(hx, true), d1 = hx.compute->alloc(n, h), d0 = hx.compute->alloc(n, h);
  layers[1].backward(hx.ctx, dy, d1);
  layers[0].backward(hx.ctx, d1, d0);

  check_close(hx.read(step.output()), hx.read(acts[2]), "output");
  check_close(hx.read(step.input_grad()), hx.read(d0), "input_grad");
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    CHECK(step.reduced_grads_offset(g) == 0);
    check_close(reduced(hx, step, g),
                hx.read(hx.params.flat_grads(g).row_slice(0, hx.params.numel(g))),
                g == ParamGroup::dense ? "dense grads" : "expert grads");
  }
  CHECK(step.tokens() == 12);
}

TEST_CASE("TrainingStep gradients match finite differences of sum(dY .* output)") {
  Harness hx(tiny_run(2, 1));
  TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
  step.initialize();
  step.run();
  const Vec dy = hx.read(step_data(hx, true));
  auto loss = [&] {
    step.run();
    return dot(dy, hx.read(step.output()));
  };
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    const std::int64_t numel = step.params().numel(g);
    const Vec grads = reduced(hx, step, g);
    check_fd(hx, g == ParamGroup::dense ? "dense params" : "expert params",
             step.params().flat_params(g).row_slice(0, numel), grads, loss, 40);
  }
}

TEST_CASE("TrainingStep repeats: a second run gives the same output and gradients") {
  // Catches gradients that accumulate across steps (the norms' weight gradients add up) and
  // scratch state that leaks from one step into the next.
  Harness hx(tiny_run(2, 1));
  TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
  step.initialize();
  step.run();
  const Vec out = hx.read(step.output()), dx = hx.read(step.input_grad());
  const Vec gd = reduced(hx, step, ParamGroup::dense), ge = reduced(hx, step, ParamGroup::expert);
  step.run();
  CHECK(hx.read(step.output()) == out);
  CHECK(hx.read(step.input_grad()) == dx);
  CHECK(reduced(hx, step, ParamGroup::dense) == gd);
  CHECK(reduced(hx, step, ParamGroup::expert) == ge);
}

TEST_CASE("TrainingStep reports times, FLOPs and the gradient reduction's bytes") {
  Harness hx(tiny_run(2, 1));
  TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
  step.initialize();
  const StepSample s = step.run();
  auto at = [](Phase p) { return static_cast<std::size_t>(p); };
  CHECK(s.step_time_s > 0);
  double phases = 0;
  for (double t : s.time_s) phases += t;
  // Phases are disjoint intervals inside the step.
  CHECK(phases <= s.step_time_s);
  for (Phase p :
       {Phase::attention, Phase::dense_mlp, Phase::router, Phase::experts, Phase::shared_expert}) {
    INFO(phase_name(p));
    CHECK(s.time_s[at(p)] > 0);
    CHECK(s.flops[at(p)] > 0);
  }
  // One all-reduce per group of its whole padded buffer (FP32), in a group of 1.
  const double bytes = 4.0 * static_cast<double>(step.params().padded_numel(ParamGroup::dense) +
                                                 step.params().padded_numel(ParamGroup::expert));
  CHECK(s.bytes[at(Phase::grad_reduce)] == bytes);
  CHECK(s.bus_bytes[at(Phase::grad_reduce)] ==
        bytes * bus_bandwidth_factor(CollectiveKind::allreduce, 1));
  CHECK(s.group_size[at(Phase::grad_reduce)] == 1);
  CHECK(s.time_s[at(Phase::optimizer)] > 0);  // zero_grad, even without an optimiser
}

TEST_CASE("TrainingStep with ZeRO-1 on one rank: the shard is the whole reduced buffer") {
  RunConfig c = tiny_run(2, 1);
  c.grad_reduce = GradReduce::reduce_scatter;
  Harness hx(c);
  TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
  step.initialize();
  step.run();
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    CHECK(step.reduced_grads_offset(g) == 0);
    CHECK(step.reduced_grads(g).rows == step.params().padded_numel(g));
    CHECK(hx.read(step.reduced_grads(g)) == hx.read(step.params().flat_grads(g)));
  }
}

TEST_CASE("TrainingStep with AdamW: the first update is lr x (g / |g| + weight decay x p)") {
  // With zeroed moments, step 1's bias-corrected m / sqrt(v) is g / |g| (eps is 1e-8), for both
  // the all-reduce and the ZeRO-1 path (its shard update is all-gathered back).
  for (GradReduce reduce : {GradReduce::allreduce, GradReduce::reduce_scatter}) {
    CAPTURE(static_cast<int>(reduce));
    RunConfig c = tiny_run(2, 1);
    c.optimizer = Optimizer::adamw;
    c.grad_reduce = reduce;
    c.adamw.lr = 1e-2;
    c.adamw.weight_decay = 0.1;
    Harness hx(c);
    TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
    step.initialize();
    step.run();
    for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
      const Vec before = hx.read(hx.params.flat_params(g));  // the harness holds the initial ones
      const Vec after = hx.read(step.params().flat_params(g));
      const Vec grads = hx.read(step.params().flat_grads(g));
      REQUIRE(before.size() == after.size());
      long long bad = 0;
      for (std::size_t i = 0; i < before.size(); ++i) {
        const double p = before[i], gr = grads[i];
        const double want = p - 1e-2 * (gr / (std::abs(gr) + 1e-8) + 0.1 * p);
        // FP32 update of size ~1e-2 on O(1) values: rounding ~1e-7; a missing or doubled
        // update is >= 1e-3 off.
        bad += std::abs(after[i] - want) > 2e-6 ? 1 : 0;
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("A corrupted dispatch injected by the fault communicator changes that step only") {
  Harness hx(tiny_run(2, 1));  // no optimizer: every clean step computes the same output
  FaultSpec spec;
  spec.rank = 0;
  spec.step = 1;
  auto faulty = make_fault_communicator(std::move(hx.comm), *hx.compute, spec);
  TrainingStep step(hx.config, hx.topo, *hx.compute, *faulty);
  step.initialize();
  step.run();
  const Vec clean = hx.read(step.output());
  step.run();
  CHECK(hx.read(step.output()) != clean);
  step.run();
  CHECK(hx.read(step.output()) == clean);
}

TEST_CASE("TrainingStep computes the same step with --overlap on and off") {
  // Overlap reorders work between streams, never the arithmetic: dxn sums its three terms in the
  // same order either way, so the results agree to rounding (check_close).
  for (GradReduce reduce : {GradReduce::allreduce, GradReduce::reduce_scatter}) {
    CAPTURE(static_cast<int>(reduce));
    std::vector<Vec> results[2];
    for (bool overlap : {false, true}) {
      RunConfig c = tiny_run(2, 0, {RoutingMode::zipf, 1.2});
      c.overlap = overlap;
      c.grad_reduce = reduce;
      c.grad_bucket_bytes = 0;
      Harness hx(c);
      TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
      step.initialize();
      step.run();
      results[overlap] = {hx.read(step.output()), hx.read(step.input_grad()),
                          reduced(hx, step, ParamGroup::dense),
                          reduced(hx, step, ParamGroup::expert)};
    }
    const char* names[] = {"output", "input_grad", "dense grads", "expert grads"};
    for (int i = 0; i < 4; ++i) check_close(results[1][i], results[0][i], names[i]);
  }
}

TEST_CASE("TrainingStep buckets: per layer with --overlap on, per group off or with ZeRO-1") {
  struct Case {
    bool overlap;
    GradReduce reduce;
    std::int64_t bucket_bytes;
    std::size_t buckets;
  };
  // 2 layers, 1 dense: dense parameters in 2 layers, experts in 1.
  for (const Case& k :
       {Case{true, GradReduce::allreduce, 0, 3},
        Case{true, GradReduce::allreduce, std::int64_t{1} << 30, 2},
        Case{false, GradReduce::allreduce, 0, 2}, Case{true, GradReduce::reduce_scatter, 0, 2}}) {
    CAPTURE(k.overlap);
    CAPTURE(k.bucket_bytes);
    RunConfig c = tiny_run(2, 1);
    c.overlap = k.overlap;
    c.grad_reduce = k.reduce;
    c.grad_bucket_bytes = k.bucket_bytes;
    Harness hx(c);
    TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
    CHECK(step.grad_buckets().size() == k.buckets);
    step.initialize();
    const StepSample s = step.run();
    // Whatever the buckets, they reduce each whole padded buffer once (FP32).
    const double bytes = 4.0 * static_cast<double>(step.params().padded_numel(ParamGroup::dense) +
                                                   step.params().padded_numel(ParamGroup::expert));
    CHECK(s.bytes[static_cast<std::size_t>(Phase::grad_reduce)] == bytes);
  }
}

TEST_CASE("TrainingStep records the collectives' busy time inside their phases' time") {
  // On a host backend the host does the communication: every start and wait runs inside a scope
  // of its phase, and busy time is host time inside those calls (and the counts exchange), on
  // the same steady clock, so a phase's time is at least its busy time, exactly.
  for (bool overlap : {false, true}) {
    CAPTURE(overlap);
    RunConfig c = tiny_run(2, 1);
    c.overlap = overlap;
    c.optimizer = Optimizer::adamw;
    c.grad_reduce = GradReduce::reduce_scatter;  // the all-gather is a grad_reduce collective too
    Harness hx(c);
    TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
    step.initialize();
    for (int i = 0; i < 2; ++i) {  // the second step starts from cleared requests and marks
      const StepSample s = step.run();
      for (Phase p : {Phase::dispatch, Phase::combine, Phase::grad_reduce}) {
        INFO(phase_name(p));
        const auto i_p = static_cast<std::size_t>(p);
        CHECK(s.busy_s[i_p] > 0);
        CHECK(s.time_s[i_p] >= s.busy_s[i_p]);
      }
      for (Phase p : {Phase::attention, Phase::experts, Phase::shared_expert}) {
        CHECK(s.busy_s[static_cast<std::size_t>(p)] == 0);
      }
    }
  }
}

TEST_CASE("TrainingStep accumulates micro-batches: four of one sequence equal one of four") {
  // The same four sequences as one micro-batch of 4 (global batch 4) and as 4 micro-batches of 1:
  // the summed gradients and every sequence's output and input gradient agree. A gradient
  // overwritten instead of accumulated, a micro-batch skipped or run twice, or the wrong sequence
  // in a micro-batch is an O(1) difference; the only legitimate one is summation order.
  RunConfig one = tiny_run(2, 1);
  one.workload.micro_batch = 4;
  RanStep ra(one);
  Harness& ha = ra.hx;
  const TrainingStep& a = ra.step;
  CHECK(a.microbatches() == 1);

  RunConfig four = tiny_run(2, 1);
  four.workload.micro_batch = 1;
  four.workload.global_batch = 4;
  RanStep rb(four);
  Harness& hb = rb.hx;
  const TrainingStep& b = rb.step;
  CHECK(b.microbatches() == 4);
  for (int mb = 0; mb < 4; ++mb) CHECK(b.first_sequence(mb) == mb);

  // Rows: micro-batch mb of b holds sequence mb, row block mb of a.
  check_close(hb.read(b.output()), ha.read(a.output()), "outputs");
  check_close(hb.read(b.input_grad()), ha.read(a.input_grad()), "input gradients");
  check_accumulated(hb, b, ha, a);
}

// --head on: the step's objective is J = sum over tokens of (main loss + kMtpLossScale / mtp x
// the MTP losses) / the micro-batch's tokens, whose gradient the step computes from the losses
// (not from a seeded dY).
RunConfig head_run() {
  RunConfig c = tiny_run(2, 1);
  c.model.num_nextn_predict_layers = 1;
  c.workload.head = true;
  c.workload.mtp = 1;
  return c;
}

double step_objective(Harness& hx, const TrainingStep& step) {
  const Vec l = hx.read(step.output());
  const double scale = 1.0 / static_cast<double>(step.tokens());
  double j = 0.0;
  for (std::size_t i = 0; i < l.size(); i += 2) j += scale * (l[i] + kMtpLossScale * l[i + 1]);
  return j;
}

TEST_CASE(
    "TrainingStep with the embedding, head, loss and MTP: gradients match finite differences") {
  Harness hx(head_run());
  TrainingStep step(hx.config, hx.topo, *hx.compute, *hx.comm);
  step.initialize();
  CHECK(step.holds_first_stage());
  CHECK(step.input_grad().numel() == 0);  // the input gradient is the embedding's, a parameter
  REQUIRE(step.output().cols == 2);       // main and MTP loss per token
  step.run();
  const ParamStore& p = step.params();
  struct Grad {
    int layer;
    ParamKind kind;
    Vec g;
  };
  const Workload& w = hx.config.workload;
  std::vector<Grad> grads;
  for (auto [layer, kind] :
       std::vector<std::pair<int, ParamKind>>{{kEmbeddingLayer, ParamKind::embedding},
                                              {0, ParamKind::wq_a},
                                              {1, ParamKind::router},
                                              {final_norm_layer(w), ParamKind::final_norm},
                                              {mtp_layer(w, 0), ParamKind::mtp_eh_proj},
                                              {output_head_layer(w), ParamKind::output_head}}) {
    grads.push_back({layer, kind, hx.read(p.grad(layer, kind))});
  }
  auto loss = [&] {
    step.run();
    return step_objective(hx, step);
  };
  for (const Grad& g : grads) {
    check_fd(hx, param_kind_name(g.kind), p.param(g.layer, g.kind), g.g, loss, 12);
  }
}

TEST_CASE("TrainingStep with the head accumulates: four micro-batches of one equal one of four") {
  // The loss of each micro-batch is its tokens' mean; one micro-batch of 4 with the loss averaged
  // over 1 sequence's tokens (as the --verify reference keeps the run's) is the same sum.
  RunConfig one = head_run();
  one.workload.micro_batch = 4;
  one.loss_micro_batch = 1;
  RanStep a(one);
  RunConfig four = head_run();
  four.workload.micro_batch = 1;
  four.workload.global_batch = 4;
  RanStep b(four);
  check_close(b.hx.read(b.step.output()), a.hx.read(a.step.output()), "losses");
  check_accumulated(b.hx, b.step, a.hx, a.step);
  // Without the kept normalisation the reference would average over 4 sequences: a 4x gradient.
  RunConfig wrong = one;
  wrong.loss_micro_batch = 0;
  RanStep c(wrong);
  const Vec cw = reduced(c.hx, c.step, ParamGroup::dense);
  const Vec aw = reduced(a.hx, a.step, ParamGroup::dense);
  CHECK(max_abs_of(cw) == doctest::Approx(max_abs_of(aw) / 4).epsilon(1e-4));
}

}  // namespace
}  // namespace moebench
