#include "harness/scaling/scaling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "harness/core/error.hpp"
#include "harness/measure/stats.hpp"

namespace moebench {

namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100.0 * v);
  return buf;
}

// "a.json, b.json and 998 more"
std::string list_files(const std::vector<std::string>& files, std::size_t shown = 3) {
  std::string out;
  for (std::size_t i = 0; i < files.size() && i < shown; ++i) out += (i ? ", " : "") + files[i];
  if (files.size() > shown) out += " and " + std::to_string(files.size() - shown) + " more";
  return out;
}

bool is_allowed_mixed(const std::string& field, const ScalingOptions& o) {
  for (const std::string& name : o.allow_mixed) {
    if (mixable_field_path(name) == field) return true;
  }
  return false;
}

bool is_mixable(const std::string& field) {
  for (const std::string& name : mixable_fields()) {
    if (mixable_field_path(name) == field) return true;
  }
  return false;
}

std::string mixable_name(const std::string& field) {
  return field.substr(field.find_last_of('.') + 1);
}

void check_options(const ScalingOptions& o) {
  for (const std::string& name : o.allow_mixed) {
    const auto& ok = mixable_fields();
    if (std::find(ok.begin(), ok.end(), name) == ok.end()) {
      throw UsageError("--allow-mixed " + name + ": expected seq_len, micro_batch or ep");
    }
  }
  const std::pair<const char*, const std::optional<double>*> thresholds[] = {
      {"--claim-tflops", &o.claim_tflops},
      {"--claim-efficiency", &o.claim_efficiency},
      {"--min-tflops", &o.min_tflops},
      {"--min-efficiency", &o.min_efficiency}};
  for (const auto& [flag, value] : thresholds) {
    if (value->has_value() && !(std::isfinite(**value) && **value > 0)) {
      throw UsageError(std::string(flag) + " " + fmt(**value) + ": must be a number > 0");
    }
  }
}

// Every run against the first: the workload key must match, except the fields --allow-mixed
// names; those must still match between repeats of one size.
void check_workloads(const std::vector<RunPoint>& runs, const ScalingOptions& o) {
  const RunPoint& first = runs.front();
  for (const RunPoint& r : runs) {
    const std::size_t n = std::max(r.workload_key.size(), first.workload_key.size());
    for (std::size_t i = 0; i < n; ++i) {
      const FieldValue none{"", "(absent)"};
      const FieldValue& a = i < first.workload_key.size() ? first.workload_key[i] : none;
      const FieldValue& b = i < r.workload_key.size() ? r.workload_key[i] : none;
      const std::string& field = a.first.empty() ? b.first : a.first;
      if (a.first == b.first && a.second == b.second) continue;
      if (a.first != b.first) {
        throw UsageError("runs of different workloads: " + first.path + " and " + r.path +
                         " have different model fields (" + a.first + " vs " + b.first +
                         "); a scaling report compares one workload at several GPU counts");
      }
      const std::string values = field + " is " + a.second + " in " + first.path + " (" +
                                 gpus_text(first.gpus) + ") but " + b.second + " in " + r.path +
                                 " (" + gpus_text(r.gpus) + ")";
      if (r.gpus == first.gpus) {
        throw UsageError("repeats of one size differ: " + values +
                         "; runs at one GPU count must be the same configuration");
      }
      if (is_allowed_mixed(field, o)) continue;
      if (is_mixable(field)) {
        const std::string what =
            field == "parallel.ep" ? "expert parallelism differs: " : "per-GPU work differs: ";
        throw UsageError(what + values + "; pass --allow-mixed " + mixable_name(field) +
                         " if this dimension scales with the GPU count");
      }
      throw UsageError("runs of different workloads: " + values +
                       "; a scaling report compares one workload at several GPU counts");
    }
  }
}

template <typename F>
Spread spread_of(const std::vector<RunPoint>& runs, const std::vector<std::size_t>& idx, F get) {
  std::vector<double> v;
  v.reserve(idx.size());
  for (std::size_t i : idx) v.push_back(get(runs[i]));
  return {median(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

SizeResult aggregate(const std::vector<RunPoint>& runs, const std::vector<std::size_t>& idx,
                     std::vector<std::string>& warnings) {
  const RunPoint& first = runs[idx.front()];
  SizeResult s;
  s.gpus = first.gpus;
  s.nodes = first.nodes;
  s.ranks_per_node = first.ranks_per_node;
  s.ep = first.ep;
  s.runs = idx;
  s.tokens_per_rank = first.tokens_per_rank;
  s.global_tokens = first.global_tokens;
  s.step_time_s = spread_of(runs, idx, [](const RunPoint& r) { return r.step_time_s; });
  s.tflops_per_gpu = spread_of(runs, idx, [](const RunPoint& r) { return r.tflops_per_gpu; });
  s.tokens_per_s_per_gpu =
      spread_of(runs, idx, [](const RunPoint& r) { return r.tokens_per_s_per_gpu; });
  s.compute_time_s =
      spread_of(runs, idx, [](const RunPoint& r) { return r.compute_time_s; }).median;
  s.communication_time_s =
      spread_of(runs, idx, [](const RunPoint& r) { return r.communication_time_s; }).median;
  s.exposed_communication_s =
      spread_of(runs, idx, [](const RunPoint& r) { return r.exposed_communication_s; }).median;
  s.exposed_share = s.exposed_communication_s / s.step_time_s.median;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    s.phase_time_s[p] =
        spread_of(runs, idx, [p](const RunPoint& r) { return r.phase_time_s[p]; }).median;
    s.phase_max_s[p] =
        spread_of(runs, idx, [p](const RunPoint& r) { return r.phase_max_s[p]; }).median;
    if (is_communication(static_cast<Phase>(p))) {
      s.busbw[p] = spread_of(runs, idx, [p](const RunPoint& r) { return r.busbw[p]; }).median;
    }
  }
  // Weighted by the slowest ranks' times, which the bandwidths come from.
  const double d = s.phase_max_s[static_cast<std::size_t>(Phase::dispatch)];
  const double c = s.phase_max_s[static_cast<std::size_t>(Phase::combine)];
  if (d + c > 0) {
    s.alltoall_busbw = (s.busbw[static_cast<std::size_t>(Phase::dispatch)] * d +
                        s.busbw[static_cast<std::size_t>(Phase::combine)] * c) /
                       (d + c);
  }
  std::size_t verified = 0;
  std::set<std::string> layouts;
  std::set<std::vector<std::string>> host_sets;
  for (std::size_t i : idx) {
    const RunPoint& r = runs[i];
    if (r.verification_enabled) {
      ++verified;
      if (!r.verification_passed) s.failed_runs.push_back(r.path);
      s.mismatches += r.mismatches;
    }
    for (const std::string& suspect : r.suspects) s.suspects.push_back(r.path + ": " + suspect);
    if (!r.injected.empty()) s.injected.push_back(r.path + ": " + r.injected);
    s.fp8_emulated = s.fp8_emulated || r.fp8_emulated;
    layouts.insert(std::to_string(r.nodes) + " x " + std::to_string(r.ranks_per_node));
    std::vector<std::string> hosts = r.hosts;
    std::sort(hosts.begin(), hosts.end());
    host_sets.insert(hosts);
  }
  s.verification = !s.failed_runs.empty()   ? VerificationState::failed
                   : verified == 0          ? VerificationState::not_run
                   : verified == idx.size() ? VerificationState::passed
                                            : VerificationState::partial;
  if (layouts.size() > 1) {
    warnings.push_back("runs at " + gpus_text(s.gpus) + " differ in nodes x ranks per node (" +
                       list_files({layouts.begin(), layouts.end()}) + "); the first is shown");
  }
  if (host_sets.size() > 1) {
    warnings.push_back("the " + std::to_string(idx.size()) + " runs at " + gpus_text(s.gpus) +
                       " ran on " + std::to_string(host_sets.size()) + " different sets of hosts");
  }
  return s;
}

void detect_mode(const std::vector<RunPoint>& runs, ScalingResult& out) {
  bool same_per_gpu = true;
  bool same_global = true;
  for (const RunPoint& r : runs) {
    same_per_gpu = same_per_gpu && r.tokens_per_rank == runs.front().tokens_per_rank;
    same_global = same_global && r.global_tokens == runs.front().global_tokens;
  }
  const std::string base = "the baseline (" + gpus_text(out.baseline_gpus) + ")";
  if (same_per_gpu) {
    out.mode = ScalingMode::weak;
    out.mode_explanation = "weak scaling: " + fmt(runs.front().tokens_per_rank) +
                           " tokens per GPU at every size (per-GPU work fixed)";
    out.efficiency_definition =
        "efficiency = TFLOP/s per GPU / that of " + base + " (per-GPU throughput ratio)";
  } else if (same_global) {
    out.mode = ScalingMode::strong;
    out.mode_explanation = "strong scaling: " + fmt(runs.front().global_tokens) +
                           " tokens per step in all at every size (global batch fixed)";
    out.efficiency_definition =
        "efficiency = speedup (step time of " + base + " / step time) / (GPUs / baseline GPUs)";
  } else {
    out.mode = ScalingMode::mixed;
    out.mode_explanation =
        "mixed scaling: tokens per GPU and tokens per step both change between sizes "
        "(--allow-mixed)";
    out.efficiency_definition =
        "efficiency = TFLOP/s per GPU / that of " + base + " (work-normalised throughput ratio)";
  }
}

void compute_efficiency(ScalingResult& out) {
  const SizeResult* base = nullptr;
  for (const SizeResult& s : out.sizes) {
    if (s.gpus == out.baseline_gpus) base = &s;
  }
  MB_CHECK(base != nullptr, "baseline " << out.baseline_gpus << " is not a size");
  const SizeResult b = *base;
  for (SizeResult& s : out.sizes) {
    const double gpu_ratio = static_cast<double>(s.gpus) / b.gpus;
    if (out.mode == ScalingMode::strong) {
      s.speedup = b.step_time_s.median / s.step_time_s.median;
      s.efficiency = s.speedup / gpu_ratio;
    } else {
      s.efficiency = s.tflops_per_gpu.median / b.tflops_per_gpu.median;
      s.speedup = s.efficiency * gpu_ratio;
    }
  }
}

void compute_growth(ScalingResult& out) {
  for (std::size_t i = 1; i < out.sizes.size(); ++i) {
    const SizeResult& a = out.sizes[i - 1];
    const SizeResult& b = out.sizes[i];
    PhaseGrowth g;
    g.from_gpus = a.gpus;
    g.to_gpus = b.gpus;
    g.from_step_s = a.step_time_s.median;
    g.to_step_s = b.step_time_s.median;
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      g.phases.push_back({static_cast<Phase>(p), a.phase_time_s[p], b.phase_time_s[p]});
    }
    std::vector<PhaseChange> grown;
    for (const PhaseChange& c : g.phases) {
      // Below 1% of the step, a change is timer noise rather than a trend worth naming.
      if (c.delta_s() > 0.01 * g.from_step_s) grown.push_back(c);
    }
    std::sort(grown.begin(), grown.end(),
              [](const PhaseChange& x, const PhaseChange& y) { return x.delta_s() > y.delta_s(); });
    for (const PhaseChange& c : grown) g.grew.push_back(c.phase);
    out.growth.push_back(std::move(g));
  }
}

Verdict at_least(const std::string& name, const std::string& what, const SizeResult& s,
                 double measured, double threshold, const SizeResult* baseline) {
  Verdict v;
  v.name = name;
  v.gpus = s.gpus;
  v.baseline_gpus = baseline ? baseline->gpus : 0;
  v.measured = measured;
  v.threshold = threshold;
  v.comparison = ">=";
  v.margin = measured - threshold;
  v.relative_margin = v.margin / threshold;
  v.passed = measured >= threshold;
  v.reason = what + " at " + gpus_text(s.gpus) +
             (baseline ? " (baseline " + gpus_text(baseline->gpus) + ")" : std::string()) + ": " +
             fmt(measured) + (v.passed ? " >= " : " < ") + fmt(threshold) + ", margin " +
             fmt(v.margin) + " (" + percent(v.relative_margin) + ")";
  // A run that failed verification measured a wrong computation: its speed proves nothing.
  std::vector<std::string> failed = s.failed_runs;
  if (baseline && baseline != &s) {
    failed.insert(failed.end(), baseline->failed_runs.begin(), baseline->failed_runs.end());
  }
  if (!failed.empty()) {
    v.passed = false;
    v.reason += "; FAIL regardless: verification failed in " + list_files(failed);
  }
  return v;
}

// --claim-from-recipe: the largest size's first run with a recipe, beside the published row.
RecipeComparison recipe_comparison(const std::vector<RunPoint>& runs, const SizeResult& largest) {
  const RunPoint* run = nullptr;
  for (std::size_t i : largest.runs) {
    if (!runs[i].recipe.empty()) {
      run = &runs[i];
      break;
    }
  }
  if (run == nullptr) {
    throw UsageError("--claim-from-recipe: no run report at " + gpus_text(largest.gpus) +
                     " names a recipe; run `moebench run --recipe NAME` (`moebench recipes` "
                     "lists them)");
  }
  if (!run->recipe_tflops_per_gpu) {
    throw UsageError("--claim-from-recipe: recipe " + run->recipe +
                     " publishes no TFLOP/s per GPU to judge against");
  }
  return {run->recipe, largest.gpus, *run->recipe_tflops_per_gpu, largest.tflops_per_gpu.median,
          run->recipe_differences};
}

void compute_verdicts(const std::vector<RunPoint>& runs, const ScalingOptions& o,
                      ScalingResult& out) {
  const SizeResult* base = nullptr;
  for (const SizeResult& s : out.sizes) {
    if (s.gpus == out.baseline_gpus) base = &s;
  }
  for (const SizeResult& s : out.sizes) {
    if (s.verification == VerificationState::not_run) continue;
    Verdict v;
    v.name = "verification";
    v.gpus = s.gpus;
    v.comparison = "<=";
    v.passed = s.failed_runs.empty();
    v.measured = static_cast<double>(s.mismatches);
    v.margin = s.mismatches > 0 ? -v.measured : 0.0;  // not -0
    v.reason = v.passed ? "verification at " + gpus_text(s.gpus) + ": every verified run passed"
                        : "verification at " + gpus_text(s.gpus) + ": failed in " +
                              list_files(s.failed_runs);
    out.verdicts.push_back(v);
  }
  // A slow rank the run named, or a fault it injected: its figures are not the system's, so the
  // study does not pass unless the user accepts them.
  const auto flagged = [&](const char* name, const SizeResult& s,
                           const std::vector<std::string>& items, bool allowed, const char* what,
                           const char* flag) {
    if (items.empty()) return;
    Verdict v;
    v.name = name;
    v.gpus = s.gpus;
    v.comparison = "<=";
    v.measured = static_cast<double>(items.size());
    v.passed = allowed;
    v.margin = allowed ? 0.0 : -v.measured;
    std::string list;
    for (const std::string& i : items) list += (list.empty() ? "" : "; ") + i;
    v.reason = std::string(name) + " at " + gpus_text(s.gpus) + ": " +
               std::to_string(items.size()) + " " + what + " (" + list + ")" +
               (allowed ? std::string(", accepted by ") + flag
                        : std::string("; pass ") + flag + " to accept them");
    out.verdicts.push_back(v);
  };
  for (const SizeResult& s : out.sizes) {
    flagged("health", s, s.suspects, o.allow_suspects, "health suspect(s) the runs named",
            "--allow-suspects");
    flagged("injected", s, s.injected, o.allow_injected, "run(s) with an injected fault",
            "--allow-injected");
    if (s.fp8_emulated) {
      out.warnings.push_back("runs at " + gpus_text(s.gpus) +
                             " ran fp8 emulated in FP32 on the cpu backend: their TFLOP/s are "
                             "not FP8 hardware figures");
    }
  }
  for (const SizeResult& s : out.sizes) {
    if (o.min_tflops) {
      out.verdicts.push_back(at_least("min_tflops", "TFLOP/s per GPU", s, s.tflops_per_gpu.median,
                                      *o.min_tflops, nullptr));
    }
    if (o.min_efficiency && s.gpus != out.baseline_gpus) {
      out.verdicts.push_back(
          at_least("min_efficiency", "efficiency", s, s.efficiency, *o.min_efficiency, base));
    }
  }
  const SizeResult& largest = out.sizes.back();
  if (o.claim_from_recipe) out.recipe_comparison = recipe_comparison(runs, largest);
  // A claim about a recipe's stack is judged by the caller, like for like.
  if (o.claims_like_for_like) return;
  if (o.claim_tflops) {
    out.verdicts.push_back(at_least("claim_tflops", "claimed TFLOP/s per GPU", largest,
                                    largest.tflops_per_gpu.median, *o.claim_tflops, nullptr));
  }
  if (o.claim_efficiency) {
    if (largest.gpus == out.baseline_gpus) {
      throw UsageError("--claim-efficiency needs a baseline smaller than the largest size (" +
                       gpus_text(largest.gpus) + "); --baseline " +
                       std::to_string(out.baseline_gpus) + " is the largest");
    }
    out.verdicts.push_back(at_least("claim_efficiency", "claimed efficiency", largest,
                                    largest.efficiency, *o.claim_efficiency, base));
  }
}

// Differences a reader must know about before trusting a comparison.
void collect_warnings(const std::vector<RunPoint>& runs, ScalingResult& out) {
  std::map<std::string, std::map<std::string, std::vector<std::string>>> software;
  std::vector<std::string> few_steps, unverified, synthetic;
  std::map<std::string, std::vector<std::string>> by_hash;
  for (const RunPoint& r : runs) {
    for (const auto& [field, value] : r.software) software[field][value].push_back(r.path);
    if (r.steps < 5) few_steps.push_back(r.path + " (" + std::to_string(r.steps) + ")");
    if (!r.verification_enabled) unverified.push_back(r.path);
    if (r.synthetic) synthetic.push_back(r.path);
    by_hash[r.sha256].push_back(r.path);
  }
  for (const auto& [field, values] : software) {
    if (values.size() < 2) continue;
    std::string w = "runs differ in " + field + ":";
    for (const auto& [value, files] : values) {
      w += " \"" + value + "\" (" + list_files(files, 1) + ");";
    }
    w.pop_back();
    out.warnings.push_back(w);
  }
  for (std::size_t i = 1; i < out.sizes.size(); ++i) {
    std::set<std::string> larger, smaller;
    for (std::size_t k : out.sizes[i].runs)
      larger.insert(runs[k].hosts.begin(), runs[k].hosts.end());
    for (std::size_t k : out.sizes[i - 1].runs) {
      smaller.insert(runs[k].hosts.begin(), runs[k].hosts.end());
    }
    std::vector<std::string> outside;
    for (const std::string& h : smaller) {
      if (!larger.contains(h)) outside.push_back(h);
    }
    if (!outside.empty()) {
      out.warnings.push_back("different hosts: the " + gpus_text(out.sizes[i - 1].gpus) +
                             " runs used hosts the " + gpus_text(out.sizes[i].gpus) +
                             " runs did not (" + list_files(outside) + ")");
    }
  }
  if (!few_steps.empty()) {
    out.warnings.push_back("fewer than 5 timed steps (a noisy median) in " + list_files(few_steps));
  }
  if (!unverified.empty()) {
    out.warnings.push_back("verification not run (moebench run --verify) in " +
                           std::to_string(unverified.size()) + " of " +
                           std::to_string(runs.size()) + " runs: " + list_files(unverified));
  }
  if (!synthetic.empty()) {
    out.warnings.push_back(
        "SYNTHETIC inputs (meta.synthetic: made up for tests or examples, not "
        "measured): " +
        list_files(synthetic));
  }
  for (const auto& [hash, files] : by_hash) {
    if (files.size() > 1) {
      out.warnings.push_back("identical files counted as repeats: " + list_files(files) +
                             " (SHA-256 " + hash.substr(0, 12) + "...)");
    }
  }
}

}  // namespace

std::string gpus_text(int n) {
  return std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
}

const char* mode_name(ScalingMode m) {
  switch (m) {
    case ScalingMode::weak:
      return "weak";
    case ScalingMode::strong:
      return "strong";
    case ScalingMode::mixed:
      return "mixed";
  }
  return "?";
}

const char* verification_name(VerificationState v) {
  switch (v) {
    case VerificationState::passed:
      return "passed";
    case VerificationState::failed:
      return "failed";
    case VerificationState::not_run:
      return "not_run";
    case VerificationState::partial:
      return "partial";
  }
  return "?";
}

bool ScalingResult::passed() const {
  return std::all_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.passed; });
}

namespace {

// The runs' systems as one: each field's distinct values joined by " + ".
SystemName study_system(const std::vector<RunPoint>& runs) {
  SystemName out;
  std::vector<std::string> accelerators, software;
  for (const RunPoint& r : runs) {
    if (std::find(accelerators.begin(), accelerators.end(), r.system.accelerator) ==
        accelerators.end()) {
      accelerators.push_back(r.system.accelerator);
    }
    if (!r.system.software.empty() &&
        std::find(software.begin(), software.end(), r.system.software) == software.end()) {
      software.push_back(r.system.software);
    }
    out.gpu = out.gpu || r.system.gpu;
  }
  for (const std::string& a : accelerators)
    out.accelerator += (out.accelerator.empty() ? "" : " + ") + a;
  for (const std::string& s : software) out.software += (out.software.empty() ? "" : " + ") + s;
  return out;
}

std::string count_range(int lo, int hi, const char* one, const char* many) {
  return (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) + " " +
         (hi == 1 ? one : many);
}

std::string describe_study(const SystemName& s, const std::vector<RunPoint>& runs) {
  int gpus_lo = runs.front().gpus, gpus_hi = gpus_lo, nodes_lo = runs.front().nodes,
      nodes_hi = nodes_lo;
  for (const RunPoint& r : runs) {
    gpus_lo = std::min(gpus_lo, r.gpus);
    gpus_hi = std::max(gpus_hi, r.gpus);
    nodes_lo = std::min(nodes_lo, r.nodes);
    nodes_hi = std::max(nodes_hi, r.nodes);
  }
  const std::string what = s.gpu ? s.accelerator : s.accelerator + " backend, no GPU";
  return what + (s.software.empty() ? "" : " (" + s.software + ")") + ", " +
         count_range(gpus_lo, gpus_hi, s.gpu ? "GPU" : "rank", s.gpu ? "GPUs" : "ranks") + " on " +
         count_range(nodes_lo, nodes_hi, "node", "nodes");
}

}  // namespace

ScalingResult compute_scaling(const std::vector<RunPoint>& runs, const ScalingOptions& options) {
  check_options(options);
  if (runs.empty()) throw UsageError("no run reports to compare");
  std::map<int, std::vector<std::size_t>> by_size;
  for (std::size_t i = 0; i < runs.size(); ++i) by_size[runs[i].gpus].push_back(i);
  if (by_size.size() < 2 && !options.claims_like_for_like) {
    throw UsageError("a scaling report needs runs at two or more GPU counts; got " +
                     std::to_string(runs.size()) + (runs.size() == 1 ? " run" : " runs") +
                     ", all at " + gpus_text(runs.front().gpus) + " (" +
                     list_files({runs.front().path}) + (runs.size() > 1 ? ", ..." : "") +
                     "); one size is enough only to judge a recipe's claim (--claim-from-recipe, "
                     "or --claim-recipe NAME with --claim-tflops)");
  }
  check_workloads(runs, options);

  ScalingResult out;
  out.model_name = runs.front().model_name;
  out.system = study_system(runs);
  out.system_description = describe_study(out.system, runs);
  out.baseline_gpus = options.baseline_gpus.value_or(by_size.begin()->first);
  if (!by_size.contains(out.baseline_gpus)) {
    std::string sizes;
    for (const auto& [gpus, idx] : by_size)
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(gpus);
    throw UsageError("--baseline " + std::to_string(out.baseline_gpus) +
                     ": no run at that GPU count (sizes: " + sizes + ")");
  }
  for (const auto& entry : runs.front().workload_key) {
    const std::string& field = entry.first;  // (clang 14 cannot capture a structured binding)
    const std::string& value = entry.second;
    const bool mixed = is_allowed_mixed(field, options) &&
                       std::any_of(runs.begin(), runs.end(), [&](const RunPoint& r) {
                         for (const auto& kv : r.workload_key) {
                           if (kv.first == field) return kv.second != value;
                         }
                         return true;
                       });
    out.workload.emplace_back(field, mixed ? "mixed" : value);
    if (mixed) out.mixed_fields.push_back(field);
  }
  for (const auto& [gpus, idx] : by_size) out.sizes.push_back(aggregate(runs, idx, out.warnings));
  detect_mode(runs, out);
  if (out.sizes.size() == 1) {
    out.mode_explanation = "one size (" + gpus_text(out.sizes.front().gpus) +
                           "): no scaling measured; the claims are priced from its figures";
  }
  compute_efficiency(out);
  compute_growth(out);
  compute_verdicts(runs, options, out);
  collect_warnings(runs, out);
  return out;
}

}  // namespace moebench
