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

struct Point {
  int gpus = 0;
  RunConfig config;
  Prediction prediction;
  double memory_bytes = 0;  // the largest rank's estimate, with the context reserve on a GPU
  bool fits = true;
};

// The recipe's trainer, with --ep-comm-overlap in place of its all-to-all overlap where given.
TrainerRules rules_for(const CliOptions& o, const RunConfig& c) {
  TrainerRules t = trainer_rules(c);
  if (!o.ep_comm_overlap.empty()) t.ep_overlap = o.ep_comm_overlap == "on";
  return t;
}

Point predict_point(const CliOptions& o, int gpus, const SystemSpec& system,
                    const EfficiencySet& eff, const Calibration* calibration) {
  Point pt;
  pt.gpus = gpus;
  pt.config = predict_config(o, gpus, system);
  const RunConfig& c = pt.config;
  const Hardware hw = hardware_for(system, c);
  pt.prediction = predict_step(c, hw, eff.values, rules_for(o, c), calibration);
  // Memory: a recipe as Megatron with Transformer Engine runs it, else moebench's own step.
  const ActivationPolicy policy = c.recipe ? transformer_engine_policy(c) : run_policy(c);
  for (const StageMemory& s :
       estimate_stage_memory(c, static_cast<std::size_t>(hw.storage_bytes), policy)) {
    pt.memory_bytes = std::max(pt.memory_bytes, s.memory.total());
  }
  const bool gpu = system.generation != "cpu";
  if (gpu) pt.memory_bytes += kGpuContextReserveBytes;
  if (system.memory_bytes.value) pt.fits = pt.memory_bytes <= *system.memory_bytes.value;
  if (!pt.fits && !(c.recipe && !recipe(*c.recipe).offload.empty())) {
    throw UsageError("at " + std::to_string(gpus) + " GPUs the largest rank needs an estimated " +
                     format_gib(pt.memory_bytes) + (gpu ? " (with the CUDA context)" : "") +
                     " but a GPU of " + system.name + " has " +
                     format_gib(*system.memory_bytes.value) +
                     "; use a larger --ep or --pp, fewer --layers, or a smaller --seq-len or "
                     "--micro-batch");
  }
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
       c0.recipe ? nlohmann::json(recipe(*c0.recipe).cuda_graphs) : nlohmann::json(nullptr)},
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
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const Point& p : points) {
    nlohmann::ordered_json e;
    e["gpus"] = p.gpus;
    e["global_batch"] = global_batch(p.config);
    e["microbatches"] = microbatches(p.config);
    e["prediction"] = nlohmann::ordered_json(to_json(p.prediction));
    e["weak_scaling_efficiency"] = base > 0 ? p.prediction.tflops_per_gpu / base : 0.0;
    e["memory"] = {
        {"max_rank_bytes", p.memory_bytes},
        {"gpu_memory_bytes", system.memory_bytes.value ? nlohmann::json(*system.memory_bytes.value)
                                                       : nlohmann::json(nullptr)},
        {"fits", p.fits}};
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
  constexpr const char* kRow = "%7s %7s %9s %12s %10s %7s %9s %9s %5s\n";
  std::printf(kRow, "gpus", "gbs", "step(s)", "TFLOP/s/GPU", "tok/s/GPU", "bubble", "weak-eff",
              "mem(GiB)", "fits");
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
        num("%.1f%%", 100 * j["points"][i]["weak_scaling_efficiency"].get<double>()).c_str(),
        num("%.1f", p.memory_bytes / (1024.0 * 1024.0 * 1024.0)).c_str(), p.fits ? "yes" : "no");
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
  for (const Point& p : points) {
    if (!p.fits) {
      std::printf(
          "# at %d GPUs the largest rank does not fit without the recipe's offload "
          "(moebench's memory model has no offload)\n",
          p.gpus);
    }
  }
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
  std::vector<Point> points;
  for (int g : gpu_counts(o)) {
    points.push_back(predict_point(o, g, system, eff, cal ? &cal->calibration : nullptr));
  }
  for (const std::string& w : points.front().config.warnings) {
    std::cerr << "moebench: warning: " << w << "\n";
  }
  nlohmann::ordered_json j = predict_json(o, system, eff, points);
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
