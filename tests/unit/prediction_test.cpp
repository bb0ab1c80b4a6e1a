// What `predict` and `run --system` share: a recipe's trainer rules, the configuration a
// prediction prices, and a run's expected phases against what it measured.
#include "harness/cli/prediction.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

CliOptions parse(std::vector<const char*> args) {
  args.insert(args.begin(), "moebench");
  return parse_command_line(static_cast<int>(args.size()), args.data());
}

TEST_CASE("prediction: a recipe is priced as its trainer ran it, a run as moebench runs it") {
  RunConfig c;
  c.precision = Precision::fp8;
  c.recipe = "gb300-mxfp8-256";
  TrainerRules t = trainer_rules(c);
  CHECK(t.dispatcher == Dispatcher::dedup);
  CHECK(t.ep_overlap);
  CHECK(t.fp8_attention);
  CHECK(t.grad_reduce_bytes == 2);       // Bridge's configs: grad_reduce_in_fp32 = False
  CHECK(t.host_gaps == HostGaps::none);  // Bridge's rows capture the whole step in CUDA graphs
  CHECK(t.ep_comm_sms == 32);            // HybridEP's SMs in Bridge's performance recipes
  c.recipe = "mlm-gb300-mxfp8-256";
  CHECK(trainer_rules(c).host_gaps == HostGaps::partial_graphs);
  CHECK(trainer_rules(c).grad_reduce_bytes == 4);  // the recipe file's main_grads_dtype: fp32
  c.recipe = "mlm-b200-mxfp8-256";
  CHECK_FALSE(trainer_rules(c).fp8_attention);
  CHECK(trainer_rules(c).host_gaps == HostGaps::no_graphs);
  CHECK(trainer_rules(c).ep_comm_sms == 24);  // the recipe file's moe_deepep_num_sms
  c.recipe.reset();
  t = trainer_rules(c);
  CHECK(t.dispatcher == Dispatcher::alltoall);
  CHECK_FALSE(t.ep_overlap);
  CHECK(t.grad_reduce_bytes == 0);
  CHECK(t.host_gaps == HostGaps::none);
  CHECK(t.ep_comm_sms == 0);
}

TEST_CASE("prediction: the precision priced is the row's, or the system's own") {
  const RunConfig gb300 = predict_config(parse({"predict", "--recipe", "gb300-mxfp8-256"}), 256,
                                         find_system("gb300-nvl72"));
  CHECK(gb300.precision == Precision::fp8);
  CHECK(gb300.fp8_recipe == Fp8Recipe::mxfp8);
  CHECK(global_batch(gb300) == 4096);
  const CliOptions tiny = parse({"predict", "--preset", "deepseek-v3-tiny"});
  CHECK(predict_config(tiny, 1, find_system("h100-hgx")).precision == Precision::bf16);
  CHECK(predict_config(tiny, 1, find_system("cpu")).precision == Precision::fp32);
}

TEST_CASE("prediction: a run's phases over 1.25x their expected time are slow") {
  RunRecord r;
  r.config.model = preset("deepseek-v3-tiny");
  r.config.workload.seq_len = 16;
  r.config.workload.layers = 2;
  r.config.workload.dense_layers = 1;
  r.config.layout.world = 2;
  r.config.layout.ep = 2;
  const SystemSpec cpu = find_system("cpu");
  const EfficiencySet& eff = efficiencies_for(cpu);
  const Prediction p = predict_step(r.config, hardware_for(cpu, r.config), eff.values);
  // What the rank measured: its expected phases, the experts twice as long, the attention 1.2x,
  // and 5 ms waiting.
  StepBreakdown& b = r.results.breakdown;
  b.rank = 1;
  b.stage = 0;
  for (const PredictedPhase& ph : p.phases) {
    for (std::size_t i = 0; i < kPhaseCount; ++i) {
      if (kPhaseNames[i] != ph.name) continue;
      const double f = ph.name == "experts" ? 2.0 : ph.name == "attention" ? 1.2 : 1.0;
      b.phase_time_s[i] = f * ph.time_s;
      b.step_time_s += f * ph.time_s;
    }
  }
  b.phase_time_s[static_cast<std::size_t>(Phase::comm_wait)] = 0.005;
  b.step_time_s += 0.005;
  const ExpectedRecord e = expected_for_run(r, cpu, eff, nullptr);
  CHECK(e.present());
  CHECK(e.expected_step_s == doctest::Approx(p.step_s).epsilon(1e-12));
  CHECK(e.measured_step_s == b.step_time_s);
  for (const ExpectedPhase& x : e.phases) {
    CAPTURE(x.name);
    if (x.name == "experts") {
      CHECK(x.slow);
      CHECK(x.ratio == doctest::Approx(2.0).epsilon(1e-12));
    } else {
      CHECK_FALSE(x.slow);  // attention's 1.2x is under the mark; waiting is never named
    }
    if (x.name == "dispatch") CHECK(x.communication);
  }
  // No timed step: nothing to compare.
  r.results.breakdown = StepBreakdown{};
  CHECK_FALSE(expected_for_run(r, cpu, eff, nullptr).present());
}

TEST_CASE("prediction: the system a GPU names, only where it can price the run") {
  RunConfig c;
  c.precision = Precision::bf16;
  std::string why;
  const std::optional<SystemSpec> h200 = detected_system("NVIDIA H200", c, &why);
  REQUIRE(h200);
  CHECK(h200->name == "h200-hgx");
  CHECK(why.empty());
  CHECK_FALSE(detected_system("Tesla V100-SXM2-32GB", c, &why));
  CHECK(why.empty());
  // An FP32 run on an H200: the system has no FP32 peak, so no expected times, and why.
  c.precision = Precision::fp32;
  CHECK_FALSE(detected_system("NVIDIA H200", c, &why));
  CHECK(why.find("no FP32 peak") != std::string::npos);
}

TEST_CASE("prediction: --calibrate needs --system and a run report") {
  RunConfig c;
  CHECK_THROWS_WITH_AS(
      expected_inputs(parse({"run", "--preset", "deepseek-v3-tiny", "--calibrate", "r.json"}), c),
      doctest::Contains("give --system too"), UsageError);
  CHECK_FALSE(expected_inputs(parse({"run", "--preset", "deepseek-v3-tiny"}), c).system);
  CHECK_THROWS_WITH_AS(
      calibrate("/nonexistent/r.json", find_system("cpu"), efficiencies_for(find_system("cpu"))),
      doctest::Contains("/nonexistent/r.json"), UsageError);
}

}  // namespace
}  // namespace moebench
