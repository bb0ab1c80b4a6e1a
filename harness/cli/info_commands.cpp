// The commands that read or compute but run no step: plan, presets, validate.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/cli/commands.hpp"
#include "harness/cli/prediction.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/linkcheck_report.hpp"
#include "harness/output/phase_table.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/schema.hpp"
#include "harness/systems/systems.hpp"
#include "harness/verify/verify_cost.hpp"
#include "workloads/accounting/accounting.hpp"
#include "workloads/accounting/memory_model.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {

namespace {

std::string human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(v) >= 1000.0 && i < 6) {
    v /= 1000.0;
    ++i;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g %s%s", v, prefixes[i], unit);
  return buf;
}

std::string gib(double bytes) {
  return format_gib(bytes, 3);
}

nlohmann::ordered_json plan_json(const RunConfig& c) {
  nlohmann::ordered_json j;
  j["kind"] = "moebench.plan";
  j["schema_version"] = 1;
  j["config"]["model"] = to_json(c.model);
  j["config"]["workload"] = to_json(c.workload, c.layout);
  j["parallel"] = to_json(c.layout);
  const double tokens = static_cast<double>(tokens_per_step(c));
  j["accounting"]["full_model"] =
      to_json(account_full_model(c.model, c.workload.seq_len, tokens, c.workload.recompute));
  j["accounting"]["instantiated"] = to_json(account_instantiated(c));
  const CollectiveBytes b = collective_bytes(c, 2);
  j["accounting"]["collective_bytes_bf16"] = to_json(b);
  j["memory_estimate_per_rank"]["bf16"] = to_json(estimate_memory(c, 2));
  j["memory_estimate_per_rank"]["fp32"] = to_json(estimate_memory(c, 4));
  // moebench's own step, the policy the run uses (its --recompute, --optimizer-state-dtype), per
  // pipeline rank in the storage a GPU run uses (BF16), and the largest.
  const auto per_stage = [&](const ActivationPolicy& policy, double& largest) {
    nlohmann::ordered_json stages = nlohmann::ordered_json::array();
    largest = 0;
    for (const StageMemory& s : estimate_stage_memory(c, 2, policy)) {
      stages.push_back(nlohmann::ordered_json(to_json(s)));
      largest = std::max(largest, s.memory.total());
    }
    return stages;
  };
  double own = 0;
  nlohmann::ordered_json& m = j["memory"];
  m["storage"] = "bf16";
  m["as_run_by"] = "moebench";
  m["recompute"] = recompute_names(c.workload.recompute);
  m["optimizer_state_dtype"] = to_string(c.optimizer_state_dtype);
  m["fp8_saved_inputs"] = c.saves_fp8_inputs();
  if (c.precision == Precision::fp8) m["fp8_weight_copies"] = to_string(c.fp8_weight_copies);
  m["per_stage"] = per_stage(run_policy(c), own);
  m["max_rank_bytes"] = own;
  m["moebench_max_rank_bytes"] = own;
  m["context_reserve_bytes"] = kGpuContextReserveBytes;
  if (const Recipe* rec = c.recipe ? &recipe(*c.recipe) : nullptr) {
    j["recipe"] = nlohmann::ordered_json(to_json(*rec));
    const double gpu = rec->gpu_memory_bytes;
    m["gpu_memory_bytes"] = gpu;
    m["fits"] = own + kGpuContextReserveBytes <= gpu;
    m["margin_bytes"] = gpu - kGpuContextReserveBytes - own;
    m["lacks"] = memory_gaps(c, rec->offload);
    // As Megatron-Core with Transformer Engine runs the row.
    double megatron = 0;
    nlohmann::ordered_json stages = per_stage(transformer_engine_policy(c), megatron);
    m["megatron"] = nlohmann::ordered_json{{"per_stage", stages},
                                           {"max_rank_bytes", megatron},
                                           {"fits", megatron + kGpuContextReserveBytes <= gpu}};
  }
  if (c.verify) {
    // As a GPU run's: the reference's step in BF16 on rank 0's GPU, its results on rank 0's host.
    const VerifyCost v = estimate_verify_cost(c, 2);
    j["verification"] = {{"reference_step_bytes", v.reference_step_bytes},
                         {"reference_results_host_bytes", v.reference_results_bytes},
                         {"max_rank_received_bytes", v.max_rank_received_bytes},
                         {"sent_bytes", v.sent_bytes}};
  }
  return j;
}

// `j` is plan_json(c), whose recipe figures the text repeats.
void print_plan(const RunConfig& c, const nlohmann::ordered_json& j, std::ostream& os) {
  const double tokens = static_cast<double>(tokens_per_step(c));
  const StackAccounting full =
      account_full_model(c.model, c.workload.seq_len, tokens, c.workload.recompute);
  const StackAccounting inst = account_instantiated(c);
  os << "# model " << c.model.name << ", seq " << c.workload.seq_len << ", micro-batch "
     << c.workload.micro_batch << ", world " << c.layout.world << ", ep " << c.layout.ep
     << ", precision " << to_string(c.precision);
  if (c.precision == Precision::fp8) os << " (--fp8-recipe " << to_string(c.fp8_recipe) << ")";
  os << "\n";
  for (const StackAccounting* a : {&full, &inst}) {
    os << "# " << a->scope << ": " << human(static_cast<double>(a->total_params), "") << " params, "
       << human(static_cast<double>(a->active_params), "") << " active, "
       << human(a->flops_per_token, "FLOP") << "/token (Megatron), "
       << human(a->flops_per_token_torchtitan, "FLOP") << "/token (TorchTitan), "
       << human(a->flops_per_step, "FLOP") << "/step\n";
  }
  os << "# instantiated: " << c.workload.layers << " layers (" << c.workload.dense_layers
     << " dense), attention " << (c.workload.attention ? "on" : "off") << ", head "
     << (c.workload.head ? "on" : "off") << ", mtp " << c.workload.mtp << "\n";
  if (c.layout.pp > 1) {
    os << "# pipeline: pp " << c.layout.pp << ", vp " << c.layout.vp << ", layout "
       << pipeline_layout(c).text << ", " << microbatches(c) << " micro-batches a step\n";
  }
  for (const StageMemory& s : estimate_stage_memory(c, 2)) {
    os << "# memory of pipeline rank " << s.pp_rank << " (bf16): " << gib(s.memory.total()) << " ("
       << s.layers << " layers" << (s.embedding ? ", embedding" : "") << (s.mtp ? ", MTP" : "")
       << (s.loss ? ", head and loss" : "") << "; " << s.in_flight
       << " micro-batch chunks in flight at the peak)\n";
  }
  if (c.recipe) {
    const Recipe& r = recipe(*c.recipe);
    const nlohmann::ordered_json& m = j["memory"];
    const double own = m["max_rank_bytes"].get<double>();
    const double margin = m["margin_bytes"].get<double>();
    os << "# recipe " << r.name << " (published in " << r.precision
       << "), moebench's own step: largest rank " << gib(own) << " + "
       << gib(kGpuContextReserveBytes) << " for the CUDA context and libraries, of the "
       << gib(r.gpu_memory_bytes) << " of a " << r.gpu << ": "
       << (m["fits"].get<bool>() ? "fits, " + gib(margin) + " to spare"
                                 : "does NOT fit, " + gib(-margin) + " over")
       << "\n";
    for (const auto& gap : m["lacks"]) {
      os << "#   moebench lacks: " << gap.get<std::string>() << "\n";
    }
    os << "# as Megatron runs it (FP8 copies of GEMM inputs, FP8 weights): largest rank "
       << gib(m["megatron"]["max_rank_bytes"].get<double>()) << "\n";
  }
  if (j.contains("verification")) {
    const nlohmann::ordered_json& v = j["verification"];
    os << "# --verify: the single-process reference on rank 0 needs "
       << gib(v["reference_step_bytes"].get<double>())
       << " for its step (bf16, on rank 0's GPU with the rank's own) and "
       << gib(v["reference_results_host_bytes"].get<double>())
       << " of rank 0's host memory for its results; each rank receives at most "
       << gib(v["max_rank_received_bytes"].get<double>()) << " (its own slices), "
       << gib(v["sent_bytes"].get<double>()) << " sent in all\n";
  }
  for (int bytes : {2, 4}) {
    const MemoryEstimate m = estimate_memory(c, bytes);
    os << "# memory per rank (" << (bytes == 2 ? "bf16" : "fp32") << "): " << gib(m.total())
       << " = weights " << gib(m.weights) << " + grads " << gib(m.gradients) << " + optimizer "
       << gib(m.optimizer) << " + activations " << gib(m.activations) << " + comm "
       << gib(m.communication) << " + workspace " << gib(m.workspace) << "\n";
  }
}

}  // namespace

int plan_command(const CliOptions& o) {
  const int world =
      o.world.value_or(o.workload.recipe.empty() ? 1 : recipe(o.workload.recipe).gpus);
  RunConfig c = resolve_run_config(o, world);
  for (const std::string& w : c.warnings) std::cerr << "moebench: warning: " << w << "\n";
  expected_inputs(o, c);  // the run's --system and --calibrate, checked as run checks them
  if (!o.out.empty()) ensure_writable_destination(o.out);
  // --fp8-weight-copies auto against the GPU's memory (given, or the recipe's) as the run's check
  // resolves it against the memory free: the copies kept where they fit.
  const double gpu = o.gpu_memory_gib ? *o.gpu_memory_gib * 1024.0 * 1024.0 * 1024.0
                     : c.recipe       ? recipe(*c.recipe).gpu_memory_bytes
                                      : 0.0;
  if (gpu > 0) c.fp8_weight_copies = resolve_fp8_weight_copies(c, 2, gpu - kGpuContextReserveBytes);
  nlohmann::ordered_json j = plan_json(c);
  if (o.gpu_memory_gib) {
    // What a GPU run's own memory check would refuse: moebench's step, BF16, its largest rank.
    const double capacity = *o.gpu_memory_gib * 1024.0 * 1024.0 * 1024.0;
    const double need =
        j["memory"]["moebench_max_rank_bytes"].get<double>() + kGpuContextReserveBytes;
    j["memory"]["given_gpu_memory_bytes"] = capacity;
    j["memory"]["fits_given_gpu_memory"] = need <= capacity;
    if (need > capacity) {
      throw UsageError("at " + std::to_string(world) +
                       " GPUs the largest rank needs an estimated " + format_gib(need) +
                       " (moebench's step, BF16, with " + format_gib(kGpuContextReserveBytes) +
                       " for the CUDA context and libraries) but --gpu-memory gives " +
                       format_gib(capacity) +
                       "; use a larger --ep or --pp, fewer --layers, or a smaller --seq-len or "
                       "--micro-batch");
    }
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    print_plan(c, j, std::cout);
  }
  if (!o.out.empty()) write_file_atomically(o.out, j.dump(2) + "\n");
  return 0;
}

int presets_command() {
  std::printf("%-18s %12s %12s %16s  %s\n", "preset", "params", "active", "FLOP/token",
              "description");
  for (const PresetInfo& p : preset_list()) {
    const ModelConfig m = preset(p.name);
    const StackAccounting a = account_full_model(m, p.default_seq_len, 1);
    std::printf("%-18s %12s %12s %16s  %s\n", p.name.c_str(),
                human(static_cast<double>(a.total_params), "").c_str(),
                human(static_cast<double>(a.active_params), "").c_str(),
                human(a.flops_per_token, "").c_str(), p.description.c_str());
  }
  std::printf("# FLOP/token: Megatron-Core convention at the preset's default sequence length\n");
  return 0;
}

int recipes_command(const CliOptions& o) {
  if (o.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const Recipe& r : recipes()) all.push_back(to_json(r));
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  std::printf("%-26s %-10s %5s %-12s %-10s %-6s %9s %9s  %-19s %s\n", "recipe", "system", "gpus",
              "tp/pp/vp/ep", "mb/gbs", "prec", "tok/s/GPU", "TFLOP/s", "layout", "recompute");
  std::vector<std::string> refused;
  for (const Recipe& r : recipes()) {
    const std::string layout = std::to_string(r.tp) + "/" + std::to_string(r.pp) + "/" +
                               std::to_string(r.vp) + "/" + std::to_string(r.ep);
    const std::string batch = std::to_string(r.micro_batch) + "/" + std::to_string(r.global_batch);
    const std::string tok = r.tokens_per_s_per_gpu ? human(*r.tokens_per_s_per_gpu, "") : "-";
    const std::string tf = r.tflops_per_gpu ? human(*r.tflops_per_gpu, "") : "-";
    const std::string recompute = join(r.recompute, ",");
    std::printf("%-26s %-10s %5d %-12s %-10s %-6s %9s %9s  %-19s %s\n", r.name.c_str(),
                r.gpu.c_str(), r.gpus, layout.c_str(), batch.c_str(), r.precision.c_str(),
                tok.c_str(), tf.c_str(), r.pipeline_layout.c_str(),
                recompute.empty() ? "-" : recompute.c_str());
    if (!r.offload.empty()) refused.push_back(r.name);
  }
  std::printf(
      "# published figures (workloads/config/recipes.json names each source and recipe file); "
      "`moebench run --recipe NAME` runs one, with its recompute\n");
  for (const std::string& name : refused) {
    std::printf(
        "# %s offloads to host memory, which moebench does not: `run` refuses it, `plan` "
        "estimates it\n",
        name.c_str());
  }
  return 0;
}

int systems_command(const CliOptions& o) {
  std::vector<SystemSpec> systems = builtin_systems();
  for (const std::string& file : o.system_files) systems.push_back(load_system_file(file));
  if (o.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const SystemSpec& s : systems) all.push_back(s.document);
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  std::cout << format_systems(systems);
  return 0;
}

int phases_command(const CliOptions& o) {
  if (o.json) {
    std::cout << nlohmann::ordered_json{{"phases", phase_table_json()}}.dump(2) << "\n";
    return 0;
  }
  std::printf("%-14s %-14s  %s\n", "phase", "kind", "what it holds");
  for (const PhaseDef& p : kPhases) {
    std::printf("%-14s %-14s  %s\n", std::string(p.name).c_str(),
                std::string(phase_kind_name(p.kind)).c_str(), std::string(p.description).c_str());
  }
  return 0;
}

int validate_command(const CliOptions& o) {
  const nlohmann::json schema = load_schema(kRunSchemaFile);
  const nlohmann::json link_schema = load_schema(kLinkcheckSchemaFile);
  const nlohmann::json accept_schema = load_schema("accept.schema.json");
  int bad = 0;
  for (const std::string& path : o.files) {
    std::string text;
    try {
      text = read_regular_file(path, "give run report files");
    } catch (const UsageError& e) {
      std::cerr << e.what() << "\n";
      ++bad;
      continue;
    }
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers beyond double
      std::cerr << path << ": not JSON (" << e.what() << ")\n";
      ++bad;
      continue;
    }
    // A link test or an acceptance report by its kind; anything else is held to the run
    // report's schema.
    const std::string kind = doc.is_object() && doc.contains("kind") && doc["kind"].is_string()
                                 ? doc["kind"].get<std::string>()
                                 : std::string();
    const bool link = kind == kLinkcheckReportKind;
    const bool accept = kind == "moebench.accept";
    const std::vector<std::string> errors = schema_errors(doc, link     ? link_schema
                                                               : accept ? accept_schema
                                                                        : schema);
    for (const std::string& e : errors) std::cerr << path << ": " << e << "\n";
    if (!errors.empty()) {
      ++bad;
    } else {
      std::cout << path << ": valid "
                << (link     ? kLinkcheckReportKind
                    : accept ? "moebench.accept"
                             : kRunReportKind)
                << " (schema version "
                << (link     ? kLinkcheckSchemaVersion
                    : accept ? 1
                             : kRunSchemaVersion)
                << ")\n";
    }
  }
  return bad == 0 ? 0 : static_cast<int>(ExitCode::usage);
}

}  // namespace moebench
