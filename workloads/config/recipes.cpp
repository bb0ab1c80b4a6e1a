#include "workloads/config/recipes.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

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
    r.main_grads_dtype = j.at("main_grads_dtype").get<std::string>();
    if (r.main_grads_dtype != "bf16" && r.main_grads_dtype != "fp32") {
      throw std::runtime_error("recipes.json: " + r.name + ": main_grads_dtype " +
                               r.main_grads_dtype + " (expected bf16 or fp32)");
    }
    r.recompute = j.at("recompute").get<std::vector<std::string>>();
    r.offload = j.at("offload").get<std::vector<std::string>>();
    r.dispatcher = j.at("dispatcher").get<std::string>();
    r.ep_comm_overlap = j.at("ep_comm_overlap").get<bool>();
    r.fp8_attention = j.at("fp8_attention").get<bool>();
    r.cuda_graphs = j.at("cuda_graphs").get<std::string>();
    r.ep_comm_sms = j.at("ep_comm_sms").get<int>();
    r.trainer_source = j.at("trainer_source").get<std::string>();
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
  return scaled_layout(r, layers, r.pp, r.vp);
}

std::string scaled_layout(const Recipe& r, int layers, int pp, int vp) {
  const PipelineLayout given = parse_pipeline_layout(r.pipeline_layout, r.pp);
  const std::size_t n = static_cast<std::size_t>(pp) * static_cast<std::size_t>(vp);
  const std::size_t recipe_stages = given.stages.size();
  if (n == recipe_stages && given.decoder_layers() == layers) return r.pipeline_layout;
  // Each stage's weight: the recipe's own stages, or its first, middle (mean) and last.
  std::vector<double> weight(n);
  if (n == recipe_stages) {
    for (std::size_t s = 0; s < n; ++s) weight[s] = given.stages[s].layers;
  } else {
    double middle = 0;
    for (std::size_t s = 1; s + 1 < recipe_stages; ++s) middle += given.stages[s].layers;
    middle = recipe_stages > 2 ? middle / static_cast<double>(recipe_stages - 2)
                               : given.decoder_layers() / static_cast<double>(recipe_stages);
    for (std::size_t s = 0; s < n; ++s) {
      weight[s] = s == 0       ? given.stages.front().layers
                  : s + 1 == n ? given.stages.back().layers
                               : middle;
    }
  }
  // At least one layer a stage where there are enough, the rest in proportion to the weights.
  const int floor_each = layers >= static_cast<int>(n) ? 1 : 0;
  const int spread = layers - floor_each * static_cast<int>(n);
  double total = 0;
  for (double w : weight) total += w;
  if (!(total > 0)) {
    std::fill(weight.begin(), weight.end(), 1.0);
    total = static_cast<double>(n);
  }
  std::vector<int> counts(n);
  std::vector<std::pair<double, std::size_t>> rest;
  int given_out = 0;
  for (std::size_t s = 0; s < n; ++s) {
    const double share = weight[s] * spread / total;
    const int whole = static_cast<int>(std::floor(share));
    counts[s] = floor_each + whole;
    given_out += counts[s];
    rest.emplace_back(share - whole, s);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int i = 0; i < layers - given_out; ++i) ++counts[rest[static_cast<std::size_t>(i)].second];
  std::vector<PipelineStage> stages(n);
  int first = 0;
  for (std::size_t s = 0; s < n; ++s) {
    stages[s].first_layer = first;
    stages[s].layers = counts[s];
    first += counts[s];
  }
  stages.front().embedding = given.stages.front().embedding;
  stages.back().loss = given.stages.back().loss;
  stages.back().mtp = given.stages.back().mtp;
  return layout_text(stages);
}

ScaledPipeline scaled_pipeline(const Recipe& r, int layers, int world, int ep) {
  ScaledPipeline out{r.pp, r.vp, "", ""};
  while (out.vp > 1 && out.pp * out.vp > layers) --out.vp;
  if (out.pp > layers) {  // even one chunk a rank leaves stages empty: fewer pipeline ranks
    const auto divides = [&](int pp) { return world % pp == 0 && (world / pp) % ep == 0; };
    out.pp = std::max(layers, 1);
    while (out.pp > 1 && !divides(out.pp)) --out.pp;
    out.vp = 1;
  }
  if (out.pp == r.pp && out.vp == r.vp) {
    out.layout = scaled_layout(r, layers);
    return out;
  }
  out.layout = scaled_layout(r, layers, out.pp, out.vp);
  const int stages = r.pp * r.vp;
  out.note = "--recipe " + r.name + ": its " + str(stages) + " pipeline stages (pp " + str(r.pp) +
             " x vp " + str(r.vp) + ") would leave " + str(stages - layers) +
             " without a decoder layer for the " + str(layers) + " this run places; running pp " +
             str(out.pp) + ", vp " + str(out.vp) + ", layout " + out.layout + " (give --pp " +
             str(r.pp) + " --vp " + str(r.vp) + " for the recipe's, with empty stages)";
  return out;
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
  j["main_grads_dtype"] = r.main_grads_dtype;
  j["recompute"] = r.recompute;
  j["offload"] = r.offload;
  j["dispatcher"] = r.dispatcher;
  j["ep_comm_overlap"] = r.ep_comm_overlap;
  j["fp8_attention"] = r.fp8_attention;
  j["cuda_graphs"] = r.cuda_graphs;
  j["ep_comm_sms"] = r.ep_comm_sms;
  j["trainer_source"] = r.trainer_source;
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
