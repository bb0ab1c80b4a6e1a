// `moebench predict`: what a system should reach on a workload, per GPU count, from the step-time
// model (workloads/predict) with the system's figures and its generation's efficiencies; for a
// recipe, its published figure beside the prediction.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli/commands.hpp"
#include "harness/cli/measured.hpp"
#include "harness/cli/plot.hpp"
#include "harness/cli/prediction.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/schema.hpp"
#include "harness/systems/efficiencies.hpp"
#include "workloads/accounting/memory_model.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {

namespace {

// One activation policy's estimate at a point: the largest pipeline rank's, with the CUDA
// context's reserve on a GPU, against the system's GPU memory.
struct MemoryView {
  double max_rank_bytes = 0;
  int pp_rank = 0;
  bool fits = true;  // true where the system gives no GPU memory
};

struct Point {
  int gpus = 0;
  RunConfig config;
  Prediction prediction;
  MemoryView own;      // moebench's own step (run_policy), as `run` would allocate it
  MemoryView trainer;  // as Megatron-Core with Transformer Engine keeps it, the row's settings
  // For moebench's step where it does not fit: the memory flags that would make it fit, or none
  // found (to_fit empty, best_bytes the smallest estimate tried).
  std::vector<std::string> to_fit;
  double best_bytes = 0;
};

// The recipe's trainer, with --ep-comm-overlap in place of its all-to-all overlap where given.
TrainerRules rules_for(const CliOptions& o, const RunConfig& c) {
  TrainerRules t = trainer_rules(c);
  if (!o.ep_comm_overlap.empty()) t.ep_overlap = o.ep_comm_overlap == "on";
  if (!o.cuda_graphs.empty()) t.host_gaps = host_gaps_of(o.cuda_graphs);
  if (!o.fp8_attention.empty()) {
    t.fp8_attention = o.fp8_attention == "on" && c.precision == Precision::fp8;
  }
  return t;
}

MemoryView memory_view(const RunConfig& c, const SystemSpec& system, const ActivationPolicy& p) {
  MemoryView v;
  const std::size_t storage = static_cast<std::size_t>(hardware_for(system, c).storage_bytes);
  for (const StageMemory& s : estimate_stage_memory(c, storage, p)) {
    if (s.memory.total() > v.max_rank_bytes) {
      v.max_rank_bytes = s.memory.total();
      v.pp_rank = s.pp_rank;
    }
  }
  if (system.generation != "cpu") v.max_rank_bytes += kGpuContextReserveBytes;
  if (system.memory_bytes.value) v.fits = v.max_rank_bytes <= *system.memory_bytes.value;
  return v;
}

// The memory flags that make moebench's step fit the GPU, tried cumulatively from the cheapest in
// time: nothing recomputed first (FP8 weights quantised at each GEMM, the experts' inputs kept in
// FP8, Adam's moments in BF16), then modules recomputed from the norms up, the GEMMs last.
void find_fit(const RunConfig& c, const SystemSpec& system, Point& pt) {
  RunConfig t = c;
  std::vector<std::string> flags;
  pt.best_bytes = pt.own.max_rank_bytes;
  const auto tried = [&](const std::string& flag) {
    flags.push_back(flag);
    const MemoryView v = memory_view(t, system, run_policy(t));
    pt.best_bytes = std::min(pt.best_bytes, v.max_rank_bytes);
    if (v.fits) pt.to_fit = flags;
    return v.fits;
  };
  if (t.precision == Precision::fp8) {
    if (t.fp8_weight_copies != Fp8WeightCopies::per_gemm) {
      t.fp8_weight_copies = Fp8WeightCopies::per_gemm;
      if (tried("--fp8-weight-copies per-gemm")) return;
    }
    if (!t.fp8_saved_inputs) {
      t.fp8_saved_inputs = true;
      if (tried("--fp8-saved-inputs on")) return;
    }
  }
  if (t.optimizer == Optimizer::adamw && t.optimizer_state_dtype != OptimizerStateDtype::bf16) {
    t.optimizer_state_dtype = OptimizerStateDtype::bf16;
    if (tried("--optimizer-state-dtype bf16")) return;
  }
  Recompute& r = t.workload.recompute;
  for (bool Recompute::*m : {&Recompute::layernorm, &Recompute::moe_act, &Recompute::mla_up_proj,
                             &Recompute::shared_experts, &Recompute::mlp, &Recompute::core_attn}) {
    if (r.*m) continue;
    r.*m = true;
    flags.erase(
        std::remove_if(flags.begin(), flags.end(),
                       [](const std::string& f) { return f.rfind("--recompute ", 0) == 0; }),
        flags.end());
    if (tried("--recompute " + join(recompute_names(r), ","))) return;
  }
}

Point predict_point(const CliOptions& o, int gpus, const SystemSpec& system,
                    const EfficiencySet& eff, const Calibration* calibration,
                    const MeasuredFigures* measured) {
  Point pt;
  pt.gpus = gpus;
  pt.config = predict_config(o, gpus, system);
  const RunConfig& c = pt.config;
  const Hardware hw = hardware_for(system, c);
  // --measured: this system's measured rates in place of datasheet x efficiency.
  Hardware priced = hw;
  Efficiencies e = eff.values;
  if (measured) apply_measured(*measured, priced, e);
  pt.prediction = predict_step(c, priced, e, rules_for(o, c), calibration);
  // Memory beside the price, never instead of it: moebench's step as `run` would allocate it, and
  // the row's trainer as Transformer Engine keeps it (only `run` and `plan --gpu-memory` refuse).
  // --fp8-weight-copies auto resolved as `run` resolves it on this GPU (kept where they fit).
  RunConfig own = c;
  if (system.memory_bytes.value && system.generation != "cpu") {
    own.fp8_weight_copies =
        resolve_fp8_weight_copies(c, static_cast<std::size_t>(hw.storage_bytes),
                                  *system.memory_bytes.value - kGpuContextReserveBytes);
  }
  pt.own = memory_view(own, system, run_policy(own));
  pt.trainer = memory_view(c, system, transformer_engine_policy(c));
  if (!pt.own.fits) find_fit(own, system, pt);
  return pt;
}

std::vector<int> gpu_counts(const CliOptions& o) {
  if (!o.gpus.empty()) {
    for (int g : o.gpus) {
      if (g < 1) throw UsageError("--gpus " + std::to_string(g) + ": GPU counts must be >= 1");
    }
    std::vector<int> g = o.gpus;
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    return g;
  }
  // Without a recipe: the fewest GPUs the layout fills, one expert group per pipeline stage.
  if (o.workload.recipe.empty()) return {std::max(1, o.workload.ep) * std::max(1, o.workload.pp)};
  const int base = recipe(o.workload.recipe).gpus;
  return {base, 4 * base, 32 * base};
}

// The phase that grows most from the first point to `to`: what limits the scaling there.
nlohmann::ordered_json scaling_entry(const Point& first, const Point& to) {
  nlohmann::ordered_json e;
  e["from_gpus"] = first.gpus;
  e["to_gpus"] = to.gpus;
  e["efficiency"] = to.prediction.tflops_per_gpu / first.prediction.tflops_per_gpu;
  std::string name;
  double grow = 0;
  for (std::size_t i = 0; i < first.prediction.phases.size(); ++i) {
    const double d = to.prediction.phases[i].time_s - first.prediction.phases[i].time_s;
    if (d > grow) {
      grow = d;
      name = to.prediction.phases[i].name;
    }
  }
  e["limited_by"] = name.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(name);
  e["growth_s"] = grow;
  return e;
}

// How the global batch goes with the GPU count: the same per GPU at every point (weak scaling),
// the same job-wide (strong), neither, or one point.
std::string scaling_mode(const std::vector<Point>& points) {
  if (points.size() < 2) return "single";
  bool weak = true, strong = true;
  const Point& a = points.front();
  for (const Point& p : points) {
    weak = weak && global_batch(p.config) * a.gpus == global_batch(a.config) * p.gpus;
    strong = strong && global_batch(p.config) == global_batch(a.config);
  }
  return weak ? "weak" : strong ? "strong" : "mixed";
}

// A point's memory statement: each policy's largest rank and whether it fits; for moebench's
// step what would make it fit. max_rank_bytes and fits: the trainer's for a recipe, else
// moebench's step (as before there were both).
nlohmann::ordered_json memory_json(const Point& p, const SystemSpec& system) {
  const auto view = [](const MemoryView& v) {
    return nlohmann::ordered_json{
        {"max_rank_bytes", v.max_rank_bytes}, {"pp_rank", v.pp_rank}, {"fits", v.fits}};
  };
  const MemoryView& main = p.config.recipe ? p.trainer : p.own;
  nlohmann::ordered_json m;
  m["max_rank_bytes"] = main.max_rank_bytes;
  m["gpu_memory_bytes"] = system.memory_bytes.value ? nlohmann::json(*system.memory_bytes.value)
                                                    : nlohmann::json(nullptr);
  m["fits"] = main.fits;
  m["context_reserve_bytes"] = system.generation != "cpu" ? kGpuContextReserveBytes : 0.0;
  m["moebench_step"] = view(p.own);
  if (!p.own.fits) {
    m["moebench_step"]["to_fit"] = p.to_fit.empty() ? nlohmann::ordered_json(nullptr)
                                                    : nlohmann::ordered_json(join(p.to_fit, " "));
    m["moebench_step"]["best_bytes"] = p.best_bytes;
  }
  m["trainer"] = view(p.trainer);
  m["trainer"]["as"] =
      "Megatron-Core with Transformer Engine (FP8 copies of GEMM inputs, k and v "
      "kept apart, FP8 primary weights), the row's recompute and optimizer state";
  return m;
}

nlohmann::ordered_json predict_json(const CliOptions& o, const SystemSpec& system,
                                    const EfficiencySet& eff, const std::vector<Point>& points) {
  const TrainerRules rules = rules_for(o, points.front().config);
  const RunConfig& c0 = points.front().config;
  nlohmann::ordered_json j;
  j["kind"] = "moebench.predict";
  j["schema_version"] = 1;
  j["system"] = system.name;
  j["generation"] = system.generation;
  j["efficiencies"] = eff.document.at("figures");
  j["trainer"] = {
      {"rules", c0.recipe ? "recipe" : "moebench"},
      {"dispatcher", rules.dispatcher == Dispatcher::dedup ? "dedup" : "alltoall"},
      {"ep_comm_overlap", rules.ep_overlap},
      {"fp8_attention", rules.fp8_attention},
      {"cuda_graphs",
       c0.recipe
           ? nlohmann::json(o.cuda_graphs.empty() ? recipe(*c0.recipe).cuda_graphs : o.cuda_graphs)
           : nlohmann::json(nullptr)},
      {"host_overhead", host_overhead(eff.values, rules.host_gaps)},
      {"ep_comm_sms", rules.ep_comm_sms},
      {"grad_reduce_bytes", rules.grad_reduce_bytes > 0 ? rules.grad_reduce_bytes
                                                        : hardware_for(system, c0).storage_bytes},
      {"offload", c0.recipe ? recipe(*c0.recipe).offload : std::vector<std::string>{}}};
  j["workload"] = {{"recipe", c0.recipe ? nlohmann::json(*c0.recipe) : nlohmann::json(nullptr)},
                   {"model", c0.model.name},
                   {"precision", c0.precision == Precision::fp8 && c0.fp8_recipe == Fp8Recipe::mxfp8
                                     ? "mxfp8"
                                     : to_string(c0.precision)},
                   {"seq_len", c0.workload.seq_len},
                   {"micro_batch", c0.workload.micro_batch},
                   {"layers", c0.workload.layers},
                   {"pp", c0.layout.pp},
                   {"vp", c0.layout.vp},
                   {"ep", c0.layout.ep},
                   {"grad_reduce", to_string(c0.grad_reduce)},
                   {"overlap", c0.overlap}};
  const double base = points.front().prediction.tflops_per_gpu;
  j["scaling_mode"] = scaling_mode(points);
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const Point& p : points) {
    nlohmann::ordered_json e;
    e["gpus"] = p.gpus;
    e["global_batch"] = global_batch(p.config);
    e["microbatches"] = microbatches(p.config);
    e["prediction"] = nlohmann::ordered_json(to_json(p.prediction));
    e["per_gpu_efficiency"] = base > 0 ? p.prediction.tflops_per_gpu / base : 0.0;
    e["memory"] = memory_json(p, system);
    arr.push_back(e);
  }
  j["points"] = arr;
  nlohmann::ordered_json scaling = nlohmann::ordered_json::array();
  for (std::size_t i = 1; i < points.size(); ++i) {
    scaling.push_back(scaling_entry(points.front(), points[i]));
  }
  j["scaling"] = scaling;
  nlohmann::ordered_json pub = nullptr;
  if (c0.recipe) {
    const Recipe& r = recipe(*c0.recipe);
    const Point* at = nullptr;
    for (const Point& p : points) {
      if (p.gpus == r.gpus) at = &p;
    }
    // Published for the recipe's own system: a prediction for another says so, and no ratio.
    const bool same = system_for_gpu(r.gpu) == system.name;
    if (!same) at = nullptr;
    pub = {
        {"gpus", r.gpus},
        {"tflops_per_gpu", r.tflops_per_gpu ? nlohmann::json(*r.tflops_per_gpu) : nullptr},
        {"tokens_per_s_per_gpu",
         r.tokens_per_s_per_gpu ? nlohmann::json(*r.tokens_per_s_per_gpu) : nullptr},
        {"source", same ? r.source : r.source + "; measured on " + r.gpu + ", not " + system.name}};
    pub["predicted_over_published"] =
        at && r.tflops_per_gpu ? nlohmann::json(at->prediction.tflops_per_gpu / *r.tflops_per_gpu)
                               : nlohmann::json(nullptr);
  }
  j["published"] = pub;
  nlohmann::ordered_json published = nlohmann::ordered_json::array();
  for (const Recipe& r : recipes()) {
    if (r.tflops_per_gpu && system_for_gpu(r.gpu) == system.name) {
      published.push_back(
          {{"recipe", r.name}, {"gpus", r.gpus}, {"tflops_per_gpu", *r.tflops_per_gpu}});
    }
  }
  j["published_points"] = published;
  return j;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// --measured: each hardware figure the runs gave, beside the datasheet's and the model's rate.
void print_measured(const MeasuredFigures& m, const nlohmann::ordered_json& j) {
  std::printf("# measured on this system (%s), in place of datasheet x efficiency; priced in %s:\n",
              join(m.files, ", ").c_str(), j["measured"]["precision"].get<std::string>().c_str());
  for (const MeasuredTerm& t : m.terms) {
    const bool flops = t.unit == "FLOP/s";
    const double scale = flops ? 1e12 : 1e9;
    const char* unit = flops ? "TFLOP/s" : "GB/s";
    // The name, then a colon: which phases measured it follows the rank that set the step time.
    std::printf("#   %-14s %10s %s measured, datasheet %s, the model's %s (from %s)\n",
                (t.name + ":").c_str(), strprintf("%.4g", t.measured / scale).c_str(), unit,
                strprintf("%.4g", t.datasheet / scale).c_str(),
                strprintf("%.4g", t.datasheet * t.model_efficiency / scale).c_str(),
                join(t.phases, " + ").c_str());
  }
}

// What the memory columns say where a rank does not fit: never a refusal, a statement per point.
void print_memory_notes(const SystemSpec& system, const std::vector<Point>& points) {
  const std::string gpu = system.memory_bytes.value
                              ? strprintf("%.1f GiB", *system.memory_bytes.value / kGiB)
                              : std::string("?");
  for (const Point& p : points) {
    if (!p.own.fits) {
      if (!p.to_fit.empty()) {
        std::printf(
            "# at %d GPUs moebench's step needs %.1f GiB of a %s GPU on pipeline rank %d; "
            "it fits with %s\n",
            p.gpus, p.own.max_rank_bytes / kGiB, gpu.c_str(), p.own.pp_rank,
            join(p.to_fit, " ").c_str());
      } else {
        std::printf(
            "# at %d GPUs moebench's step needs %.1f GiB of a %s GPU on pipeline rank %d, "
            "%.1f GiB at best with every memory flag; a larger --ep or --pp, or a smaller "
            "--micro-batch or --seq-len, would fit it\n",
            p.gpus, p.own.max_rank_bytes / kGiB, gpu.c_str(), p.own.pp_rank, p.best_bytes / kGiB);
      }
    }
    if (!p.trainer.fits) {
      const bool offload = p.config.recipe && !recipe(*p.config.recipe).offload.empty();
      std::printf(
          "# at %d GPUs the trainer's estimate (Transformer Engine) is %.1f GiB on pipeline "
          "rank %d, over the GPU's %s%s\n",
          p.gpus, p.trainer.max_rank_bytes / kGiB, p.trainer.pp_rank, gpu.c_str(),
          offload ? " without the recipe's offload, which the memory model does not count" : "");
    }
  }
}

void print_table(const SystemSpec& system, const EfficiencySet& eff,
                 const std::vector<Point>& points, const nlohmann::ordered_json& j, bool explain) {
  const RunConfig& c0 = points.front().config;
  std::printf("# predict %s on %s (%s), %s efficiencies, %s, pp %d vp %d ep %d, seq %lld\n",
              c0.recipe ? ("recipe " + *c0.recipe).c_str() : c0.model.name.c_str(),
              system.name.c_str(), system.gpu.c_str(), eff.generation.c_str(),
              j["workload"]["precision"].get<std::string>().c_str(), c0.layout.pp, c0.layout.vp,
              c0.layout.ep, static_cast<long long>(c0.workload.seq_len));
  const bool overlap = j["trainer"]["ep_comm_overlap"].get<bool>();
  if (c0.recipe && overlap != recipe(*c0.recipe).ep_comm_overlap) {
    std::printf("# the trainer's all-to-all overlap %s (--ep-comm-overlap), not as the row ran\n",
                overlap ? "on" : "off");
  }
  if (c0.recipe && j["trainer"]["cuda_graphs"] != recipe(*c0.recipe).cuda_graphs) {
    std::printf("# the trainer's CUDA graphs %s (--cuda-graphs), not as the row ran\n",
                j["trainer"]["cuda_graphs"].get<std::string>().c_str());
  }
  const bool fp8_attention = j["trainer"]["fp8_attention"].get<bool>();
  if (c0.recipe &&
      fp8_attention != (recipe(*c0.recipe).fp8_attention && c0.precision == Precision::fp8)) {
    std::printf("# the trainer's core attention in %s (--fp8-attention), not as the row ran\n",
                fp8_attention ? "FP8" : "BF16");
  }
  // Memory: moebench's step as `run` allocates it, and the row's trainer (Transformer Engine).
  constexpr const char* kRow = "%7s %7s %9s %12s %10s %7s %11s %9s %5s %9s %5s\n";
  const std::string mode = j["scaling_mode"].get<std::string>();
  std::printf(kRow, "gpus", "gbs", "step(s)", "TFLOP/s/GPU", "tok/s/GPU", "bubble",
              mode == "weak" || mode == "strong" ? (mode + "-eff").c_str() : "per-GPU-eff",
              "own(GiB)", "fits", "TE(GiB)", "fits");
  const auto num = [](const char* f, double v) {
    return strprintf(f, finite_figure(v, "a predicted figure"));
  };
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const Prediction& q = p.prediction;
    std::printf(
        kRow, std::to_string(p.gpus).c_str(), std::to_string(global_batch(p.config)).c_str(),
        num("%.3f", q.step_s).c_str(),
        num(q.tflops_per_gpu >= 10 ? "%.1f" : "%.3g", q.tflops_per_gpu).c_str(),
        num("%.0f", q.tokens_per_s_per_gpu).c_str(), num("%.1f%%", 100 * q.bubble_fraction).c_str(),
        num("%.1f%%", 100 * j["points"][i]["per_gpu_efficiency"].get<double>()).c_str(),
        num("%.1f", p.own.max_rank_bytes / kGiB).c_str(), p.own.fits ? "yes" : "no",
        num("%.1f", p.trainer.max_rank_bytes / kGiB).c_str(), p.trainer.fits ? "yes" : "no");
  }
  if (!j["published"].is_null()) {
    const auto& pub = j["published"];
    if (!pub["predicted_over_published"].is_null()) {
      std::printf("# published: %.1f TFLOP/s/GPU at %d GPUs; predicted / published %.3f (%s)\n",
                  pub["tflops_per_gpu"].get<double>(), pub["gpus"].get<int>(),
                  pub["predicted_over_published"].get<double>(),
                  pub["source"].get<std::string>().c_str());
    } else {
      std::printf("# published: no TFLOP/s figure for this system at these GPU counts (%s)\n",
                  pub["source"].get<std::string>().c_str());
    }
  }
  print_memory_notes(system, points);
  for (const auto& e : j["scaling"]) {
    if (e["limited_by"].is_null()) {
      std::printf("# from %d to %d GPUs: %.1f%% per-GPU efficiency; no phase grows\n",
                  e["from_gpus"].get<int>(), e["to_gpus"].get<int>(),
                  100 * e["efficiency"].get<double>());
    } else {
      std::printf(
          "# from %d to %d GPUs: %.1f%% per-GPU efficiency, limited by %s (+%.3g s a "
          "step)\n",
          e["from_gpus"].get<int>(), e["to_gpus"].get<int>(), 100 * e["efficiency"].get<double>(),
          e["limited_by"].get<std::string>().c_str(), e["growth_s"].get<double>());
    }
  }
  std::printf(
      "# efficiencies and their sources: `moebench predict --json` (efficiencies); "
      "the model: docs/predicting.md\n");
  if (!explain) return;
  for (const Point& p : {points.front(), points.back()}) {
    const Prediction& q = p.prediction;
    std::printf("# the step at %d GPUs, %.3f s, on pipeline rank %d (the last to finish):\n",
                p.gpus, q.step_s, q.critical_pp_rank);
    std::vector<PredictedPhase> phases = q.phases;
    std::sort(phases.begin(), phases.end(),
              [](const PredictedPhase& a, const PredictedPhase& b) { return a.time_s > b.time_s; });
    for (const PredictedPhase& ph : phases) {
      if (ph.time_s <= 0) continue;
      std::printf("#   %-14s %9.3f s %6.1f%%  %s\n", ph.name.c_str(), ph.time_s,
                  100 * ph.time_s / q.step_s, ph.what.c_str());
    }
    std::printf(
        "#   before overlap: dispatch %.3f s, combine %.3f s, gradient reduction %.3f s, "
        "parameter all-gather %.3f s; grouped GEMM at %.0f rows an expert: %.2f of peak\n",
        q.alltoall_s, q.alltoall_s, q.grad_reduce_s, q.param_gather_s, q.rows_per_expert,
        q.grouped_gemm_efficiency);
    const double host = j["trainer"]["host_overhead"].get<double>();
    if (host > 0) {
      std::printf(
          "#   the trainer's host adds %.0f%% to each pass's compute, inside the phases above "
          "(CUDA graphs: %s)\n",
          100 * host, j["trainer"]["cuda_graphs"].get<std::string>().c_str());
    }
    const int comm_sms = j["trainer"]["ep_comm_sms"].get<int>();
    if (comm_sms > 0 && j["trainer"]["ep_comm_overlap"].get<bool>() && system.sm_count.value) {
      std::printf(
          "#   the dispatcher's kernels hold %d of the GPU's %.0f SMs while its exchanges run "
          "under compute, which runs on the rest meanwhile (in dispatch and combine)\n",
          comm_sms, *system.sm_count.value);
    }
    const auto offload = j["trainer"]["offload"].get<std::vector<std::string>>();
    if (!offload.empty()) {
      std::printf("#   the recipe's offload to host memory (%s):\n", join(offload, ", ").c_str());
    }
    const ExpertInputOffload& o = q.offload;
    for (const std::string& what : offload) {
      if (what == "expert_fc1" && o.priced) {
        std::printf(
            "#     expert_fc1: %.3f GB a MoE layer and micro-batch each way, %.2f ms at the host "
            "link's %.0f GB/s, under the layer's forward of %.2f ms and backward of %.2f ms: "
            "%.3f s of the step exposed (in experts)\n",
            o.bytes / 1e9, o.copy_s * 1e3, *system.host_link_bandwidth.value / 1e9,
            o.layer_forward_s * 1e3, o.layer_backward_s * 1e3, q.offload_exposed_s);
      } else if (what == "expert_fc1") {
        std::printf(
            "#     expert_fc1: priced at nothing, as %s gives no host link bandwidth "
            "(host_link_bandwidth_bytes_per_s)\n",
            system.name.c_str());
      } else if (what == "optimizer_states") {
        std::printf(
            "#     optimizer_states: priced at nothing, as the Megatron-LM commit that published "
            "the row never called its offloader (docs/predicting.md)\n");
      } else {
        std::printf("#     %s: priced at nothing\n", what.c_str());
      }
    }
    if (points.size() == 1) break;
  }
}

}  // namespace

int predict_command(const CliOptions& o) {
  std::string name = o.system;
  if (name.empty() && !o.workload.recipe.empty()) {
    name = system_for_gpu(recipe(o.workload.recipe).gpu);
  }
  if (name.empty()) {
    throw UsageError(
        "give --system NAME|FILE (`moebench systems` lists them): predict needs the "
        "hardware to price the step on");
  }
  const SystemSpec system = find_system(name);
  const EfficiencySet& eff = efficiencies_for(system);
  if (!o.out.empty()) ensure_writable_destination(o.out);
  if (!o.plot.empty()) ensure_writable_destination(o.plot, "--plot");
  std::optional<CalibrationRun> cal;
  if (!o.calibrate.empty()) cal = calibrate(o.calibrate, system, eff);
  std::optional<MeasuredFigures> measured;
  CliOptions priced = o;
  if (!o.measured.empty()) {
    measured = measure_figures(o.measured, system, eff);
    // The figures are rates at the runs' precision: the workload is priced in it.
    priced.workload.precision = measured->precision;
    priced.workload.fp8_recipe = measured->precision == Precision::fp8
                                     ? std::optional<Fp8Recipe>(measured->fp8_recipe)
                                     : std::nullopt;
  }
  std::vector<Point> points;
  for (int g : gpu_counts(priced)) {
    points.push_back(predict_point(priced, g, system, eff, cal ? &cal->calibration : nullptr,
                                   measured ? &*measured : nullptr));
  }
  for (const std::string& w : points.front().config.warnings) {
    std::cerr << "moebench: warning: " << w << "\n";
  }
  nlohmann::ordered_json j = predict_json(priced, system, eff, points);
  j["measured"] = measured ? to_json(*measured) : nlohmann::ordered_json(nullptr);
  for (auto& point : j["points"]) {
    point["priced_from"] = measured_sources(measured ? *measured : MeasuredFigures{});
  }
  if (cal) {
    nlohmann::ordered_json scales = nlohmann::ordered_json::object();
    for (const auto& [name, v] : cal->calibration.phase_scale) scales[name] = v;
    j["calibration"] = {{"report", cal->path},
                        {"phase_scale", scales},
                        {"wait_fraction", cal->calibration.wait_fraction},
                        {"measured_step_s", cal->measured_step_s},
                        {"predicted_step_s", cal->predicted_step_s}};
  } else {
    j["calibration"] = nullptr;
  }
  // Every number a figure (nlohmann writes NaN and infinity as null, which the schema refuses).
  check_finite_numbers(j, "predict's JSON");
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    if (measured) print_measured(*measured, j);
    print_table(system, eff, points, j, o.explain);
  }
  const std::string text = j.dump(2) + "\n";
  if (!o.out.empty()) write_file_atomically(o.out, text);
  if (!o.plot.empty()) {
    const bool temporary = o.out.empty();
    const std::string json_path = temporary ? write_temporary_file(o.plot, text) : o.out;
    std::cout << std::flush;
    const bool drawn = draw_plot("plot_predict.py", json_path, o.plot, temporary);
    if (temporary) std::filesystem::remove(json_path);
    if (drawn && !o.json) std::cout << "# plot: " << o.plot << "\n";
  }
  return 0;
}

}  // namespace moebench
