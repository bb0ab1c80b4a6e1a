#include "harness/scaling/scaling_report.hpp"

#include "harness/output/phase_table.hpp"

namespace moebench {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

ordered_json spread_json(const Spread& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"relative_spread", s.relative()}};
}

ordered_json optional_json(const std::optional<double>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json size_json(const SizeResult& s) {
  ordered_json j;
  j["gpus"] = s.gpus;
  j["nodes"] = s.nodes;
  j["ranks_per_node"] = s.ranks_per_node;
  j["ep"] = s.ep;
  j["runs"] = s.runs.size();
  j["inputs"] = s.runs;
  j["tokens_per_rank"] = s.tokens_per_rank;
  j["global_tokens"] = s.global_tokens;
  j["step_time_s"] = spread_json(s.step_time_s);
  j["tflops_per_gpu"] = spread_json(s.tflops_per_gpu);
  j["tokens_per_s_per_gpu"] = spread_json(s.tokens_per_s_per_gpu);
  j["compute_time_s"] = s.compute_time_s;
  j["communication_time_s"] = s.communication_time_s;
  j["exposed_communication_s"] = s.exposed_communication_s;
  j["exposed_communication_share"] = s.exposed_share;
  ordered_json phases = ordered_json::object();
  for (std::size_t p = 0; p < kPhaseCount; ++p)
    phases[std::string(kPhaseNames[p])] = s.phase_time_s[p];
  j["phase_time_s"] = phases;
  ordered_json maxima = ordered_json::object();
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    maxima[std::string(kPhaseNames[p])] = s.phase_max_s[p];
  }
  j["phase_max_s"] = maxima;
  j["busbw"] = {{"dispatch", s.busbw[static_cast<std::size_t>(Phase::dispatch)]},
                {"combine", s.busbw[static_cast<std::size_t>(Phase::combine)]},
                {"alltoall", s.alltoall_busbw},
                {"grad_reduce", s.busbw[static_cast<std::size_t>(Phase::grad_reduce)]}};
  j["speedup"] = s.speedup;
  j["efficiency"] = s.efficiency;
  j["verification"] = verification_name(s.verification);
  return j;
}

ordered_json growth_json(const PhaseGrowth& g) {
  ordered_json j;
  j["from_gpus"] = g.from_gpus;
  j["to_gpus"] = g.to_gpus;
  j["from_step_time_s"] = g.from_step_s;
  j["to_step_time_s"] = g.to_step_s;
  ordered_json phases = ordered_json::object();
  for (const PhaseChange& c : g.phases) {
    const auto ratio = c.ratio();
    phases[std::string(phase_name(c.phase))] = {{"from_s", c.from_s},
                                                {"to_s", c.to_s},
                                                {"delta_s", c.delta_s()},
                                                {"ratio", optional_json(ratio)}};
  }
  j["phases"] = phases;
  ordered_json grew = ordered_json::array();
  for (Phase p : g.grew) grew.push_back(std::string(phase_name(p)));
  j["grew"] = grew;
  return j;
}

ordered_json verdict_json(const Verdict& v) {
  ordered_json j;
  j["name"] = v.name;
  j["gpus"] = v.gpus;
  j["baseline_gpus"] = v.baseline_gpus ? ordered_json(v.baseline_gpus) : ordered_json(nullptr);
  j["measured"] = v.measured;
  j["threshold"] = v.threshold;
  j["comparison"] = v.comparison;
  j["margin"] = v.margin;
  j["relative_margin"] = v.relative_margin;
  j["passed"] = v.passed;
  j["result"] = v.passed ? "PASS" : "FAIL";
  j["reason"] = v.reason;
  if (v.like_for_like) {
    const ClaimBasis& b = *v.like_for_like;
    const bool tflops = v.name == "claim_tflops";
    j["like_for_like"] = true;
    j["recipe"] = b.recipe;
    j["recipe_gpus"] = b.recipe_gpus;
    j["claim"] = b.claim;
    j[tflops ? "expected_tflops_per_gpu" : "expected_efficiency"] = b.expected;
    j["band"] = b.band;
    j["basis"] = b.basis;
    ordered_json needs = ordered_json::array();
    for (const Need& n : b.needs) {
      needs.push_back({{"name", n.name},
                       {"measured", n.measured},
                       {"from", n.from},
                       {"needed", optional_json(n.needed)},
                       {"needed_to_pass", optional_json(n.needed_to_pass)},
                       {"datasheet", n.datasheet},
                       {"unit", n.unit}});
    }
    j["needs"] = needs;
  }
  return j;
}

ordered_json input_json(const RunPoint& r) {
  ordered_json j;
  j["path"] = r.path;
  j["sha256"] = r.sha256;
  j["gpus"] = r.gpus;
  j["nodes"] = r.nodes;
  j["job_id"] = r.job_id.empty() ? ordered_json(nullptr) : ordered_json(r.job_id);
  j["hosts"] = r.hosts;
  j["start_time"] = r.start_time;
  j["tool_version"] = r.tool_version;
  j["git_sha"] = r.git_sha;
  j["steps"] = r.steps;
  j["synthetic"] = r.synthetic;
  j["verification"] = !r.verification_enabled ? "not_run"
                      : r.verification_passed ? "passed"
                                              : "failed";
  return j;
}

}  // namespace

ordered_json make_scaling_report(const ScalingResult& result, const std::vector<RunPoint>& runs,
                                 const ScalingOptions& options, const ScalingMeta& meta) {
  ordered_json j;
  j["schema_version"] = kScalingSchemaVersion;
  j["kind"] = kScalingReportKind;
  j["meta"] = {{"tool_version", meta.tool_version},
               {"git_sha", meta.git_sha},
               {"git_dirty", meta.git_dirty},
               {"argv", meta.argv},
               {"created", meta.created}};

  ordered_json fields = ordered_json::object();
  for (const auto& [field, value] : result.workload) {
    const bool mixed = std::find(result.mixed_fields.begin(), result.mixed_fields.end(), field) !=
                       result.mixed_fields.end();
    fields[field] =
        mixed || value == "(absent)" ? ordered_json(nullptr) : ordered_json::parse(value);
  }
  j["system"] = {{"accelerator", result.system.accelerator},
                 {"gpu", result.system.gpu},
                 {"software", result.system.software},
                 {"description", result.system_description}};
  j["workload"] = {
      {"model", result.model_name}, {"fields", fields}, {"mixed_fields", result.mixed_fields}};
  j["scaling"] = {{"mode", mode_name(result.mode)},
                  {"explanation", result.mode_explanation},
                  {"efficiency_definition", result.efficiency_definition},
                  {"baseline_gpus", result.baseline_gpus}};
  j["thresholds"] = {{"claim_tflops", optional_json(options.claim_tflops)},
                     {"claim_efficiency", optional_json(options.claim_efficiency)},
                     {"min_tflops", optional_json(options.min_tflops)},
                     {"min_efficiency", optional_json(options.min_efficiency)}};
  ordered_json sizes = ordered_json::array();
  for (const SizeResult& s : result.sizes) sizes.push_back(size_json(s));
  j["sizes"] = sizes;
  ordered_json growth = ordered_json::array();
  for (const PhaseGrowth& g : result.growth) growth.push_back(growth_json(g));
  j["phase_growth"] = growth;
  ordered_json verdicts = ordered_json::array();
  for (const Verdict& v : result.verdicts) verdicts.push_back(verdict_json(v));
  j["verdicts"] = verdicts;
  j["passed"] = result.passed();
  if (const auto& c = result.recipe_comparison) {
    j["recipe_comparison"] = {{"recipe", c->recipe},
                              {"gpus", c->gpus},
                              {"published_tflops_per_gpu", c->published},
                              {"measured_tflops_per_gpu", c->measured},
                              {"ratio", c->measured / c->published},
                              {"comparable", c->differences.empty()},
                              {"differences", c->differences}};
  } else {
    j["recipe_comparison"] = nullptr;
  }
  ordered_json inputs = ordered_json::array();
  for (const RunPoint& r : runs) inputs.push_back(input_json(r));
  j["inputs"] = inputs;
  j["warnings"] = result.warnings;
  j["phase_table"] = phase_table_json();  // what the phase keys above are, for the plot
  return j;
}

}  // namespace moebench
