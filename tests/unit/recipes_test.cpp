// The published recipes (workloads/config/recipes.json, compiled in) and how a run is set beside
// one. The figures checked here are the published ones (Megatron-Bridge's performance summary),
// written out by hand.
#include "workloads/config/recipes.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include "harness/core/error.hpp"

using namespace moebench;

namespace {

bool has_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

// The run a recipe describes, as --recipe NAME alone resolves it at the recipe's GPU count.
RunConfig run_of(const Recipe& r) {
  RunConfig c;
  c.model = preset(r.model);
  c.workload.seq_len = r.seq_len;
  c.workload.micro_batch = r.micro_batch;
  c.workload.global_batch = r.global_batch;
  c.workload.layers = c.model.num_hidden_layers;
  c.workload.dense_layers = c.model.first_k_dense_replace;
  c.workload.head = true;
  c.workload.mtp = c.model.num_nextn_predict_layers;
  c.workload.routing = parse_routing(r.routing);
  c.layout.world = r.gpus;
  c.layout.ep = r.ep;
  c.layout.pp = r.pp;
  c.layout.vp = r.vp;
  c.layout.pipeline_layout = r.pipeline_layout;
  c.grad_reduce =
      r.grad_reduce == "reduce-scatter" ? GradReduce::reduce_scatter : GradReduce::allreduce;
  c.backend = ComputeBackend::cuda;
  c.comm = CommBackend::nccl;
  c.precision = run_precision(r);
  c.workload.recompute = recompute_of(r);
  c.optimizer_state_dtype = parse_optimizer_state_dtype(r.optimizer_state_dtype);
  return c;
}

}  // namespace

TEST_CASE("recipes: NVIDIA's GB300 row, and every row is a valid DeepSeek-V3 layout") {
  const Recipe& gb300 = recipe("gb300-mxfp8-256");
  CHECK(gb300.gpus == 256);
  CHECK(gb300.pp == 2);
  CHECK(gb300.vp == 8);
  CHECK(gb300.ep == 32);
  CHECK(gb300.global_batch == 4096);
  CHECK(gb300.tflops_per_gpu == 1648.0);
  CHECK(gb300.tokens_per_s_per_gpu == 6338.0);
  CHECK(gb300.gpu_memory_bytes == 288e9);
  CHECK(gb300.pipeline_layout == "Et*4|(t*4|)*14tmL");
  REQUIRE(recipes().size() >= 5);
  for (const Recipe& r : recipes()) {
    CAPTURE(r.name);
    CHECK(r.tp == 1);  // moebench has no tensor parallelism: only such rows are listed
    const PipelineLayout l = parse_pipeline_layout(r.pipeline_layout, r.pp);
    CHECK(l.vp == r.vp);
    CHECK(l.decoder_layers() == 61);
    CHECK(l.mtp_layers() == 1);
    CHECK(l.has_embedding());
    CHECK(l.has_loss());
    CHECK(r.gpus % (r.pp * r.ep) == 0);
    const RunConfig c = run_of(r);
    CHECK_NOTHROW(validate(c));  // the global batch divides into micro-batches for the schedule
    CHECK(r.tflops_per_gpu.has_value());
    // Megatron-Core refuses the all-to-all overlap in a pipeline without virtual stages
    // (TransformerConfig: "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must
    // be specified when pipeline_model_parallel_size > 1"): no published row ran both.
    if (r.ep_comm_overlap && r.pp > 1) CHECK(r.vp > 1);
  }
  // The B300 row as the 26.06 summary lists it (MBS 2, VP n/a) and Bridge's settings of that
  // day ran it: recomputed MLA up-projections, no overlap, BF16 attention, partial CUDA graphs.
  const Recipe& b300 = recipe("b300-mxfp8-256");
  CHECK(b300.micro_batch == 2);
  CHECK(b300.vp == 1);
  CHECK(b300.recompute == std::vector<std::string>{"mla_up_proj"});
  CHECK_FALSE(b300.ep_comm_overlap);
  CHECK_FALSE(b300.fp8_attention);
  CHECK(b300.cuda_graphs == "partial");
  CHECK_THROWS_WITH_AS(recipe("gb300"), doctest::Contains("valid: gb300-mxfp8-256"), UsageError);
}

TEST_CASE("recipes: a layout spread over a smaller model keeps its stages, E, m and L") {
  const Recipe& r = recipe("gb300-mxfp8-256");
  CHECK(scaled_layout(r, 61) == r.pipeline_layout);
  const std::string small = scaled_layout(r, 4);
  const PipelineLayout l = parse_pipeline_layout(small, 2);
  CHECK(l.vp == 8);
  CHECK(l.decoder_layers() == 4);
  CHECK(l.has_embedding());
  CHECK(l.has_loss());
  CHECK(l.mtp_layers() == 1);
  // Largest remainder: the four stages with the largest shares, the first ones on ties.
  CHECK(l.stages[0].layers == 1);
  const PipelineLayout b = parse_pipeline_layout(scaled_layout(recipe("b300-mxfp8-256"), 16), 8);
  int total = 0;
  for (const PipelineStage& s : b.stages) {
    CHECK(s.layers >= 1);  // 8, 8, ..., 5 over 61 layers: every stage keeps one of 16 or more
    total += s.layers;
  }
  CHECK(total == 16);
}

TEST_CASE("recipes: on a model too small for its stages, vp then pp shrink until none is empty") {
  const Recipe& gb300 = recipe("gb300-mxfp8-256");
  // 61 layers: the recipe's own pipeline, nothing to say.
  const ScaledPipeline own = scaled_pipeline(gb300, 61, 256, 32);
  CHECK((own.pp == 2 && own.vp == 8 && own.layout == gb300.pipeline_layout && own.note.empty()));
  // The tiny model's 4 layers over pp 2: vp 2, one layer a stage, E first and mL last.
  const ScaledPipeline tiny = scaled_pipeline(gb300, 4, 8, 4);
  CHECK((tiny.pp == 2 && tiny.vp == 2));
  CHECK(tiny.layout == "Et|(t|)*2tmL");
  CHECK(tiny.note.find("would leave 12 without a decoder layer") != std::string::npos);
  CHECK(tiny.note.find("give --pp 2 --vp 8") != std::string::npos);
  // 20 layers keep vp 8: 16 stages, each with at least one.
  const ScaledPipeline mid = scaled_pipeline(gb300, 20, 8, 4);
  CHECK((mid.pp == 2 && mid.vp == 8 && mid.note.empty()));
  for (const PipelineStage& st : parse_pipeline_layout(mid.layout, 2).stages) CHECK(st.layers >= 1);
  // b300's pp 8 for 4 layers: pp 4 does not leave whole expert groups of 4 in 8 ranks (8 / 4 =
  // 2 ranks a stage), pp 3 does not divide 8; pp 2 does. Its last stage is the lighter one.
  const ScaledPipeline b300 = scaled_pipeline(recipe("b300-mxfp8-256"), 4, 8, 4);
  CHECK((b300.pp == 2 && b300.vp == 1));
  CHECK(b300.layout == "Et*2|t*2mL");
  // One layer: no pipeline at all.
  const ScaledPipeline one = scaled_pipeline(gb300, 1, 8, 4);
  CHECK((one.pp == 1 && one.vp == 1 && one.layout == "EtmL"));
}

TEST_CASE("recipes: Megatron-LM's rows as published: layouts, recompute, moments, offload") {
  const Recipe& gb300 = recipe("mlm-gb300-mxfp8-256");
  CHECK(gb300.pipeline_layout == "Et*4|(tttt|)*14tmL");
  CHECK((gb300.pp == 4 && gb300.vp == 4 && gb300.ep == 64));
  CHECK(gb300.optimizer_state_dtype == "bf16");
  CHECK(gb300.recipe_file == "examples/moe_recipes/deepseek_v3/gb300/mxfp8_256GPU_TP1PP4EP64.yaml");
  CHECK_FALSE(recompute_of(gb300).any());
  CHECK(offload_refusal(gb300).empty());
  const Recipe& b200 = recipe("mlm-b200-mxfp8-256");
  CHECK((b200.pp == 8 && b200.vp == 2 && b200.ep == 32 && b200.global_batch == 2048));
  CHECK(recompute_names(recompute_of(b200)) == std::vector<std::string>{"mla_up_proj", "mlp"});
  // 16 stages over PP 8: VP 2, two stages a rank, 61 layers and the ends.
  const PipelineLayout l = parse_pipeline_layout(b200.pipeline_layout, b200.pp);
  CHECK(l.vp == 2);
  CHECK(l.decoder_layers() == 61);
  // GB200 offloads what moebench does not: a run of it is refused, naming what and why.
  const Recipe& gb200 = recipe("mlm-gb200-mxfp8-256");
  CHECK(gb200.offload == std::vector<std::string>{"optimizer_states", "expert_fc1"});
  const std::string refusal = offload_refusal(gb200);
  CHECK(refusal.find("offloads optimizer_states and expert_fc1 to host memory") !=
        std::string::npos);
  CHECK(refusal.find("which moebench does not implement") != std::string::npos);
  // Megatron-Bridge's rows name no file of their own (their source names the recipe).
  CHECK(recipe("gb300-mxfp8-256").recipe_file.empty());
}

TEST_CASE("recipes: the differences of a run from its row, one line each") {
  const Recipe& r = recipe("gb300-mxfp8-256");
  RunConfig c = run_of(r);
  // The row's own workload on a GB300 still differs in what moebench does not do yet.
  std::vector<std::string> d = recipe_differences(r, c, "NVIDIA GB300");
  CHECK_FALSE(has_prefix(d, "layers:"));  // the whole model, ends and MTP included
  CHECK(has_prefix(d, "precision: fp8 with per-tensor FP32 scales"));
  CHECK_FALSE(has_prefix(d, "layout:"));
  CHECK_FALSE(has_prefix(d, "batch:"));
  CHECK_FALSE(has_prefix(d, "gpus:"));
  CHECK_FALSE(has_prefix(d, "routing:"));
  CHECK_FALSE(has_prefix(d, "system:"));
  CHECK(d.size() == 1);
  // With MXFP8's own recipe the precision is the row's; blockwise is not.
  c.fp8_recipe = Fp8Recipe::mxfp8;
  CHECK(recipe_differences(r, c, "NVIDIA GB300").empty());
  c.fp8_recipe = Fp8Recipe::blockwise;
  CHECK(has_prefix(recipe_differences(r, c, "NVIDIA GB300"), "precision: fp8 with blockwise"));
  c.fp8_recipe = Fp8Recipe::tensor;
  // Without the ends or the MTP layer it is not the row's model.
  c.workload.mtp = 0;
  CHECK(has_prefix(recipe_differences(r, c, "NVIDIA GB300"), "layers: 0 of the model's 1 MTP"));
  c.workload.head = false;
  CHECK(has_prefix(recipe_differences(r, c, "NVIDIA GB300"),
                   "layers: the embedding, the output head and the loss are not run"));
  c.workload.head = true;
  c.workload.mtp = 1;
  // Each change shows up under its own topic.
  c.layout.world = 512;
  c.workload.global_batch = 8192;
  c.workload.routing = parse_routing("balanced");
  c.layout.vp = 1;
  c.layout.pipeline_layout = "Et*30|t*31mL";
  d = recipe_differences(r, c, "NVIDIA H200");
  CHECK(has_prefix(d, "gpus: 512, not 256"));
  CHECK(has_prefix(d, "batch: micro-batch 1, global batch 8192"));
  CHECK(has_prefix(d, "routing: balanced, not random"));
  CHECK_FALSE(has_prefix(d, "recompute:"));
  CHECK_FALSE(has_prefix(d, "optimizer: moments"));
  CHECK(has_prefix(d, "layout: tp 1, pp 2, vp 1, ep 32, not tp 1, pp 2, vp 8, ep 32"));
  CHECK(has_prefix(d, "layout: pipeline layout Et*30|t*31mL"));
  CHECK(has_prefix(d, "system: NVIDIA H200, not GB300"));
  c.workload.layers = 4;
  c.precision = Precision::bf16;
  d = recipe_differences(r, c, "");
  CHECK(has_prefix(d, "layers: 4 of the model's 61 decoder layers"));
  CHECK(has_prefix(d, "precision: bf16, not mxfp8"));
  CHECK(has_prefix(d, "system: the cpu backend, not GB300"));
  CHECK(run_precision(r) == Precision::fp8);
  // The row's recompute and moments: a run that skips or adds some is not the row's step.
  c.workload.recompute = parse_recompute("mla_up_proj");
  c.optimizer_state_dtype = OptimizerStateDtype::bf16;
  d = recipe_differences(r, c, "");
  CHECK(has_prefix(d, "recompute: mla_up_proj, not none"));
  CHECK(has_prefix(d, "optimizer: moments in bf16, not fp32"));
  const Recipe& gb200 = recipe("gb200-mxfp8-256");
  RunConfig g = run_of(gb200);
  CHECK_FALSE(has_prefix(recipe_differences(gb200, g, "NVIDIA GB200"), "recompute:"));
  g.workload.recompute = {};
  CHECK(
      has_prefix(recipe_differences(gb200, g, "NVIDIA GB200"), "recompute: none, not mla_up_proj"));
}
