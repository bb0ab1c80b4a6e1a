#include "workloads/config/recipes.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"
#include "harness/core/human.hpp"

namespace moebench {

extern const char* const kRecipesJson;  // generated from recipes.json (harness/layers.cmake)

namespace {

std::optional<double> optional_number(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

std::vector<Recipe> parse_recipes() {
  const nlohmann::json doc = nlohmann::json::parse(kRecipesJson);
  std::vector<Recipe> out;
  for (const nlohmann::json& j : doc.at("recipes")) {
    Recipe r;
    r.name = j.at("name").get<std::string>();
    r.model = j.at("model").get<std::string>();
    r.system = j.at("system").get<std::string>();
    r.gpu = j.at("gpu").get<std::string>();
    r.gpu_memory_bytes = j.at("gpu_memory_bytes").get<double>();
    r.gpus = j.at("gpus").get<int>();
    r.tp = j.at("tp").get<int>();
    r.pp = j.at("pp").get<int>();
    r.vp = j.at("vp").get<int>();
    r.ep = j.at("ep").get<int>();
    r.micro_batch = j.at("micro_batch").get<std::int64_t>();
    r.global_batch = j.at("global_batch").get<std::int64_t>();
    r.seq_len = j.at("seq_len").get<std::int64_t>();
    r.precision = j.at("precision").get<std::string>();
    r.pipeline_layout = j.at("pipeline_layout").get<std::string>();
    r.schedule = j.at("schedule").get<std::string>();
    r.routing = j.at("routing").get<std::string>();
    r.grad_reduce = j.at("grad_reduce").get<std::string>();
    r.optimizer_state_dtype = j.at("optimizer_state_dtype").get<std::string>();
    r.recompute = j.at("recompute").get<std::vector<std::string>>();
    r.offload = j.at("offload").get<std::vector<std::string>>();
    if (!j.at("recipe_file").is_null()) r.recipe_file = j.at("recipe_file").get<std::string>();
    r.tokens_per_s_per_gpu = optional_number(j, "tokens_per_s_per_gpu");
    r.tflops_per_gpu = optional_number(j, "tflops_per_gpu");
    r.source = j.at("source").get<std::string>();
    out.push_back(std::move(r));
  }
  return out;
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> all = parse_recipes();
  return all;
}

const Recipe& recipe(const std::string& name) {
  std::string names;
  for (const Recipe& r : recipes()) {
    if (r.name == name) return r;
    names += (names.empty() ? "" : ", ") + r.name;
  }
  throw UsageError("--recipe '" + name + "' is not a published recipe; valid: " + names +
                   " (`moebench recipes` lists them)");
}

Recompute recompute_of(const Recipe& r) {
  return parse_recompute(join(r.recompute, ","));
}

std::string offload_refusal(const Recipe& r) {
  if (r.offload.empty()) return "";
  return "--recipe " + r.name + " offloads " + join(r.offload, " and ") +
         " to host memory, which moebench does not implement, so it cannot run the row as "
         "published; `moebench plan --recipe " +
         r.name +
         "` estimates it without offload, and a run of its workload needs the flags "
         "without --recipe (`moebench recipes --json` lists them)";
}

std::string scaled_layout(const Recipe& r, int layers) {
  PipelineLayout l = parse_pipeline_layout(r.pipeline_layout, r.pp);
  const int total = l.decoder_layers();
  if (total == layers) return r.pipeline_layout;
  // Largest remainder: floor shares first, the rest to the largest fractions (earlier first).
  std::vector<int> counts(l.stages.size());
  std::vector<std::pair<double, std::size_t>> rest;
  int given = 0;
  for (std::size_t s = 0; s < l.stages.size(); ++s) {
    const double share = static_cast<double>(l.stages[s].layers) * layers / total;
    counts[s] = static_cast<int>(std::floor(share));
    given += counts[s];
    rest.emplace_back(share - counts[s], s);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int i = 0; i < layers - given; ++i) ++counts[rest[static_cast<std::size_t>(i)].second];
  int first = 0;
  for (std::size_t s = 0; s < l.stages.size(); ++s) {
    l.stages[s].first_layer = first;
    l.stages[s].layers = counts[s];
    first += counts[s];
  }
  return layout_text(l.stages);
}

Precision run_precision(const Recipe& r) {
  return r.precision == "mxfp8" || r.precision == "fp8" ? Precision::fp8 : Precision::bf16;
}

std::vector<std::string> recipe_differences(const Recipe& r, const RunConfig& c,
                                            const std::string& device) {
  std::vector<std::string> d;
  if (c.model.name != r.model) d.push_back("model: " + c.model.name + ", not " + r.model);
  if (c.workload.layers != c.model.num_hidden_layers || c.workload.attention == false) {
    d.push_back("layers: " + str(c.workload.layers) + " of the model's " +
                str(c.model.num_hidden_layers) + " decoder layers instantiated" +
                (c.workload.attention ? "" : ", attention off"));
  }
  if (!c.workload.head) {
    d.push_back(
        "layers: the embedding, the output head and the loss are not run (--head off; their FLOPs "
        "are in the published row's count, not in this run's)");
  }
  if (c.workload.mtp != c.model.num_nextn_predict_layers) {
    d.push_back("layers: " + str(c.workload.mtp) + " of the model's " +
                str(c.model.num_nextn_predict_layers) + " MTP layers run");
  }
  // MXFP8 scales blocks of 32 with powers of two: --fp8-recipe mxfp8 (Blackwell).
  if (c.precision != run_precision(r)) {
    d.push_back("precision: " + std::string(to_string(c.precision)) + ", not " + r.precision);
  } else if (r.precision == "mxfp8" && c.fp8_recipe != Fp8Recipe::mxfp8) {
    d.push_back("precision: fp8 with " + describe(c.fp8_recipe) + " (--fp8-recipe " +
                to_string(c.fp8_recipe) +
                "), not mxfp8 (a scale per 32 values; --fp8-recipe mxfp8, on Blackwell)");
  }
  if (c.fp8_emulated()) d.push_back("precision: fp8 emulated in FP32 on the cpu backend");
  // The published FP8 rows gather FP8 primary weights (fp8_param_gather): quantised once a step.
  if (c.precision == Precision::fp8 && c.fp8_weight_copies == Fp8WeightCopies::per_gemm) {
    d.push_back(
        "precision: each weight quantised at every GEMM (--fp8-weight-copies per-gemm, for "
        "memory), not once a step from FP8 primary weights (fp8_param_gather)");
  }
  if (c.precision == Precision::fp8 && !c.fp8_saved_inputs) {
    d.push_back(
        "memory: the routed experts' GEMM inputs kept in the storage precision "
        "(--fp8-saved-inputs off), not as FP8 copies");
  }
  const ParallelLayout& p = c.layout;
  const std::string layout = pipeline_layout(c).text;
  if (p.pp != r.pp || p.vp != r.vp || p.ep != r.ep || r.tp != 1) {
    d.push_back("layout: tp 1, pp " + str(p.pp) + ", vp " + str(p.vp) + ", ep " + str(p.ep) +
                ", not tp " + str(r.tp) + ", pp " + str(r.pp) + ", vp " + str(r.vp) + ", ep " +
                str(r.ep));
  }
  if (layout != r.pipeline_layout) {
    d.push_back("layout: pipeline layout " + layout + ", not " + r.pipeline_layout);
  }
  if (r.schedule == "dualpipe") d.push_back("layout: the schedule is 1F1B, not DualPipe");
  if (c.workload.micro_batch != r.micro_batch || global_batch(c) != r.global_batch ||
      c.workload.seq_len != r.seq_len) {
    d.push_back("batch: micro-batch " + str(c.workload.micro_batch) + ", global batch " +
                str(global_batch(c)) + ", seq " + str(c.workload.seq_len) + ", not " +
                str(r.micro_batch) + ", " + str(r.global_batch) + ", " + str(r.seq_len));
  }
  if (p.world != r.gpus) {
    d.push_back("gpus: " + str(p.world) + ", not " + str(r.gpus));
  }
  if (to_string(c.grad_reduce) != r.grad_reduce) {
    d.push_back("optimizer: --grad-reduce " + to_string(c.grad_reduce) + ", not " + r.grad_reduce);
  }
  if (to_string(c.optimizer_state_dtype) != r.optimizer_state_dtype) {
    d.push_back("optimizer: moments in " + to_string(c.optimizer_state_dtype) + ", not " +
                r.optimizer_state_dtype);
  }
  if (to_string(c.workload.routing) != r.routing) {
    d.push_back("routing: " + to_string(c.workload.routing) + ", not " + r.routing);
  }
  // The recompute the row ran: skipping it measures a faster step than the row's, adding some a
  // slower one.
  if (c.workload.recompute != recompute_of(r)) {
    const auto named = [](const std::vector<std::string>& modules) {
      return modules.empty() ? std::string("none") : join(modules, ",");
    };
    d.push_back("recompute: " + named(recompute_names(c.workload.recompute)) + ", not " +
                named(r.recompute));
  }
  if (device.find(r.gpu) == std::string::npos) {
    d.push_back("system: " + (device.empty() ? std::string("the cpu backend") : device) + ", not " +
                r.gpu);
  }
  return d;
}

nlohmann::json to_json(const Recipe& r) {
  nlohmann::json j;
  j["name"] = r.name;
  j["model"] = r.model;
  j["system"] = r.system;
  j["gpu"] = r.gpu;
  j["gpu_memory_bytes"] = r.gpu_memory_bytes;
  j["gpus"] = r.gpus;
  j["tp"] = r.tp;
  j["pp"] = r.pp;
  j["vp"] = r.vp;
  j["ep"] = r.ep;
  j["micro_batch"] = r.micro_batch;
  j["global_batch"] = r.global_batch;
  j["seq_len"] = r.seq_len;
  j["precision"] = r.precision;
  j["pipeline_layout"] = r.pipeline_layout;
  j["schedule"] = r.schedule;
  j["routing"] = r.routing;
  j["grad_reduce"] = r.grad_reduce;
  j["optimizer_state_dtype"] = r.optimizer_state_dtype;
  j["recompute"] = r.recompute;
  j["offload"] = r.offload;
  j["tokens_per_s_per_gpu"] =
      r.tokens_per_s_per_gpu ? nlohmann::json(*r.tokens_per_s_per_gpu) : nlohmann::json(nullptr);
  j["tflops_per_gpu"] =
      r.tflops_per_gpu ? nlohmann::json(*r.tflops_per_gpu) : nlohmann::json(nullptr);
  j["recipe_file"] =
      r.recipe_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.recipe_file);
  j["source"] = r.source;
  return j;
}

}  // namespace moebench
