// `predict --measured RUN.json...`: the hardware figures a measured run gives (the rate each
// kind of work reached on that system, as the model counts it), in place of the system's
// datasheet rate times its generation's efficiency, so that a recipe's step is priced with this
// cluster's hardware and the recipe's own trainer (its dispatcher, overlap, host gaps), not
// moebench's step.
//
// Each figure comes from the phases of the run that it dominates, on the rank that set the run's
// step time (results.step_breakdown): the model prices the run's own configuration on the
// system, and the figure is the datasheet rate x the generation's efficiency x (the model's time
// of those phases / their measured time). With several runs, each figure is the median of theirs.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/systems/efficiencies.hpp"
#include "workloads/predict/predict_model.hpp"

namespace moebench {

// One hardware figure as measured: SI units (FLOP/s or bytes/s).
struct MeasuredTerm {
  std::string name;  // dense_gemm, grouped_gemm, attention, memory, nvlink, scale_out
  std::string unit;  // "FLOP/s" or "bytes/s"
  std::vector<std::string> phases;   // the run's phases it comes from
  double datasheet = 0;              // the system's peak or bandwidth for it
  double model_efficiency = 0;       // the generation's efficiency for it
  double factor = 0;                 // model time / measured time of its phases (median over runs)
  double measured = 0;               // datasheet x model_efficiency x factor
  std::vector<std::string> sources;  // per run: "FILE: phases P on rank R (the step's slowest)"
};

struct MeasuredFigures {
  std::vector<std::string> files;
  Precision precision = Precision::fp32;  // the runs' precision, the figures' too
  Fp8Recipe fp8_recipe = Fp8Recipe::tensor;
  bool emulated_fp8 = false;        // cpu runs of fp8 (emulated in FP32), priced as fp32
  std::vector<MeasuredTerm> terms;  // only the figures some run measured
};

// The figures of the run reports `paths` measured on `system`. UsageError "<flag> PATH: ..."
// (one line) for a file that is not a completed, uninjected run report of the system's backend,
// a run with no timed step, runs of different precisions, or a run whose phases measure nothing.
// `report` passes allow_injected (its `injected` verdict judges those runs) and its own flag.
MeasuredFigures measure_figures(const std::vector<std::string>& paths, const SystemSpec& system,
                                const EfficiencySet& eff, bool allow_injected = false,
                                const std::string& flag = "--measured");

// Every hardware figure the model prices, in this order.
inline constexpr const char* kHardwareTerms[] = {"dense_gemm", "grouped_gemm", "attention",
                                                 "memory",     "nvlink",       "scale_out"};

// The model's own figure `name` on `hw` (datasheet x the generation's efficiency, factor 1).
MeasuredTerm model_term(const std::string& name, const Hardware& hw, const Efficiencies& eff);

// `hw` and `eff` with the measured figures in place of datasheet x efficiency: each measured
// term's efficiency becomes model_efficiency x factor; where that passes 1 (the hardware beat its
// datasheet at the model's counting), the peak it multiplies is raised instead, for every
// efficiency that peak serves, so that each product is the measured one.
void apply_measured(const MeasuredFigures& m, Hardware& hw, Efficiencies& eff);

// How the terms of a prediction were priced: each hardware figure "measured" or "model"
// (datasheet x efficiency), and the trainer's own terms (dispatcher, overlap, host) "model".
nlohmann::ordered_json measured_sources(const MeasuredFigures& m);
nlohmann::ordered_json to_json(const MeasuredFigures& m);

}  // namespace moebench
