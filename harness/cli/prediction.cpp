#include "harness/cli/prediction.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/schema.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {

// The run configuration predicted at `gpus`: the workload flags resolved as `run` resolves them,
// in the precision the row (or the system) computes in rather than the cpu backend's.
RunConfig predict_config(const CliOptions& given, int gpus, const SystemSpec& system) {
  CliOptions o = given;
  // A GPU system prices a GPU's step: its backend and precisions, unless --backend says otherwise.
  if (!o.workload.backend_given && system.generation != "cpu") {
    o.workload.backend = ComputeBackend::cuda;
  }
  RunConfig c;
  if (o.global_batch_per_gpu) {
    // Weak scaling at this count: the global batch the flag gives, in place of a recipe's too.
    o.workload.global_batch = *o.global_batch_per_gpu * gpus;
    o.workload.given.push_back("--global-batch");
    try {
      c = resolve_run_config(o, gpus);
    } catch (const UsageError& e) {
      throw UsageError("--global-batch-per-gpu " + std::to_string(*o.global_batch_per_gpu) +
                       " (a global batch of " + std::to_string(*o.workload.global_batch) + " at " +
                       std::to_string(gpus) + " GPUs): " + e.what());
    }
  } else {
    c = resolve_run_config(o, gpus);
  }
  const Recipe* rec = c.recipe ? &recipe(*c.recipe) : nullptr;
  if (!o.workload.precision) {
    if (rec) {
      c.precision = run_precision(*rec);
    } else if (system.generation != "cpu") {
      c.precision = Precision::bf16;
    }
  }
  if (rec && rec->precision == "mxfp8" && !o.workload.fp8_recipe && c.precision == Precision::fp8) {
    c.fp8_recipe = Fp8Recipe::mxfp8;
  }
  return c;
}

HostGaps host_gaps_of(const std::string& cuda_graphs) {
  return cuda_graphs == "full_iteration" ? HostGaps::none
         : cuda_graphs == "partial"      ? HostGaps::partial_graphs
                                         : HostGaps::no_graphs;
}

// A recipe's row as its trainer ran it (recipes.json: dispatcher, all-to-all overlap, FP8
// attention, CUDA graphs, gradients reduced in its main gradients' precision, the parameter
// all-gather overlapped); else moebench's step.
TrainerRules trainer_rules(const RunConfig& c) {
  TrainerRules t;
  if (!c.recipe) return t;
  const Recipe& r = recipe(*c.recipe);
  t.dispatcher = r.dispatcher == "alltoall" ? Dispatcher::alltoall : Dispatcher::dedup;
  t.ep_overlap = r.ep_comm_overlap;
  // Megatron-Core's moe_shared_expert_overlap defaults to off, no Megatron-LM recipe sets it and
  // Megatron-Bridge's flex dispatcher (DeepEP, HybridEP) turns it off: without the all-to-all
  // overlap a recipe's exchanges wait for nothing else.
  t.shared_expert_overlap = false;
  t.fp8_attention = r.fp8_attention && c.precision == Precision::fp8;
  t.grad_reduce_bytes = r.main_grads_dtype == "bf16" ? 2 : 4;
  t.host_gaps = host_gaps_of(r.cuda_graphs);
  t.ep_comm_sms = r.ep_comm_sms;
  t.param_gather_overlap = true;  // both trainers' defaults with data parallelism
  t.offload_expert_fc1 =
      std::find(r.offload.begin(), r.offload.end(), "expert_fc1") != r.offload.end();
  return t;
}

// --calibrate RUN.json: the run's own configuration (its argv, resolved as `run` resolved it),
// predicted on `system` without calibration, against what it measured in its median step on the
// rank that set the step time (results.step_breakdown).
RunConfig config_of_report(const nlohmann::json& doc, const std::string& flag) {
  std::vector<std::string> args = doc["meta"]["argv"].get<std::vector<std::string>>();
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    const CliOptions run = parse_command_line(static_cast<int>(argv.size()), argv.data());
    return resolve_run_config(run, doc["parallel"]["world"].get<int>());
  } catch (const UsageError& e) {
    throw UsageError(flag + "its command line no longer resolves here (" + e.what() + ")");
  }
}

nlohmann::json read_measured_run(const std::string& path, const SystemSpec& system,
                                 const std::string& flag, const std::string& purpose,
                                 bool allow_injected) {
  std::string text;
  try {
    text = read_regular_file(path, "give a run report written by `moebench run --out`");
  } catch (const UsageError& e) {  // "PATH: why": the flag named before it
    throw UsageError(flag.substr(0, flag.find(' ')) + " " + e.what());
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw UsageError(flag + "not JSON; give a run report written by `moebench run --out`");
  }
  const std::vector<std::string> errors = schema_errors(doc, load_schema(kRunSchemaFile));
  if (!errors.empty()) {
    throw UsageError(flag + "not a valid run report (" + errors.front() +
                     "); give a run report written by `moebench run --out`");
  }
  const std::string backend = doc["meta"]["backend"].get<std::string>();
  if ((backend == "cpu") != (system.generation == "cpu")) {
    throw UsageError(flag + "a run on the " + backend + " backend cannot " + purpose + " system " +
                     system.name + "; give --system " +
                     (backend == "cpu" ? std::string("cpu") : "the system it ran on"));
  }
  // Only a clean, whole run measures the system: `report` refuses the others without a flag, and
  // a prediction from a fault it injected would carry the fault into every point.
  if (const std::string state = doc["status"]["state"].get<std::string>(); state != "completed") {
    throw UsageError(flag + "the run was " + state + ", not completed; " + purpose +
                     " with a run that finished every step");
  }
  if (const auto inject = doc["config"].find("inject");
      inject != doc["config"].end() && !allow_injected) {
    throw UsageError(flag + "the run injected a fault (--inject " +
                     (inject->is_string() ? inject->get<std::string>() : inject->dump()) +
                     "), so its times are not the system's; " + purpose +
                     " with a run without --inject");
  }
  if (!doc["results"].contains("step_breakdown")) {
    throw UsageError(flag +
                     "the report has no step_breakdown (no timed step); give a run with "
                     "--steps 1 or more");
  }
  return doc;
}

CalibrationRun calibrate(const std::string& path, const SystemSpec& system,
                         const EfficiencySet& eff) {
  const std::string flag = "--calibrate " + path + ": ";
  const nlohmann::json doc = read_measured_run(path, system, flag, "calibrate");
  const RunConfig c = config_of_report(doc, flag);
  const Prediction p = predict_step(c, hardware_for(system, c), eff.values);
  const nlohmann::json& b = doc["results"]["step_breakdown"];
  CalibrationRun out;
  out.path = path;
  out.measured_step_s = b["step_time_s"].get<double>();
  out.predicted_step_s = p.step_s;
  double wait = b["other_s"].get<double>();
  double rest = 0;
  for (const PredictedPhase& ph : p.phases) {
    const nlohmann::json& m = b["phase_time_s"];
    if (ph.name == "comm_wait") {
      wait += m.value("comm_wait", 0.0);
      continue;
    }
    const double measured = m.value(ph.name, 0.0);
    rest += measured;
    if (ph.time_s > 0 && measured > 0) out.calibration.phase_scale[ph.name] = measured / ph.time_s;
  }
  out.calibration.wait_fraction = rest > 0 ? wait / rest : 0.0;
  return out;
}

ExpectedInputs expected_inputs(const CliOptions& o, const RunConfig& c) {
  ExpectedInputs in;
  if (!o.calibrate.empty() && o.system.empty()) {
    throw UsageError("--calibrate " + o.calibrate +
                     ": give --system too (the system the run and the report ran on)");
  }
  if (o.system.empty()) return in;
  in.system = find_system(o.system);
  const EfficiencySet& eff = efficiencies_for(*in.system);
  hardware_for(*in.system, c);
  if (!o.calibrate.empty()) in.calibration = calibrate(o.calibrate, *in.system, eff);
  return in;
}

std::optional<SystemSpec> detected_system(const std::string& device_name, const RunConfig& c,
                                          std::string* why) {
  const std::string name = system_for_device(device_name);
  if (name.empty()) return std::nullopt;
  SystemSpec system = find_system(name);
  try {
    hardware_for(system, c);
  } catch (const UsageError& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
  return system;
}

ExpectedRecord expected_for_run(const RunRecord& r, const SystemSpec& system,
                                const EfficiencySet& eff, const CalibrationRun* cal) {
  ExpectedRecord e;
  const StepBreakdown& b = r.results.breakdown;
  if (b.rank < 0) return e;  // no timed step
  const RunConfig& c = r.config;
  const Prediction p = predict_step(c, hardware_for(system, c), eff.values, TrainerRules{},
                                    cal ? &cal->calibration : nullptr);
  e.system = system.name;
  e.calibration = cal ? cal->path : "";
  e.threshold = kSlowPhaseRatio;
  e.pp_rank = std::min<int>(b.stage, static_cast<int>(p.rank_phases.size()) - 1);
  e.measured_step_s = b.step_time_s;
  e.expected_step_s = p.step_s;
  for (const PredictedPhase& ph : p.rank_phases[static_cast<std::size_t>(e.pp_rank)]) {
    ExpectedPhase x;
    x.name = ph.name;
    x.expected_s = ph.time_s;
    for (std::size_t i = 0; i < kPhaseCount; ++i) {
      if (kPhaseNames[i] == ph.name) {
        x.measured_s = b.phase_time_s[i];
        x.communication = is_communication(static_cast<Phase>(i));
      }
    }
    if (ph.name == "comm_wait") x.measured_s += b.other_s;
    x.ratio = x.expected_s > 0 ? x.measured_s / x.expected_s : 0.0;
    // Waiting is a symptom, not a cause: the phases it waits for are the ones named.
    x.slow = ph.name != "comm_wait" && ph.name != "pp_bubble" && x.expected_s > 0 &&
             x.ratio > e.threshold;
    e.phases.push_back(x);
  }
  return e;
}

}  // namespace moebench
