#include "harness/scaling/scaling.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "harness/core/error.hpp"
#include "tests/unit/scaling_fixture.hpp"

using namespace moebench;
using moebench::testing::scaling_point;
using moebench::testing::set_key;

namespace {

std::string usage_message(const std::vector<RunPoint>& runs, const ScalingOptions& o = {}) {
  try {
    compute_scaling(runs, o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const Verdict* find_verdict(const ScalingResult& r, const std::string& name, int gpus) {
  for (const Verdict& v : r.verdicts) {
    if (v.name == name && v.gpus == gpus) return &v;
  }
  return nullptr;
}

}  // namespace

// Tolerances: the inputs are exact binary fractions or short decimal ratios; 1e-12 relative
// covers the rounding of one division.
TEST_CASE("weak scaling: efficiency is the per-GPU throughput ratio to the smallest size") {
  const auto r =
      compute_scaling({scaling_point(1, 10), scaling_point(2, 9), scaling_point(4, 8)}, {});
  CHECK(r.mode == ScalingMode::weak);
  CHECK(r.baseline_gpus == 1);
  REQUIRE(r.sizes.size() == 3);
  CHECK(r.sizes[1].efficiency == doctest::Approx(0.9).epsilon(1e-12));
  CHECK(r.sizes[2].efficiency == doctest::Approx(0.8).epsilon(1e-12));
  CHECK(r.sizes[2].speedup == doctest::Approx(3.2).epsilon(1e-12));
  CHECK(r.sizes[2].exposed_share == doctest::Approx(0.2).epsilon(1e-12));
  // time-weighted all-to-all busbw: dispatch and combine took equal time at 10 and 20 GB/s
  CHECK(r.sizes[2].alltoall_busbw == doctest::Approx(15e9).epsilon(1e-12));
  CHECK(r.verdicts.size() == 3);  // one verification verdict per size, all passing
  CHECK(r.passed());
  CHECK(r.warnings.empty());
}

TEST_CASE("strong scaling is detected from a fixed global batch; efficiency = speedup / GPUs") {
  std::vector<RunPoint> runs;
  const double step[] = {1.0, 0.55, 0.3};
  const int gpus[] = {1, 2, 4};
  for (int i = 0; i < 3; ++i) {
    RunPoint p = scaling_point(gpus[i], 1.0 / step[i]);
    p.tokens_per_rank = 512.0 / gpus[i];
    p.global_tokens = 512;
    set_key(p, "config.workload.micro_batch", std::to_string(4 / gpus[i]));
    runs.push_back(p);
  }
  CHECK(contains(usage_message(runs),
                 "per-GPU work differs: config.workload.micro_batch is 4 in "
                 "run-1.json (1 GPU) but 2 in run-2.json (2 GPUs)"));
  CHECK(contains(usage_message(runs), "--allow-mixed micro_batch"));
  ScalingOptions o;
  o.allow_mixed = {"micro_batch"};
  const auto r = compute_scaling(runs, o);
  CHECK(r.mode == ScalingMode::strong);
  CHECK(r.sizes[1].speedup == doctest::Approx(1.0 / 0.55).epsilon(1e-12));
  CHECK(r.sizes[1].efficiency == doctest::Approx(1.0 / 0.55 / 2).epsilon(1e-12));
  CHECK(r.sizes[2].efficiency == doctest::Approx(1.0 / 0.3 / 4).epsilon(1e-12));
  CHECK(r.mixed_fields == std::vector<std::string>{"config.workload.micro_batch"});
}

TEST_CASE("mixed scaling when neither the per-GPU nor the global work is fixed") {
  RunPoint a = scaling_point(1, 10), b = scaling_point(2, 9);
  b.tokens_per_rank = 256;
  b.global_tokens = 512;
  set_key(b, "config.workload.seq_len", "256");
  ScalingOptions o;
  o.allow_mixed = {"seq_len"};
  const auto r = compute_scaling({a, b}, o);
  CHECK(r.mode == ScalingMode::mixed);
  CHECK(r.sizes[1].efficiency == doctest::Approx(0.9).epsilon(1e-12));
}

TEST_CASE("repeats of one size are combined by their median, with the spread kept") {
  RunPoint x = scaling_point(2, 10, "a.json"), y = scaling_point(2, 8, "b.json");
  const auto r = compute_scaling({scaling_point(1, 10), x, y}, {});
  REQUIRE(r.sizes.size() == 2);
  const SizeResult& s = r.sizes[1];
  CHECK(s.runs.size() == 2);
  CHECK(s.tflops_per_gpu.median == doctest::Approx(9).epsilon(1e-12));
  CHECK(s.tflops_per_gpu.min == 8);
  CHECK(s.step_time_s.median == doctest::Approx((0.1 + 0.125) / 2).epsilon(1e-12));
  CHECK(s.step_time_s.relative() == doctest::Approx(0.025 / 0.1125).epsilon(1e-12));
  CHECK(s.efficiency == doctest::Approx(0.9).epsilon(1e-12));
}

TEST_CASE("--baseline picks the size efficiencies are relative to") {
  ScalingOptions o;
  o.baseline_gpus = 2;
  const auto r =
      compute_scaling({scaling_point(1, 10), scaling_point(2, 8), scaling_point(4, 6)}, o);
  CHECK(r.sizes[0].efficiency == doctest::Approx(1.25).epsilon(1e-12));
  CHECK(r.sizes[2].efficiency == doctest::Approx(0.75).epsilon(1e-12));
  o.baseline_gpus = 3;
  CHECK(contains(usage_message({scaling_point(1, 10), scaling_point(2, 8)}, o),
                 "--baseline 3: no run at that GPU count (sizes: 1, 2)"));
}

TEST_CASE("runs that cannot be compared are usage errors naming the field and the files") {
  CHECK(contains(usage_message({scaling_point(1, 10)}),
                 "needs runs at two or more GPU counts; got 1 run"));
  CHECK(contains(usage_message({scaling_point(2, 10, "a"), scaling_point(2, 9, "b")}),
                 "got 2 runs, all at 2 GPUs"));
  RunPoint other = scaling_point(2, 9);
  set_key(other, "config.model.hidden_size", "512");
  CHECK(contains(usage_message({scaling_point(1, 10), other}),
                 "runs of different workloads: config.model.hidden_size is 256 in run-1.json "
                 "(1 GPU) but 512 in run-2.json (2 GPUs)"));
  RunPoint ep = scaling_point(2, 9);
  set_key(ep, "parallel.ep", "2");
  CHECK(contains(usage_message({scaling_point(1, 10), ep}), "expert parallelism differs"));
  ScalingOptions o;
  o.allow_mixed = {"ep"};
  CHECK(compute_scaling({scaling_point(1, 10), ep}, o).mixed_fields.size() == 1);
  // --allow-mixed does not let repeats of one size differ
  RunPoint ep4 = scaling_point(2, 9, "c.json");
  set_key(ep4, "parallel.ep", "1");
  CHECK(contains(usage_message({ep, ep4, scaling_point(1, 10)}, o), "repeats of one size differ"));
  o.allow_mixed = {"routing"};
  CHECK(contains(usage_message({scaling_point(1, 10), scaling_point(2, 9)}, o),
                 "--allow-mixed routing: expected seq_len, micro_batch or ep"));
  ScalingOptions bad;
  bad.min_tflops = -1;
  CHECK(contains(usage_message({scaling_point(1, 10), scaling_point(2, 9)}, bad),
                 "--min-tflops -1: must be a number > 0"));
}

TEST_CASE("verdicts: thresholds pass and fail with their margins; claims judge the largest size") {
  ScalingOptions o;
  o.min_tflops = 8.5;
  o.claim_tflops = 8;
  o.claim_efficiency = 0.85;
  o.min_efficiency = 0.85;
  const auto r =
      compute_scaling({scaling_point(1, 10), scaling_point(2, 9), scaling_point(4, 8)}, o);
  const Verdict* min4 = find_verdict(r, "min_tflops", 4);
  REQUIRE(min4);
  CHECK_FALSE(min4->passed);
  CHECK(min4->margin == doctest::Approx(-0.5).epsilon(1e-12));
  CHECK(min4->relative_margin == doctest::Approx(-0.5 / 8.5).epsilon(1e-12));
  CHECK(find_verdict(r, "min_tflops", 2)->passed);
  const Verdict* claim = find_verdict(r, "claim_tflops", 4);
  REQUIRE(claim);
  CHECK(claim->passed);  // 8 >= 8: a tie meets the claim
  const Verdict* eff = find_verdict(r, "claim_efficiency", 4);
  REQUIRE(eff);
  CHECK_FALSE(eff->passed);
  CHECK(eff->baseline_gpus == 1);
  CHECK(eff->measured == doctest::Approx(0.8).epsilon(1e-12));
  CHECK(find_verdict(r, "min_efficiency", 2)->passed);
  CHECK(find_verdict(r, "min_efficiency", 1) == nullptr);  // the baseline has no efficiency verdict
  CHECK_FALSE(r.passed());
  ScalingOptions at_largest;
  at_largest.baseline_gpus = 4;
  at_largest.claim_efficiency = 0.9;
  CHECK(contains(usage_message({scaling_point(1, 10), scaling_point(4, 8)}, at_largest),
                 "--claim-efficiency needs a baseline smaller than the largest size"));
}

TEST_CASE("a run that failed verification never passes a verdict, at its size or as baseline") {
  RunPoint bad = scaling_point(1, 10);
  bad.verification_passed = false;
  bad.mismatches = 7;
  ScalingOptions o;
  o.min_tflops = 1;
  o.min_efficiency = 0.5;
  const auto r = compute_scaling({bad, scaling_point(2, 9)}, o);
  CHECK_FALSE(find_verdict(r, "verification", 1)->passed);
  CHECK(find_verdict(r, "verification", 1)->measured == 7);
  CHECK_FALSE(find_verdict(r, "min_tflops", 1)->passed);
  CHECK(find_verdict(r, "min_tflops", 2)->passed);
  const Verdict* eff = find_verdict(r, "min_efficiency", 2);  // measured against a failed baseline
  CHECK_FALSE(eff->passed);
  CHECK(contains(eff->reason, "verification failed in run-1.json"));
  CHECK(r.sizes[0].verification == VerificationState::failed);
  CHECK_FALSE(r.passed());
}

TEST_CASE("health suspects and injected faults fail the verdict, naming them, unless accepted") {
  RunPoint slow = scaling_point(2, 9);
  slow.suspects = {"rank 1 on node-b (compute 1.8x the median)"};
  RunPoint faulted = scaling_point(1, 10);
  faulted.injected = "slow:rank=0,factor=2";
  faulted.fp8_emulated = true;
  ScalingOptions o;
  auto r = compute_scaling({faulted, slow}, o);
  const Verdict* health = find_verdict(r, "health", 2);
  REQUIRE(health != nullptr);
  CHECK_FALSE(health->passed);
  CHECK(health->measured == 1);
  CHECK(contains(health->reason, "run-2.json: rank 1 on node-b (compute 1.8x the median)"));
  CHECK(contains(health->reason, "pass --allow-suspects"));
  const Verdict* injected = find_verdict(r, "injected", 1);
  REQUIRE(injected != nullptr);
  CHECK_FALSE(injected->passed);
  CHECK(contains(injected->reason, "slow:rank=0,factor=2"));
  CHECK(find_verdict(r, "health", 1) == nullptr);  // the clean size has none
  CHECK_FALSE(r.passed());
  bool warned = false;
  for (const std::string& w : r.warnings) warned = warned || contains(w, "fp8 emulated");
  CHECK(warned);
  o.allow_suspects = true;
  o.allow_injected = true;
  r = compute_scaling({faulted, slow}, o);
  CHECK(find_verdict(r, "health", 2)->passed);
  CHECK(contains(find_verdict(r, "health", 2)->reason, "accepted by --allow-suspects"));
  CHECK(find_verdict(r, "injected", 1)->passed);
  CHECK(r.passed());
}

TEST_CASE("phase growth names the phases that grew by more than 1% of the step, largest first") {
  RunPoint a = scaling_point(1, 10), b = scaling_point(2, 10);
  b.phase_time_s[static_cast<std::size_t>(Phase::dispatch)] += 0.004;    // 4% of 0.1 s
  b.phase_time_s[static_cast<std::size_t>(Phase::combine)] += 0.002;     // 2%
  b.phase_time_s[static_cast<std::size_t>(Phase::attention)] += 0.0005;  // 0.5%: noise
  const auto r = compute_scaling({a, b}, {});
  REQUIRE(r.growth.size() == 1);
  CHECK(r.growth[0].grew == std::vector<Phase>{Phase::dispatch, Phase::combine});
  const PhaseChange& d = r.growth[0].phases[static_cast<std::size_t>(Phase::dispatch)];
  CHECK(d.delta_s() == doctest::Approx(0.004).epsilon(1e-9));
  CHECK(*d.ratio() == doctest::Approx(1.4).epsilon(1e-9));
  CHECK_FALSE(r.growth[0].phases[static_cast<std::size_t>(Phase::router)].ratio().has_value());
}

TEST_CASE("warnings: software versions, hosts, few steps, unverified, synthetic, duplicates") {
  RunPoint a = scaling_point(1, 10), b = scaling_point(2, 9), c = scaling_point(2, 9, "c.json");
  b.software[0].second = "Open MPI 5.0.0";
  b.hosts = {"other"};
  b.steps = 3;
  c.verification_enabled = false;
  c.synthetic = true;
  c.sha256 = b.sha256;
  const auto r = compute_scaling({a, b, c}, {});
  std::string all;
  for (const std::string& w : r.warnings) all += w + "\n";
  CHECK(contains(all,
                 "runs differ in meta.mpi_library: \"Open MPI 4.1.4\" (run-1.json and 1 more);"
                 " \"Open MPI 5.0.0\" (run-2.json)"));
  CHECK(contains(all, "ran on 2 different sets of hosts"));
  CHECK(
      contains(all, "different hosts: the 1 GPU runs used hosts the 2 GPUs runs did not (node0)") ==
      false);  // node0 is among the 2-GPU runs' hosts (c.json)
  CHECK(contains(all, "fewer than 5 timed steps (a noisy median) in run-2.json (3)"));
  CHECK(contains(all, "verification not run (moebench run --verify) in 1 of 3 runs: c.json"));
  CHECK(contains(all, "SYNTHETIC inputs"));
  CHECK(contains(all, "identical files counted as repeats: run-2.json, c.json"));
  CHECK(r.sizes[1].verification == VerificationState::partial);
  RunPoint far = scaling_point(4, 8);
  far.hosts = {"elsewhere"};
  const auto r2 = compute_scaling({scaling_point(1, 10), far}, {});
  REQUIRE(r2.warnings.size() == 1);
  CHECK(contains(r2.warnings[0],
                 "different hosts: the 1 GPU runs used hosts the 4 GPUs runs did "
                 "not (node0)"));
}

TEST_CASE("a recipe's claim: moebench's step beside the row is a figure, never a verdict") {
  std::vector<RunPoint> runs = {scaling_point(1, 10), scaling_point(2, 8)};
  for (RunPoint& p : runs) {
    p.recipe = "gb300-mxfp8-256";
    p.recipe_tflops_per_gpu = 16;
    p.recipe_differences = {"model: tiny"};
  }
  ScalingOptions o;
  o.claim_from_recipe = true;
  o.claims_like_for_like = true;
  o.claim_tflops = 16;  // judged like for like by the caller: no direct verdict here
  o.claim_efficiency = 0.99;
  const auto r = compute_scaling(runs, o);
  REQUIRE(r.recipe_comparison.has_value());
  CHECK(r.recipe_comparison->recipe == "gb300-mxfp8-256");
  CHECK(r.recipe_comparison->gpus == 2);
  CHECK(r.recipe_comparison->measured == doctest::Approx(8).epsilon(1e-12));
  CHECK(r.recipe_comparison->published == 16);
  CHECK(r.recipe_comparison->differences.size() == 1);
  // 8 against a published 16 and an efficiency of 0.8 against 0.99: neither is a verdict.
  for (const Verdict& v : r.verdicts) CHECK(v.name == "verification");
  CHECK(r.passed());
  // One size is enough for a recipe's claim, and only for one.
  const auto one = compute_scaling({runs.front()}, o);
  CHECK(one.sizes.size() == 1);
  CHECK(contains(one.mode_explanation, "one size (1 GPU)"));
  o.claims_like_for_like = false;
  CHECK(contains(usage_message({runs.front()}, o), "one size is enough only to judge a recipe"));
}
