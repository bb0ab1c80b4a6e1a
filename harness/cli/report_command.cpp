// `moebench report`: run reports in, one scaling report out (JSON, Markdown, PNG, a table on
// stdout). A plain file tool: no MPI. Every input is read and checked before anything is written;
// the exit code is 4 when a verdict failed, so a Slurm job or a CI step can gate on it.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "harness/cli/claims.hpp"
#include "harness/cli/commands.hpp"
#include "harness/cli/plot.hpp"
#include "harness/cli/prediction.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/core/version.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/schema.hpp"
#include "harness/scaling/inputs.hpp"
#include "harness/scaling/scaling.hpp"
#include "harness/scaling/scaling_report.hpp"
#include "harness/scaling/scaling_text.hpp"
#include "workloads/config/recipes.hpp"

extern char** environ;

namespace moebench {

namespace {

namespace fs = std::filesystem;

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void check_outputs(const ReportOptions& r, const std::vector<InputFile>& inputs) {
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--out", &r.out}, {"--markdown", &r.markdown}, {"--plot", &r.plot}};
  for (const auto& [flag, path] : outputs) {
    if (path->empty()) continue;
    const std::string key = canonical_path(*path);
    for (const InputFile& in : inputs) {
      if (key == in.canonical) {
        throw UsageError(std::string(flag) + " " + *path +
                         ": is also an input; write the report to another file");
      }
    }
  }
}

// A claim about a recipe's stack (--claim-recipe NAME, or --claim-from-recipe: the largest size's
// runs' recipe), judged like for like; none when the claims are thresholds for moebench's step.
std::optional<RecipeClaim> recipe_claim(const ReportOptions& r, const std::vector<RunPoint>& runs) {
  RecipeClaim c;
  if (!r.claim_recipe.empty()) {
    c.recipe = recipe(r.claim_recipe).name;  // UsageError naming the recipes otherwise
  } else if (r.claim_from_recipe) {
    int largest = 0;
    for (const RunPoint& p : runs) largest = std::max(largest, p.gpus);
    for (const RunPoint& p : runs) {
      if (p.gpus == largest && !p.recipe.empty() && c.recipe.empty()) c.recipe = p.recipe;
    }
    if (c.recipe.empty()) {
      throw UsageError("--claim-from-recipe: no run report at " + std::to_string(largest) +
                       " GPUs names a recipe; run `moebench run --recipe NAME`, or name the "
                       "claim's recipe with --claim-recipe NAME (`moebench recipes` lists them)");
    }
  } else {
    if (r.claim_gpus) {
      throw UsageError(
          "--claim-gpus: give it with a recipe's claim (--claim-recipe NAME or "
          "--claim-from-recipe) and --claim-efficiency");
    }
    return std::nullopt;
  }
  const Recipe& rec = recipe(c.recipe);
  // The published TFLOP/s unless the claim is given: --claim-from-recipe always judges one, and
  // --claim-recipe where no other claim is given.
  c.tflops = r.claim_tflops                                           ? r.claim_tflops
             : r.claim_from_recipe || !r.claim_efficiency.has_value() ? rec.tflops_per_gpu
                                                                      : std::nullopt;
  c.efficiency = r.claim_efficiency;
  c.gpus = r.claim_gpus;
  if (!c.tflops && !c.efficiency) {
    throw UsageError("recipe " + rec.name +
                     " publishes no TFLOP/s per GPU; give the claim with --claim-tflops X or "
                     "--claim-efficiency E");
  }
  if (c.gpus && !c.efficiency) {
    throw UsageError("--claim-gpus " + std::to_string(*c.gpus) +
                     ": it is the size an efficiency claim reaches; give --claim-efficiency E");
  }
  return c;
}

// The system the runs measured: --system, else the cpu system for cpu runs, else the built-in
// system of the runs' GPU.
SystemSpec measured_system(const ReportOptions& r, const std::vector<RunPoint>& runs) {
  if (!r.system.empty()) return find_system(r.system);
  const SystemName& measured = runs.back().system;
  if (!measured.gpu) return find_system("cpu");
  const std::string name = system_for_device(measured.accelerator);
  if (name.empty()) {
    throw UsageError("a recipe's claim is priced on the system the runs measured, and \"" +
                     measured.accelerator +
                     "\" is no built-in system's; give --system NAME|FILE (`moebench systems`)");
  }
  return find_system(name);
}

ScalingOptions scaling_options(const ReportOptions& r) {
  ScalingOptions s;
  s.baseline_gpus = r.baseline;
  s.allow_mixed = r.allow_mixed;
  s.claim_tflops = r.claim_tflops;
  s.claim_efficiency = r.claim_efficiency;
  s.claim_from_recipe = r.claim_from_recipe;
  s.min_tflops = r.min_tflops;
  s.min_efficiency = r.min_efficiency;
  s.allow_suspects = r.allow_suspects;
  s.allow_injected = r.allow_injected;
  return s;
}

// --system [--calibrate]: each run's own configuration predicted on the system (calibrated where
// asked), beside what it measured.
std::vector<PredictedRun> predict_runs(const ReportOptions& r, const std::vector<RunPoint>& runs) {
  std::vector<PredictedRun> out;
  if (r.system.empty()) {
    if (!r.calibrate.empty()) {
      throw UsageError("--calibrate " + r.calibrate + ": give --system too (the runs' system)");
    }
    return out;
  }
  const SystemSpec system = find_system(r.system);
  const EfficiencySet& eff = efficiencies_for(system);
  std::optional<CalibrationRun> cal;
  if (!r.calibrate.empty()) cal = calibrate(r.calibrate, system, eff);
  for (const RunPoint& p : runs) {
    const nlohmann::json doc =
        nlohmann::json::parse(read_regular_file(p.path, "give a run report"));
    const std::string flag = p.path + ": ";
    const RunConfig c = config_of_report(doc, flag);
    const Prediction q = predict_step(c, hardware_for(system, c), eff.values, TrainerRules{},
                                      cal ? &cal->calibration : nullptr);
    PredictedRun x;
    x.path = p.path;
    x.gpus = c.layout.world;
    x.measured_step_s = doc["results"]["step_time_s"]["median"].get<double>();
    x.measured_tflops_per_gpu = doc["results"]["tflops_per_gpu"].get<double>();
    x.predicted_step_s = q.step_s;
    // The measured TFLOP/s at the predicted step: the same FLOPs over the other time.
    x.predicted_tflops_per_gpu = x.measured_tflops_per_gpu * x.measured_step_s / q.step_s;
    out.push_back(x);
  }
  std::sort(out.begin(), out.end(),
            [](const PredictedRun& a, const PredictedRun& b) { return a.gpus < b.gpus; });
  return out;
}

std::string predicted_text(const ReportOptions& r, const std::vector<PredictedRun>& runs) {
  if (runs.empty()) return "";
  std::string out =
      "# predicted on " + r.system +
      (r.calibrate.empty() ? " (its efficiencies)" : " (calibrated from " + r.calibrate + ")") +
      ", each run's own configuration:\n";
  out += strprintf("# %7s %12s %12s %14s %14s %8s\n", "gpus", "step(ms)", "predicted",
                   "TFLOP/s/GPU", "predicted", "m/p");
  for (const PredictedRun& p : runs) {
    out += strprintf("# %7d %12.3f %12.3f %14.4g %14.4g %8.2f\n", p.gpus, p.measured_step_s * 1e3,
                     finite_figure(p.predicted_step_s * 1e3, "a predicted step time"),
                     p.measured_tflops_per_gpu,
                     finite_figure(p.predicted_tflops_per_gpu, "a predicted TFLOP/s"),
                     finite_figure(p.measured_step_s / p.predicted_step_s, "measured/predicted"));
  }
  return out;
}

}  // namespace

int report_command(const CliOptions& o) {
  const ReportOptions& r = o.report;
  if (r.baseline && *r.baseline < 1) {
    throw UsageError("--baseline " + std::to_string(*r.baseline) + ": must be a GPU count >= 1");
  }
  if (!r.out.empty()) ensure_writable_destination(r.out, "--out");
  if (!r.markdown.empty()) ensure_writable_destination(r.markdown, "--markdown");
  if (!r.plot.empty()) ensure_writable_destination(r.plot, "--plot");

  // Everything is read and checked first: a bad input leaves no output behind.
  const std::vector<InputFile> files = expand_inputs(r.inputs, {r.out, r.markdown, r.plot});
  check_outputs(r, files);
  const nlohmann::json run_schema = load_schema(kRunSchemaFile);
  const SchemaValidator validate_run(run_schema);
  std::vector<std::string> skipped;
  const std::vector<RunPoint> runs = read_run_reports(
      files, [&](const nlohmann::json& doc) { return validate_run.errors(doc); }, &skipped);
  for (const RunPoint& p : runs) {
    if (!p.interrupted.empty() && !r.allow_failed) {
      throw UsageError(p.path + ": the run was " + p.interrupted +
                       "; leave it out, run it again, or pass --allow-failed to merge it anyway");
    }
  }
  const std::vector<PredictedRun> predicted = predict_runs(r, runs);
  ScalingOptions options = scaling_options(r);
  const std::optional<RecipeClaim> claim = recipe_claim(r, runs);
  options.claims_like_for_like = claim.has_value();
  ScalingResult result = compute_scaling(runs, options);
  if (claim) {
    const SystemSpec system = measured_system(r, runs);
    for (Verdict& v : recipe_claim_verdicts(*claim, result, runs, system, efficiencies_for(system),
                                            result.warnings)) {
      result.verdicts.push_back(std::move(v));
    }
  } else if (r.claim_tflops) {
    for (const RunPoint& p : runs) {
      if (p.recipe.empty()) continue;
      result.warnings.push_back(
          "--claim-tflops judges moebench's own step (a threshold for moebench, not a published "
          "row); a claim about recipe " +
          p.recipe +
          "'s stack is judged like for like with "
          "--claim-recipe " +
          p.recipe + " or --claim-from-recipe");
      break;
    }
  }
  for (const std::string& s : skipped) result.warnings.push_back("skipped, not a run report: " + s);

  ScalingMeta meta{MOEBENCH_VERSION, git_sha(), git_dirty(), o.argv, utc_now()};
  nlohmann::ordered_json report = make_scaling_report(result, runs, options, meta);
  if (!predicted.empty()) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const PredictedRun& p : predicted) {
      arr.push_back({{"path", p.path},
                     {"gpus", p.gpus},
                     {"measured_step_s", p.measured_step_s},
                     {"predicted_step_s", p.predicted_step_s},
                     {"measured_tflops_per_gpu", p.measured_tflops_per_gpu},
                     {"predicted_tflops_per_gpu", p.predicted_tflops_per_gpu}});
    }
    report["predicted"] = {
        {"system", r.system},
        {"calibration", r.calibrate.empty() ? nlohmann::ordered_json(nullptr)
                                            : nlohmann::ordered_json(r.calibrate)},
        {"runs", arr}};
  }
  const std::vector<std::string> errors =
      schema_errors(nlohmann::json(report), load_schema(kScalingSchemaFile));
  MB_CHECK(errors.empty(),
           "the scaling report does not match " << kScalingSchemaFile << ": " << errors.front());
  const std::string report_text = report.dump(2) + "\n";

  if (!r.quiet) std::cout << scaling_terminal(result, runs.size()) << predicted_text(r, predicted);
  if (!r.out.empty()) {
    write_file_atomically(r.out, report_text);
    std::cout << "# report: " << r.out << "\n";
  }
  if (!r.markdown.empty()) {
    write_file_atomically(r.markdown, scaling_markdown(result, runs, meta));
    std::cout << "# markdown: " << r.markdown << "\n";
  }
  if (!r.plot.empty()) {
    std::string json_path = r.out;
    const bool temporary = json_path.empty();
    if (temporary) json_path = write_temporary_file(r.plot, report_text);
    std::cout << std::flush;
    const bool drawn = draw_plot("plot_scaling.py", json_path, r.plot, temporary);
    if (temporary) fs::remove(json_path);
    if (drawn) std::cout << "# plot: " << r.plot << "\n";
  }
  // One line per failing verdict, also under --quiet: a CI log says what failed and why.
  for (const Verdict& v : result.verdicts) {
    if (!v.passed) std::cerr << "moebench: verdict FAIL: " << v.name << ": " << v.reason << "\n";
  }
  return result.passed() ? 0 : static_cast<int>(ExitCode::claim);
}

}  // namespace moebench
