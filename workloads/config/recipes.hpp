// The published rows moebench can run (workloads/config/recipes.json, compiled in): model,
// system, layout, batch, precision, routing, and the published throughput. `--recipe NAME` sets a
// run's workload from one; the run report carries it with every way the run differs from it, so
// `moebench report --claim-from-recipe` can say whether the measured and the published figures
// compare.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "workloads/config/run_config.hpp"

namespace moebench {

struct Recipe {
  std::string name;
  std::string model;  // a preset name
  std::string system;
  std::string gpu;
  double gpu_memory_bytes = 0;
  int gpus = 0;
  int tp = 1, pp = 1, vp = 1, ep = 1;
  std::int64_t micro_batch = 1, global_batch = 1, seq_len = 4096;
  std::string precision;  // as published: mxfp8, fp8, bf16
  std::string pipeline_layout;
  std::string schedule;                // 1f1b, interleaved 1f1b, dualpipe
  std::string routing;                 // a --routing value
  std::string grad_reduce;             // a --grad-reduce value
  std::string optimizer_state_dtype;   // an --optimizer-state-dtype value
  std::string main_grads_dtype;        // the gradient buffer: bf16 (grad_reduce_in_fp32 off), fp32
  std::vector<std::string> recompute;  // Megatron's recompute_modules (a run recomputes them)
  // What the recipe offloads to host memory (optimizer_states, expert_fc1 activations):
  // moebench does not, and refuses to run such a recipe (offload_refusal).
  std::vector<std::string> offload;
  // How the recipe's trainer runs the MoE exchange and core attention (`predict` prices them):
  // hybridep, deepep or alltoall; Megatron's batch-level all-to-all overlap; FP8 core attention.
  std::string dispatcher;
  bool ep_comm_overlap = false;
  bool fp8_attention = false;
  // How much of the step the trainer captures in CUDA graphs: full_iteration, partial or none.
  std::string cuda_graphs;
  int ep_comm_sms = 0;  // SMs the dispatcher's kernels take (moe_hybridep_num_sms, DeepEP's)
  std::string trainer_source;
  std::optional<double> tokens_per_s_per_gpu;
  std::optional<double> tflops_per_gpu;
  std::string recipe_file;  // the Megatron-LM recipe file; empty for Megatron-Bridge's rows
  std::string source;
};

// Every recipe, in file order (parsed once; the file is checked by the tests).
const std::vector<Recipe>& recipes();
// A recipe by name; UsageError naming the valid names otherwise.
const Recipe& recipe(const std::string& name);

// The layout of `r` for a model of `layers` decoder layers over pp x vp stages (default the
// recipe's): the recipe's own when both match, else E on the first stage, m and L on the last,
// and the layers spread over the stages in proportion to the recipe's (the first and last stage
// weighted as the recipe's, the others as its middle ones), each stage holding at least one when
// there are enough (largest remainder, earlier stages first on ties).
std::string scaled_layout(const Recipe& r, int layers);
std::string scaled_layout(const Recipe& r, int layers, int pp, int vp);

// The recipe's pipeline for a model of `layers` decoder layers on `world` ranks in expert groups
// of `ep`: its pp and vp when each of its pp x vp stages can hold a layer, else vp reduced until
// they can, then pp (to the largest that still divides the world into expert groups). `note`
// says what was reduced and why ("" when nothing was).
struct ScaledPipeline {
  int pp = 1;
  int vp = 1;
  std::string layout;
  std::string note;
};
ScaledPipeline scaled_pipeline(const Recipe& r, int layers, int world, int ep);

// The modules `r` recomputes, as --recompute takes them.
Recompute recompute_of(const Recipe& r);

// Why moebench cannot run `r` as published ("" when it can): what it offloads, which moebench
// does not implement.
std::string offload_refusal(const Recipe& r);

// The precision moebench runs for a published one: fp8 for mxfp8 and fp8, else bf16.
Precision run_precision(const Recipe& r);

// Every way the run differs from the recipe, one line each ("precision: ...", "layers: ...",
// "batch: ...", "gpus: ...", "routing: ...", "layout: ...", "model: ..."); empty when the run is
// the recipe's workload. `device` is the GPU's name ("" on the cpu backend).
std::vector<std::string> recipe_differences(const Recipe& r, const RunConfig& c,
                                            const std::string& device);

nlohmann::json to_json(const Recipe& r);

}  // namespace moebench
