#include "workloads/config/run_config.hpp"

#include <limits>

#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

template <typename F>
std::string usage_message(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// 4 ranks, EP over all of them, the whole tiny model.
RunConfig tiny_run() {
  RunConfig c;
  c.model = preset("deepseek-v3-tiny");
  c.workload.seq_len = 128;
  c.workload.layers = 4;
  c.workload.dense_layers = 1;
  c.layout.world = 4;
  c.layout.ep = 4;
  return c;
}

}  // namespace

TEST_CASE("run_config: parse_routing accepts the three forms") {
  CHECK(parse_routing("router").mode == RoutingMode::router);
  CHECK(parse_routing("balanced").mode == RoutingMode::balanced);
  const RoutingSpec z = parse_routing("zipf:1.2");
  CHECK(z.mode == RoutingMode::zipf);
  CHECK(z.zipf_exponent == 1.2);
  CHECK(to_string(z) == "zipf:1.2");
  CHECK(to_string(parse_routing("zipf:2")) == "zipf:2");
  CHECK(to_string(parse_routing("router")) == "router");
  CHECK(to_string(parse_routing("balanced")) == "balanced");
}

TEST_CASE("run_config: parse_routing rejects anything else with the valid forms") {
  for (const char* bad : {"zipf:0", "zipf:abc", "zipf:", "zipf:-1", "zipf:inf", "zipf:1.2x",
                          "Balanced", "Random", ""}) {
    CAPTURE(bad);
    const std::string msg = usage_message([&] { parse_routing(bad); });
    CHECK(contains(msg, "--routing"));
    CHECK(contains(msg, "valid: router, balanced, random, zipf:S with S > 0"));
  }
  CHECK(contains(usage_message([] { parse_routing("zipf:0"); }), "must be a finite number > 0"));
  CHECK(contains(usage_message([] { parse_routing("zipf:abc"); }), "is not a number"));
}

TEST_CASE("run_config: parse_recompute takes Megatron's module names, in any order, or none") {
  CHECK_FALSE(parse_recompute("").any());
  CHECK_FALSE(parse_recompute("none").any());
  const Recompute r = parse_recompute("moe_act,mla_up_proj");
  CHECK(r.moe_act);
  CHECK(r.mla_up_proj);
  CHECK_FALSE(r.core_attn);
  // Named back in one order, whatever the input's.
  CHECK(recompute_names(r) == std::vector<std::string>{"mla_up_proj", "moe_act"});
  const Recompute all =
      parse_recompute("shared_experts,mlp,layernorm,core_attn,moe_act,mla_up_proj");
  CHECK(recompute_names(all) == std::vector<std::string>{"core_attn", "layernorm", "mla_up_proj",
                                                         "mlp", "moe_act", "shared_experts"});
  CHECK(parse_recompute("mlp,mlp") == parse_recompute("mlp"));
}

TEST_CASE("run_config: parse_recompute refuses what moebench does not recompute, saying why") {
  CHECK_THROWS_WITH_AS(parse_recompute("moe"),
                       doctest::Contains("does not recompute a whole MoE layer"), UsageError);
  CHECK_THROWS_WITH_AS(parse_recompute("mlp,attn"), doctest::Contains("'attn' is not a module"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_recompute("mlp,"), doctest::Contains("'' is not a module"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_recompute("MLP"), doctest::Contains("valid: a comma-separated list"),
                       UsageError);
}

TEST_CASE("run_config: enum names") {
  CHECK(to_string(GradReduce::allreduce) == "allreduce");
  CHECK(to_string(GradReduce::reduce_scatter) == "reduce-scatter");
  CHECK(to_string(Optimizer::adamw) == "adamw");
  CHECK(to_string(Optimizer::none) == "none");
}

TEST_CASE("run_config: default dense layers keep the model's proportion") {
  const ModelConfig v3 = preset("deepseek-v3");
  const ModelConfig tiny = preset("deepseek-v3-tiny");
  CHECK(default_dense_layers(v3, 61) == 3);
  CHECK(default_dense_layers(v3, 4) == 0);   // 4 * 3 / 61 = 0.197
  CHECK(default_dense_layers(v3, 31) == 2);  // 31 * 3 / 61 = 1.52
  CHECK(default_dense_layers(tiny, 4) == 1);
  CHECK(default_dense_layers(tiny, 1) == 0);  // 0.25
  CHECK(default_dense_layers(tiny, 2) == 1);  // 0.5 rounds up
}

TEST_CASE("run_config: a valid configuration passes") {
  CHECK_NOTHROW(validate(tiny_run()));
  RunConfig c = tiny_run();
  c.layout.ep = 1;
  c.layout.ranks_per_node = 2;
  c.workload.routing = parse_routing("zipf:1.1");
  CHECK_NOTHROW(validate(c));
}

TEST_CASE("run_config: every flag has an upper bound, checked before any product is formed") {
  struct Case {
    const char* expected;
    void (*set)(RunConfig&, std::int64_t);
    std::int64_t at_limit;
  };
  const Case cases[] = {
      {"--seq-len must be in 1..1048576",
       [](RunConfig& c, std::int64_t v) { c.workload.seq_len = v; }, kMaxSeqLen},
      {"--micro-batch must be in 1..65536",
       [](RunConfig& c, std::int64_t v) { c.workload.micro_batch = v; }, kMaxMicroBatch},
      {"--steps must be in 1..10000000",
       [](RunConfig& c, std::int64_t v) { c.steps = static_cast<int>(v); }, kMaxSteps},
      {"--blas-threads must be in 1..1024",
       [](RunConfig& c, std::int64_t v) { c.blas_threads = static_cast<int>(v); }, kMaxBlasThreads},
  };
  for (const Case& k : cases) {
    RunConfig c = tiny_run();
    k.set(c, k.at_limit);
    CHECK_NOTHROW(validate(c));  // the limit itself is valid
    k.set(c, k.at_limit + 1);
    CHECK(usage_message([&] { validate(c); }).find(k.expected) == 0);
  }
  // 2^63 - 1 micro-batches used to wrap the per-step product; now it is refused first.
  RunConfig c = tiny_run();
  c.workload.micro_batch = std::numeric_limits<std::int64_t>::max();
  CHECK(usage_message([&] { validate(c); }).find("--micro-batch must be in") == 0);
  c = tiny_run();
  c.layout.world = kMaxWorld + 1;
  CHECK(usage_message([&] { validate(c); }).find("the world size") == 0);
}

TEST_CASE("run_config: layout errors say which values would be valid") {
  RunConfig c = tiny_run();
  c.layout.ep = 3;
  CHECK(usage_message([&] { validate(c); }) ==
        "--ep 3 does not divide the 4 ranks; valid: 1, 2, 4");

  // 6 ranks, EP 3: divides the world but not the 16 experts; 1 and 2 divide both.
  c.layout.world = 6;
  const std::string msg = usage_message([&] { validate(c); });
  CHECK(contains(msg, "--ep 3 does not divide the 16 routed experts"));
  CHECK(contains(msg, "valid with 6 ranks: 1, 2"));

  c = tiny_run();
  c.layout.ep = 0;
  CHECK(contains(usage_message([&] { validate(c); }), "--ep must be >= 1"));
  c = tiny_run();
  c.layout.ranks_per_node = 3;
  CHECK(contains(usage_message([&] { validate(c); }),
                 "--ranks-per-node 3 does not divide the 4 ranks; valid: 0 (detect), 1, 2, 4"));
  c = tiny_run();
  c.inject = parse_fault_spec("corrupt:rank=4");
  CHECK(usage_message([&] { validate(c); }) ==
        "--inject corrupt:rank=4,phase=dispatch,step=0: no rank 4 in a world of 4; valid: rank=0 "
        "to rank=3");
  c.inject->rank = 3;
  // Nothing but --verify would catch it: refused without.
  c.verify = false;
  CHECK(usage_message([&] { validate(c); }) ==
        "--inject corrupt:rank=3,phase=dispatch,step=0: only --verify's comparison catches a "
        "corrupted value, and without it the run would end as a success; add --verify");
  c.verify = true;
  CHECK_NOTHROW(validate(c));
  // The --verify reference runs without the fault.
  CHECK_FALSE(single_process_reference(c).inject.has_value());
}

TEST_CASE("run_config: workload errors name the flag and the valid range") {
  RunConfig c = tiny_run();
  c.workload.layers = 5;
  CHECK(usage_message([&] { validate(c); }) ==
        "--layers 5 is out of range for deepseek-v3-tiny; valid: 1..4");
  c.workload.layers = 0;
  CHECK(contains(usage_message([&] { validate(c); }), "valid: 1..4"));
  c = tiny_run();
  c.workload.layers = 2;
  c.workload.dense_layers = 3;
  CHECK(contains(usage_message([&] { validate(c); }), "--dense-layers 3"));
  c = tiny_run();
  c.workload.seq_len = 0;
  CHECK(contains(usage_message([&] { validate(c); }), "--seq-len"));
  c = tiny_run();
  c.workload.micro_batch = 0;
  CHECK(contains(usage_message([&] { validate(c); }), "--micro-batch"));
  c = tiny_run();
  c.steps = 0;
  CHECK(contains(usage_message([&] { validate(c); }), "--steps"));
  c = tiny_run();
  c.warmup = -1;
  CHECK(contains(usage_message([&] { validate(c); }), "--warmup"));
  c = tiny_run();
  c.blas_threads = 0;
  CHECK(contains(usage_message([&] { validate(c); }), "--blas-threads"));
  c = tiny_run();
  c.workload.routing = {RoutingMode::zipf, 0.0};
  CHECK(contains(usage_message([&] { validate(c); }), "zipf exponent must be"));
  c = tiny_run();
  c.adamw.beta2 = 1.0;
  CHECK(contains(usage_message([&] { validate(c); }), "--adam-beta2"));
  c.optimizer = Optimizer::none;  // AdamW settings are irrelevant without AdamW
  CHECK_NOTHROW(validate(c));
}

TEST_CASE("run_config: an inconsistent model is caught by the run validation too") {
  RunConfig c = tiny_run();
  c.model.topk_group = 5;
  CHECK(contains(usage_message([&] { validate(c); }), "'topk_group'"));
}

TEST_CASE("run_config: JSON uses snake_case keys") {
  RunConfig c = tiny_run();
  c.workload.micro_batch = 2;
  c.workload.routing = parse_routing("zipf:1.5");
  const nlohmann::json w = to_json(c.workload, c.layout);
  CHECK(w["seq_len"] == 128);
  CHECK(w["micro_batch"] == 2);
  CHECK(w["layers"] == 4);
  CHECK(w["dense_layers"] == 1);
  CHECK(w["moe_layers"] == 3);
  CHECK(w["attention"] == true);
  CHECK(w["routing"] == "zipf:1.5");
  // One micro-batch a step by default: 4 ranks x 2 sequences x 128 tokens, 256 per GPU.
  CHECK(w["tokens_per_rank"] == 256.0);
  CHECK(w["global_batch"] == 8);
  CHECK(w["microbatches_per_step"] == 1);
  CHECK(w["tokens_per_micro_batch"] == 256);
  c.workload.global_batch = 32;
  const nlohmann::json acc = to_json(c.workload, c.layout);
  CHECK(acc["microbatches_per_step"] == 4);
  CHECK(acc["tokens_per_step"] == 32 * 128);
  CHECK(acc["tokens_per_rank"] == 1024.0);
  c.workload.global_batch = 0;
  c.layout.ep = 2;
  const nlohmann::json p = to_json(c.layout);
  CHECK(p["world"] == 4);
  CHECK(p["ep"] == 2);
  CHECK(p["dp"] == 4);
  CHECK(p["edp"] == 2);
  CHECK(p["ranks_per_node"] == 0);
}

TEST_CASE("run_config: the global batch and the pipeline are checked against the layout") {
  RunConfig c = tiny_run();  // 4 ranks, 4 layers
  c.layout.ep = 2;
  c.workload.global_batch = 6;
  CHECK(contains(usage_message([&] { validate(c); }), "not a multiple of --micro-batch 1 x dp 4"));
  c.workload.global_batch = 8;
  CHECK_NOTHROW(validate(c));
  CHECK(microbatches(c) == 2);
  c.layout.pp = 2;  // dp 2: 4 micro-batches
  c.layout.vp = 2;
  CHECK_NOTHROW(validate(c));
  CHECK(microbatches(c) == 4);
  c.workload.global_batch = 6;  // 3 micro-batches: not a multiple of pp with vp > 1
  CHECK(contains(usage_message([&] { validate(c); }), "a multiple of --pp 2"));
  c.workload.global_batch = 8;
  c.layout.vp = 1;
  c.layout.pipeline_layout = "Et|tttL";
  CHECK(contains(usage_message([&] { validate(c); }), "has E or L, which --head off does not run"));
  c.workload.head = true;
  CHECK_NOTHROW(validate(c));
  CHECK(pipeline_layout(c).stage(1, 0).layers == 3);
  c.layout.pipeline_layout = "Et|ttL";
  CHECK(contains(usage_message([&] { validate(c); }), "places 3 decoder layers"));
  c.layout.pipeline_layout = "Et|t|t|tL";
  CHECK(contains(usage_message([&] { validate(c); }), "give --vp 2"));
  // MTP: as many m as --mtp, in the last stage; and only with the head.
  c.layout.pipeline_layout = "Et|tttmL";
  CHECK(contains(usage_message([&] { validate(c); }), "places 1 MTP layers (m) but the run has 0"));
  c.workload.mtp = 1;
  CHECK_NOTHROW(validate(c));
  c.layout.pipeline_layout = "Et|t|ttm|L";  // Megatron-Core's syntax allows it; moebench not
  c.layout.vp = 2;
  CHECK(contains(usage_message([&] { validate(c); }), "m (an MTP layer) before the last stage"));
  c.layout.vp = 1;
  c.layout.pipeline_layout.clear();
  c.workload.mtp = 2;
  CHECK(contains(usage_message([&] { validate(c); }), "--mtp 2 is out of range"));
  c.workload.mtp = 1;
  c.workload.head = false;
  CHECK(contains(usage_message([&] { validate(c); }), "needs --head on"));
  c.workload.mtp = 0;
  c.layout.pipeline_layout.clear();
  c.layout.pp = 4;
  c.layout.ep = 1;
  c.layout.vp = 2;  // 4 layers over 8 stages
  c.workload.global_batch = 4;
  CHECK(contains(usage_message([&] { validate(c); }), "do not split evenly"));
  // The reference: every sequence in one micro-batch, no pipeline.
  c.layout.vp = 1;
  const RunConfig ref = single_process_reference(c);
  CHECK(ref.workload.micro_batch == 4);
  CHECK(ref.loss_micro_batch == 1);  // the loss keeps the distributed micro-batch's mean
  CHECK(ref.layout.pp == 1);
  CHECK(microbatches(ref) == 1);
}

}  // namespace moebench
