#include "harness/cli/measured.hpp"

#include <algorithm>
#include <map>

#include "harness/cli/prediction.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "harness/measure/stats.hpp"

namespace moebench {

namespace {

// Which phases of a run measure which hardware figure: the phases each one dominates in the model.
// The exchanges' link is the one their group crosses: the expert-parallel all-to-all stays inside
// an NVLink domain where the group fits one, the data-parallel reduction where the whole world
// does; on a system without NVLink domains both are the scale-out network's.
struct TermSpec {
  const char* name;
  const char* unit;
  std::vector<std::string> phases;
};

std::vector<TermSpec> term_specs(const RunConfig& c, const Hardware& hw) {
  const int domain = std::max(1, hw.nvlink_domain);
  const char* ep_link = domain > 1 && c.layout.ep <= domain ? "nvlink" : "scale_out";
  const char* dp_link = domain > 1 && c.layout.world <= domain ? "nvlink" : "scale_out";
  std::vector<TermSpec> t = {{"dense_gemm", "FLOP/s", {"dense_mlp", "shared_expert"}},
                             {"grouped_gemm", "FLOP/s", {"experts"}},
                             {"attention", "FLOP/s", {"attention"}},
                             {"memory", "bytes/s", {"permute", "optimizer"}},
                             {ep_link, "bytes/s", {"dispatch", "combine"}}};
  if (std::string(dp_link) == ep_link) {
    t.back().phases.push_back("grad_reduce");
  } else {
    t.push_back({dp_link, "bytes/s", {"grad_reduce"}});
  }
  return t;
}

double datasheet_of(const std::string& term, const Hardware& hw) {
  if (term == "dense_gemm" || term == "grouped_gemm") return hw.gemm_flops;
  if (term == "attention") return hw.attention_flops;
  if (term == "memory") return hw.memory_bandwidth;
  if (term == "nvlink") return hw.nvlink.bandwidth_bytes_per_s;
  return hw.scale_out.bandwidth_bytes_per_s;
}

template <typename E>
auto& efficiency_of(const std::string& term, E& e) {
  if (term == "dense_gemm") return e.dense_gemm;
  if (term == "grouped_gemm") return e.grouped_gemm;
  if (term == "attention") return e.attention;
  if (term == "memory") return e.memory;
  if (term == "nvlink") return e.nvlink;
  return e.scale_out;
}

const char* unit_of(const std::string& term) {
  return term == "memory" || term == "nvlink" || term == "scale_out" ? "bytes/s" : "FLOP/s";
}

}  // namespace

MeasuredTerm model_term(const std::string& name, const Hardware& hw, const Efficiencies& eff) {
  MeasuredTerm t;
  t.name = name;
  t.unit = unit_of(name);
  t.datasheet = datasheet_of(name, hw);
  t.model_efficiency = efficiency_of(name, eff);
  t.factor = 1;
  t.measured = t.datasheet * t.model_efficiency;
  return t;
}

MeasuredFigures measure_figures(const std::vector<std::string>& paths, const SystemSpec& system,
                                const EfficiencySet& eff, bool allow_injected,
                                const std::string& flag_name) {
  MeasuredFigures out;
  std::map<std::string, MeasuredTerm> terms;
  std::map<std::string, std::vector<double>> factors;
  std::vector<std::string> order;
  for (const std::string& path : paths) {
    const std::string flag = flag_name + " " + path + ": ";
    const nlohmann::json doc = read_measured_run(path, system, flag, "measure", allow_injected);
    RunConfig c = config_of_report(doc, flag);
    // The cpu backend emulates FP8 in FP32 (quantised operands, FP32 GEMMs): its rates are FP32
    // rates, and it is priced as FP32, the quantisation inside the GEMM phases' measured time.
    if (system.generation == "cpu" && c.precision == Precision::fp8) {
      c.precision = Precision::fp32;
      out.emulated_fp8 = true;
    }
    if (out.files.empty()) {
      out.precision = c.precision;
      out.fp8_recipe = c.fp8_recipe;
    } else if (c.precision != out.precision || c.fp8_recipe != out.fp8_recipe) {
      throw UsageError(flag + "ran " + to_string(c.precision) + ", the runs before it " +
                       to_string(out.precision) + "; give runs of one precision");
    }
    out.files.push_back(path);
    const Hardware hw = hardware_for(system, c);
    const Prediction p = predict_step(c, hw, eff.values);
    const nlohmann::json& b = doc["results"]["step_breakdown"];
    const nlohmann::json& measured = b["phase_time_s"];
    std::map<std::string, double> model;
    for (const PredictedPhase& ph : p.phases) model[ph.name] = ph.time_s;
    for (const TermSpec& spec : term_specs(c, hw)) {
      double m = 0, t = 0;
      std::vector<std::string> used;
      for (const std::string& phase : spec.phases) {
        const double x = measured.value(phase, 0.0);
        const double y = model.count(phase) ? model[phase] : 0.0;
        if (x > 0 && y > 0) {
          m += x;
          t += y;
          used.push_back(phase);
        }
      }
      if (m <= 0) continue;  // this run does not measure it (no such phase, or none timed)
      MeasuredTerm& term = terms[spec.name];
      if (term.name.empty()) {
        term.name = spec.name;
        term.unit = spec.unit;
        term.datasheet = datasheet_of(spec.name, hw);
        term.model_efficiency = efficiency_of(spec.name, eff.values);
        order.push_back(spec.name);
      }
      for (const std::string& u : used) {
        if (std::find(term.phases.begin(), term.phases.end(), u) == term.phases.end()) {
          term.phases.push_back(u);
        }
      }
      factors[spec.name].push_back(t / m);
      term.sources.push_back(
          path + ": " + join(used, ", ") + " on rank " + std::to_string(b["rank"].get<int>()) +
          " (the rank that set the step time), the model's " + strprintf("%.4g", t) +
          " s against " + strprintf("%.4g", m) + " s measured");
    }
  }
  for (const std::string& name : order) {
    MeasuredTerm t = terms[name];
    t.factor = median(factors[name]);
    t.measured = t.datasheet * t.model_efficiency * t.factor;
    out.terms.push_back(t);
  }
  if (out.terms.empty()) {
    throw UsageError(flag_name +
                     ": the runs timed no phase the model prices; give run reports of "
                     "`moebench run --out` with --steps 1 or more");
  }
  return out;
}

void apply_measured(const MeasuredFigures& m, Hardware& hw, Efficiencies& eff) {
  for (const MeasuredTerm& t : m.terms) efficiency_of(t.name, eff) = t.model_efficiency * t.factor;
  // A product over 1 raises the peak it multiplies, for every efficiency that peak serves.
  const auto lift = [](double& peak, std::vector<double*> effs) {
    double k = 1;
    for (double* e : effs) k = std::max(k, *e);
    peak *= k;
    for (double* e : effs) *e /= k;
  };
  lift(hw.gemm_flops, {&eff.dense_gemm, &eff.grouped_gemm});
  lift(hw.attention_flops, {&eff.attention});
  lift(hw.memory_bandwidth, {&eff.memory});
  if (hw.nvlink_domain > 1) {
    lift(hw.nvlink.bandwidth_bytes_per_s, {&eff.nvlink});
  } else {
    eff.nvlink = std::min(eff.nvlink, 1.0);  // no NVLink: its figure prices nothing
  }
  lift(hw.scale_out.bandwidth_bytes_per_s, {&eff.scale_out});
}

nlohmann::ordered_json measured_sources(const MeasuredFigures& m) {
  nlohmann::ordered_json j;
  for (const char* name : kHardwareTerms) {
    const bool measured = std::any_of(m.terms.begin(), m.terms.end(),
                                      [&](const MeasuredTerm& t) { return t.name == name; });
    j[name] = measured ? "measured" : "model";
  }
  // What the recipe's trainer does that moebench's step does not run: the model's, always.
  for (const char* name : {"dispatcher", "ep_comm_overlap", "host_overhead", "pipeline_schedule"}) {
    j[name] = "model";
  }
  return j;
}

nlohmann::ordered_json to_json(const MeasuredFigures& m) {
  nlohmann::ordered_json j;
  j["files"] = m.files;
  j["precision"] = m.precision == Precision::fp8 && m.fp8_recipe == Fp8Recipe::mxfp8
                       ? "mxfp8"
                       : to_string(m.precision);
  nlohmann::ordered_json terms = nlohmann::ordered_json::array();
  for (const MeasuredTerm& t : m.terms) {
    terms.push_back({{"name", t.name},
                     {"unit", t.unit},
                     {"measured", t.measured},
                     {"datasheet", t.datasheet},
                     {"model_efficiency", t.model_efficiency},
                     {"factor", t.factor},
                     {"phases", t.phases},
                     {"sources", t.sources}});
  }
  j["terms"] = terms;
  return j;
}

}  // namespace moebench
