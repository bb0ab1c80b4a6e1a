// `moebench run`'s (and plan's and predict's) configuration from the parsed flags: the preset or
// model file, the recipe and what overrides it, the layout checked against the world size.
#include <algorithm>
#include <sstream>

#include "harness/backends/registry/registry.hpp"
#include "harness/cli/option_checks.hpp"
#include "harness/cli/options.hpp"
#include "harness/compute/backend_kind.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {

using namespace option_checks;

RunConfig resolve_run_config(const CliOptions& o, int world) {
  const WorkloadFlags& w = o.workload;
  const auto given = [&](const char* flag) {
    return std::find(w.given.begin(), w.given.end(), flag) != w.given.end();
  };
  const Recipe* rec = w.recipe.empty() ? nullptr : &recipe(w.recipe);
  RunConfig c;
  if (!w.preset.empty()) {
    c.model = preset(w.preset);
  } else if (!w.model_config.empty()) {
    c.model = load_model_config(w.model_config, &c.warnings);
  } else {
    c.model = preset(rec->model);
  }
  validate(c.model, c.model.name);
  std::int64_t seq = 4096;
  for (const PresetInfo& p : preset_list()) {
    if (p.name == w.preset) seq = p.default_seq_len;
  }
  c.workload.seq_len = w.seq_len.value_or(seq);
  c.workload.micro_batch = w.micro_batch;
  c.workload.global_batch = w.global_batch.value_or(0);
  // A recipe on another model (the tiny preset) runs the model's own sequence and a few
  // micro-batches a rank, unless --keep-batch: the row's 4096 tokens and 32 micro-batches a rank
  // would make a step of a small model on a few cores take an hour.
  const bool recipe_batch = rec && (c.model.name == rec->model || w.keep_batch);
  std::vector<std::string> scaled;  // what of the recipe this run scales to the model
  if (rec && !given("--seq-len")) {
    if (recipe_batch) {
      c.workload.seq_len = rec->seq_len;
    } else if (c.workload.seq_len != rec->seq_len) {
      scaled.push_back("seq " + std::to_string(c.workload.seq_len) + " (the model's), not " +
                       std::to_string(rec->seq_len));
    }
  }
  if (rec && !given("--micro-batch")) c.workload.micro_batch = rec->micro_batch;
  if (rec && !given("--global-batch") && recipe_batch) {
    // Weak scaling, as NVIDIA's statement runs it: the global batch grows with the GPU count.
    c.workload.global_batch = rec->global_batch * world / rec->gpus;
    if (c.workload.global_batch * rec->gpus != rec->global_batch * world) {
      throw UsageError("--recipe " + rec->name + " at " + std::to_string(world) +
                       " ranks: its global batch of " + std::to_string(rec->global_batch) +
                       " sequences at " + std::to_string(rec->gpus) +
                       " GPUs does not scale to a whole number; give --global-batch");
    }
  }
  c.workload.layers = w.layers.value_or(c.model.num_hidden_layers);
  if (c.workload.layers >= 1 && c.workload.layers <= c.model.num_hidden_layers) {
    c.workload.dense_layers =
        w.dense_layers.value_or(default_dense_layers(c.model, c.workload.layers));
  } else {
    c.workload.dense_layers = w.dense_layers.value_or(0);
  }
  c.workload.attention = on_off("--attention", w.attention);
  c.workload.routing = parse_routing(rec && !given("--routing") ? rec->routing : w.routing);
  c.workload.recompute =
      rec && !given("--recompute") ? recompute_of(*rec) : parse_recompute(w.recompute);
  c.layout.world = world;
  c.layout.ep = rec && !given("--ep") ? rec->ep : w.ep;
  c.layout.pp = rec && !given("--pp") ? rec->pp : w.pp;
  c.layout.pipeline_layout = w.pipeline_layout;
  // --pipeline-layout, parsed once: it sets vp, the ends and the MTP count where flags do not.
  const std::optional<PipelineLayout> given_layout =
      !w.pipeline_layout.empty() && c.layout.pp >= 1
          ? std::optional<PipelineLayout>(parse_pipeline_layout(w.pipeline_layout, c.layout.pp))
          : std::nullopt;
  // --vp, else the recipe's, else the stage count of --pipeline-layout, else 1.
  if (w.vp) {
    c.layout.vp = *w.vp;
  } else if (rec) {
    c.layout.vp = rec->vp;
  } else if (given_layout) {
    c.layout.vp = given_layout->vp;
  }
  if (rec && !given("--pipeline-layout") && !given("--pp") && !w.vp) {
    // The recipe's layout, its layers spread over its stages when the model is smaller, and
    // fewer stages when some would hold no layer.
    const ScaledPipeline sp =
        scaled_pipeline(*rec, static_cast<int>(c.workload.layers), world, c.layout.ep);
    c.layout.pp = sp.pp;
    c.layout.vp = sp.vp;
    c.layout.pipeline_layout = sp.layout;
    if (!sp.note.empty()) c.warnings.push_back(sp.note);
  } else if (rec && !given("--pipeline-layout") && c.layout.pp == rec->pp &&
             c.layout.vp == rec->vp) {
    c.layout.pipeline_layout = scaled_layout(*rec, static_cast<int>(c.workload.layers));
  }
  if (rec && !given("--global-batch") && !recipe_batch) {
    // 2 x pp micro-batches a rank: the pipeline fills (and interleaving needs a multiple of pp).
    const std::int64_t per_rank = 2 * c.layout.pp;
    const std::int64_t dp = c.layout.pp >= 1 && world % c.layout.pp == 0 ? world / c.layout.pp : 1;
    c.workload.global_batch = per_rank * c.workload.micro_batch * dp;
    scaled.push_back(std::to_string(per_rank) + " micro-batches a rank (global batch " +
                     std::to_string(c.workload.global_batch) + "), not the recipe's " +
                     std::to_string(rec->global_batch / std::max(1, rec->gpus / rec->pp) /
                                    std::max<std::int64_t>(1, rec->micro_batch)));
  }
  if (!scaled.empty()) {
    c.warnings.push_back("--recipe " + rec->name + " on " + c.model.name + ", not " + rec->model +
                         ": " + join(scaled, ", ") + "; --keep-batch keeps the recipe's");
  }
  // The model's ends: as --head says; else as the given layout places E and L; else on.
  if (!w.head.empty()) {
    c.workload.head = on_off("--head", w.head);
  } else {
    c.workload.head = !given_layout || given_layout->has_embedding() || given_layout->has_loss();
  }
  if (w.mtp) {
    c.workload.mtp = *w.mtp;
  } else if (given_layout) {
    c.workload.mtp = given_layout->mtp_layers();
  } else {
    c.workload.mtp = c.workload.head ? c.model.num_nextn_predict_layers : 0;
  }
  if (rec && !given("--pipeline-layout") && !c.layout.pipeline_layout.empty()) {
    // The recipe's layout without what --head off or --mtp 0 does not run.
    const bool head = c.workload.head, mtp = c.workload.mtp > 0;
    std::erase_if(c.layout.pipeline_layout, [&](char ch) {
      return (!head && (ch == 'E' || ch == 'L')) || (!mtp && ch == 'm');
    });
  }
  if (rec) {
    c.recipe = rec->name;
    for (const std::string& f : w.given) c.recipe_overrides.push_back(f);
  }
  c.layout.ranks_per_node = w.ranks_per_node;
  c.layout.nvlink_domain_size = w.nvlink_domain_size;
  const std::string grad_reduce = rec && !given("--grad-reduce") ? rec->grad_reduce : w.grad_reduce;
  c.grad_reduce =
      grad_reduce == "reduce-scatter" ? GradReduce::reduce_scatter : GradReduce::allreduce;
  c.optimizer = w.optimizer == "none" ? Optimizer::none : Optimizer::adamw;
  c.optimizer_state_dtype = parse_optimizer_state_dtype(rec && !given("--optimizer-state-dtype")
                                                            ? rec->optimizer_state_dtype
                                                            : w.optimizer_state_dtype);
  c.adamw = w.adamw;
  c.seed = w.seed;
  c.warmup = o.warmup;
  c.steps = o.steps;
  c.verify = o.verify;
  c.backend = w.backend;
  c.comm = w.comm;
  c.blas_threads = w.blas_threads;
  c.comm_barrier = on_off("--comm-barrier", w.comm_barrier);
  c.overlap = on_off("--overlap", w.overlap);
  c.grad_bucket_bytes = grad_bucket_bytes(w.grad_bucket_mb);
  c.inject = o.inject;
  validate(c);
  check_comm_backend(c.comm, c.backend);
  // The one resolution: the flag, else the recipe's, else the backend's own.
  std::optional<Precision> precision = w.precision;
  if (!precision && rec) precision = run_precision(*rec);
  c.precision = resolve_precision(c.backend, precision);
  c.fp8_recipe = resolve_fp8_recipe(w.fp8_recipe, c.precision);
  c.fp8_weight_copies = parse_fp8_weight_copies(w.fp8_weight_copies);
  c.fp8_saved_inputs = on_off("--fp8-saved-inputs", w.fp8_saved_inputs);
  c.grouped_gemm = parse_grouped_gemm_impl(w.grouped_gemm);
  c.attention_impl = parse_attention_impl(w.attention_impl);
  check_timeout(o.timeout_s);
  c.comm_timeout_s = o.timeout_s;
  check_health_flags(o.health_mad, o.health_min_slowdown);
  return c;
}

}  // namespace moebench
