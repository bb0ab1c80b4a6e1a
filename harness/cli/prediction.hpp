// What `predict` and `run --system` share: the configuration a prediction prices, the trainer
// rules of a recipe's row, a calibration from a measured run report, and a run's expected phase
// times (the model's, beside what the run measured).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/cli/options.hpp"
#include "harness/output/run_record.hpp"
#include "harness/systems/efficiencies.hpp"

namespace moebench {

// The run configuration predicted at `gpus`: the workload flags resolved as `run` resolves them,
// on the cuda backend for a GPU system (unless --backend is given), in the precision the row (or
// the system) computes in, with --global-batch-per-gpu's batch at this count.
RunConfig predict_config(const CliOptions& o, int gpus, const SystemSpec& system);

// What a trainer's host adds, by what it captures in CUDA graphs (recipes.json's cuda_graphs:
// full_iteration, partial, none).
HostGaps host_gaps_of(const std::string& cuda_graphs);

// A recipe's row as its trainer ran it (recipes.json: dispatcher, all-to-all overlap, FP8
// attention, gradients reduced in the recipe's main_grads_dtype); else moebench's step.
TrainerRules trainer_rules(const RunConfig& c);

// A calibration and where it comes from.
struct CalibrationRun {
  std::string path;
  Calibration calibration;
  double measured_step_s = 0;
  double predicted_step_s = 0;
};

// --calibrate RUN.json: the run's own configuration (its argv, resolved as `run` resolved it),
// predicted on `system` without calibration, against what it measured in its median step on the
// rank that set the step time (results.step_breakdown). UsageError "--calibrate PATH: ..." (one
// line) for a file that is not a valid run report, a run of another backend, a run without timed
// steps, or a command line that no longer resolves.
CalibrationRun calibrate(const std::string& path, const SystemSpec& system,
                         const EfficiencySet& eff);

// A run report that measured `system`: valid against its schema, of the system's backend,
// completed, without an injected fault, with a timed step. UsageError `flag` + why (one line);
// `purpose` ("calibrate", "measure") words it.
nlohmann::json read_measured_run(const std::string& path, const SystemSpec& system,
                                 const std::string& flag, const std::string& purpose,
                                 bool allow_injected = false);

// `run --system NAME|FILE [--calibrate RUN.json]` (and `plan`, which checks the run's flags): the
// system and the calibration, each checked against the run's configuration `c`; none without
// --system. UsageError for --calibrate without --system, an unknown system or a bad file, a
// system without the run's precision, a bad calibration report.
struct ExpectedInputs {
  std::optional<SystemSpec> system;
  std::optional<CalibrationRun> calibration;
};
ExpectedInputs expected_inputs(const CliOptions& o, const RunConfig& c);

// The configuration a run report ran (its meta.argv resolved again at its world size).
// UsageError "<flag>: its command line no longer resolves here (...)" otherwise.
RunConfig config_of_report(const nlohmann::json& report, const std::string& flag);

// `report --system [--calibrate]`: each run's predicted step beside its measured one.
struct PredictedRun {
  std::string path;
  int gpus = 0;
  double measured_step_s = 0;
  double predicted_step_s = 0;
  double measured_tflops_per_gpu = 0;
  double predicted_tflops_per_gpu = 0;
};

// The built-in system a GPU run's device names, when the model can price the run `c` on it
// (system_for_device); none otherwise, with `why` set where a system was named but cannot price
// it (a precision it has no peak for): a run that gave no --system never fails for this.
std::optional<SystemSpec> detected_system(const std::string& device_name, const RunConfig& c,
                                          std::string* why);

// A ratio of measured to expected time above which a phase is slow.
inline constexpr double kSlowPhaseRatio = 1.25;

// The expected times of the run `r` (its configuration, results.step_breakdown) on `system`,
// calibrated by `cal` where given: the pipeline rank that set the step time's phases.
ExpectedRecord expected_for_run(const RunRecord& r, const SystemSpec& system,
                                const EfficiencySet& eff, const CalibrationRun* cal);

}  // namespace moebench
