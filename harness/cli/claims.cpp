#include "harness/cli/claims.hpp"

#include <algorithm>
#include <cmath>

#include "harness/cli/prediction.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {

const ModelBand& model_band() {
  static const ModelBand band = [] {
    ModelBand b;
    for (const Recipe& r : recipes()) {
      if (!r.tflops_per_gpu) continue;
      const std::string name = system_for_gpu(r.gpu);
      if (name.empty()) continue;
      const SystemSpec system = find_system(name);
      CliOptions o;
      o.workload.recipe = r.name;
      const RunConfig c = predict_config(o, r.gpus, system);
      const Prediction p = predict_step(c, hardware_for(system, c), efficiencies_for(system).values,
                                        trainer_rules(c));
      const double error = std::abs(p.tflops_per_gpu / *r.tflops_per_gpu - 1.0);
      ++b.recipes;
      if (error > b.band) {
        b.band = error;
        b.worst_recipe = r.name;
      }
    }
    MB_CHECK(b.recipes > 0, "no shipped recipe could be priced to give the model's band");
    return b;
  }();
  return band;
}

RecipePricing::RecipePricing(const std::string& name, int gpus, bool weak, const SystemSpec& system,
                             const EfficiencySet& eff, const MeasuredFigures& figures)
    : eff_(eff.values), figures_(figures) {
  const Recipe& r = recipe(name);
  CliOptions o;
  o.workload.recipe = name;
  // The figures are rates at the runs' precision: the recipe is priced in it.
  o.workload.precision = figures.precision;
  if (figures.precision == Precision::fp8) o.workload.fp8_recipe = figures.fp8_recipe;
  if (weak) o.global_batch_per_gpu = std::max<std::int64_t>(1, r.global_batch / r.gpus);
  config_ = predict_config(o, gpus, system);
  hw_ = hardware_for(system, config_);
  rules_ = trainer_rules(config_);
}

double RecipePricing::priced(const MeasuredFigures& m) const {
  Hardware hw = hw_;
  Efficiencies e = eff_;
  apply_measured(m, hw, e);
  return predict_step(config_, hw, e, rules_).tflops_per_gpu;
}

double RecipePricing::tflops_with(const std::string& term, double value) const {
  MeasuredFigures m = figures_;
  auto it = std::find_if(m.terms.begin(), m.terms.end(),
                         [&](const MeasuredTerm& t) { return t.name == term; });
  if (it == m.terms.end()) {
    m.terms.push_back(model_term(term, hw_, eff_));
    it = std::prev(m.terms.end());
  }
  it->factor = value / (it->datasheet * it->model_efficiency);
  it->measured = value;
  return priced(m);
}

std::vector<Need> RecipePricing::figures() const {
  std::vector<Need> out;
  for (const char* name : kHardwareTerms) {
    // Without NVLink domains the NVLink figure prices nothing.
    if (std::string(name) == "nvlink" && hw_.nvlink_domain <= 1) continue;
    MeasuredTerm t = model_term(name, hw_, eff_);
    Need n;
    n.name = name;
    n.unit = t.unit;
    n.datasheet = t.datasheet;
    n.measured = t.measured;
    n.from = "model";
    for (const MeasuredTerm& m : figures_.terms) {
      if (m.name == n.name) {
        n.measured = m.measured;
        n.from = "measured";
      }
    }
    if (n.datasheet > 0 && n.measured > 0) out.push_back(n);
  }
  return out;
}

std::optional<double> smallest_reaching(const std::function<double(double)>& f, double start,
                                        double target) {
  // A bracket [lo, hi] with f(lo) < target <= f(hi), by factors of 4 either way.
  double lo = start, hi = start;
  if (f(start) >= target) {
    for (int i = 0; i < 20 && f(lo) >= target; ++i) lo /= 4;
    if (f(lo) >= target) return lo;  // reached at a millionth of the start: as good as nothing
  } else {
    for (int i = 0; i < 20 && f(hi) < target; ++i) hi *= 4;
    if (f(hi) < target) return std::nullopt;
  }
  while (hi / lo > 1 + 1e-6) {
    const double mid = std::sqrt(lo * hi);
    (f(mid) >= target ? hi : lo) = mid;
  }
  return hi;
}

std::vector<Need> claim_needs(const RecipePricing& p, double claim, double band) {
  std::vector<Need> out = p.figures();
  for (Need& n : out) {
    const auto f = [&](double x) { return p.tflops_with(n.name, x); };
    n.needed = smallest_reaching(f, n.measured, claim);
    n.needed_to_pass = smallest_reaching(f, n.measured, claim / (1 + band));
  }
  // The least raise that reaches the claim first: what holds the claim back most cheaply. Where
  // no part alone reaches the claim (the others fell too), the least raise that passes it.
  const auto tier = [](const Need& n) { return n.needed ? 0 : n.needed_to_pass ? 1 : 2; };
  const auto raise = [](const Need& n) {
    const std::optional<double>& x = n.needed ? n.needed : n.needed_to_pass;
    return x ? *x / n.measured : 0.0;
  };
  std::stable_sort(out.begin(), out.end(), [&](const Need& a, const Need& b) {
    if (tier(a) != tier(b)) return tier(a) < tier(b);
    return tier(a) < 2 && raise(a) < raise(b);
  });
  return out;
}

namespace {

std::string sig(double x) {
  return strprintf("%.4g", x);
}

MeasuredFigures size_figures(const SizeResult& s, const std::vector<RunPoint>& runs,
                             const SystemSpec& system, const EfficiencySet& eff) {
  std::vector<std::string> paths;
  for (std::size_t i : s.runs) paths.push_back(runs[i].path);
  // Injected runs are priced too: the report's `injected` verdict judges them.
  return measure_figures(paths, system, eff, /*allow_injected=*/true, "report:");
}

// What was priced with what: the measured figures by name, the model's by name.
std::string figures_text(const MeasuredFigures& m, const RecipePricing& p, const SizeResult& s) {
  std::string measured, model;
  for (const Need& n : p.figures()) {
    std::string& list = n.from == "measured" ? measured : model;
    list += (list.empty() ? "" : ", ") + n.name;
  }
  return "measured at " + gpus_text(s.gpus) + " (" + std::to_string(m.files.size()) +
         (m.files.size() == 1 ? " run" : " runs") + "): " + (measured.empty() ? "none" : measured) +
         (model.empty() ? std::string() : "; the system's datasheet x efficiency: " + model) +
         "; the model's: the recipe's dispatcher, overlap, CUDA graphs and schedule";
}

Verdict like_for_like(const std::string& name, const SizeResult& s, ClaimBasis b,
                      const std::string& what) {
  Verdict v;
  v.name = name;
  v.gpus = s.gpus;
  v.measured = b.expected;
  v.threshold = b.claim / (1 + b.band);
  v.comparison = ">=";
  v.margin = v.measured - v.threshold;
  v.relative_margin = v.margin / v.threshold;
  v.passed = v.measured >= v.threshold;
  const std::string upper = sig(b.expected * (1 + b.band));
  v.reason = "like for like: " + what + ", against the recipe's step priced with this " +
             "cluster's figures, " + sig(b.expected) + " (band +" +
             strprintf("%.1f", 100 * b.band) + "%, up to " + upper +
             "): " + (v.passed ? "within or below the band" : "above the band");
  if (!v.passed && !b.needs.empty()) {
    // needs comes sorted: its first names the least raise (to reach the claim, else to pass it).
    const Need& n = b.needs.front();
    const bool reach = n.needed.has_value();
    const std::optional<double>& x = reach ? n.needed : n.needed_to_pass;
    if (x && *x > n.measured) {
      const RateScale k = rate_scale(n.unit);
      v.reason += "; it needs " + n.name + " at " + sig(*x / k.per) + " " + k.name +
                  (reach ? "" : " to pass (no part alone reaches the claim)") +
                  " (this cluster: " + sig(n.measured / k.per) + ")";
    }
  }
  if (!s.failed_runs.empty()) {
    v.passed = false;
    std::string files;
    for (const std::string& f : s.failed_runs) files += (files.empty() ? "" : ", ") + f;
    v.reason += "; FAIL regardless: verification failed in " + files;
  }
  v.like_for_like = std::move(b);
  return v;
}

}  // namespace

std::vector<Verdict> recipe_claim_verdicts(const RecipeClaim& claim, const ScalingResult& result,
                                           const std::vector<RunPoint>& runs,
                                           const SystemSpec& system, const EfficiencySet& eff,
                                           std::vector<std::string>& warnings) {
  std::vector<Verdict> out;
  const Recipe& r = recipe(claim.recipe);
  const ModelBand& band = model_band();
  const std::string band_text =
      "band: the model's worst error on the " + std::to_string(band.recipes) +
      " recipes it ships, " + strprintf("%.1f%%", 100 * band.band) + " (" + band.worst_recipe + ")";
  const SizeResult& largest = result.sizes.back();
  const MeasuredFigures figures = size_figures(largest, runs, system, eff);
  const std::string precision = to_json(figures)["precision"].get<std::string>();
  if (precision != r.precision) {
    warnings.push_back("recipe " + r.name + " is priced in " + precision + ", " +
                       (figures.emulated_fp8 ? "as the runs' fp8 emulated in FP32 on the cpu "
                                               "backend computes,"
                                             : "the runs' precision,") +
                       " not the row's " + r.precision + ": its expected figure is for " +
                       precision);
  }
  if (claim.tflops) {
    const RecipePricing p(r.name, r.gpus, false, system, eff, figures);
    ClaimBasis b;
    b.recipe = r.name;
    b.recipe_gpus = r.gpus;
    b.claim = *claim.tflops;
    b.expected = p.tflops_per_gpu();
    b.band = band.band;
    b.needs = claim_needs(p, b.claim, b.band);
    b.basis = "recipe " + r.name + " at " + gpus_text(r.gpus) + " in " + precision + " on system " +
              system.name + "; " + figures_text(figures, p, largest) + "; " + band_text;
    const std::string what = "recipe " + r.name + "'s claim of " + sig(b.claim) +
                             " TFLOP/s per GPU at " + gpus_text(r.gpus);
    out.push_back(like_for_like("claim_tflops", largest, std::move(b), what));
  }
  if (claim.efficiency) {
    const SizeResult* base = &result.sizes.front();
    for (const SizeResult& s : result.sizes) {
      if (s.gpus == result.baseline_gpus) base = &s;
    }
    const int to =
        claim.gpus ? *claim.gpus
                   : static_cast<int>(static_cast<long long>(r.gpus) * largest.gpus / base->gpus);
    if (to <= r.gpus) {
      throw UsageError("--claim-efficiency: the claim's larger size must exceed recipe " + r.name +
                       "'s " + gpus_text(r.gpus) +
                       (claim.gpus ? "; --claim-gpus " + std::to_string(*claim.gpus) + " does not"
                                   : "; one size was measured: give --claim-gpus N, the "
                                     "size the claimed efficiency reaches"));
    }
    const bool weak = result.mode != ScalingMode::strong;
    const MeasuredFigures base_figures =
        base == &largest ? figures : size_figures(*base, runs, system, eff);
    double from = 0, at = 0;
    try {
      from = RecipePricing(r.name, r.gpus, weak, system, eff, base_figures).tflops_per_gpu();
      at = RecipePricing(r.name, to, weak, system, eff, figures).tflops_per_gpu();
    } catch (const UsageError& e) {
      throw UsageError("--claim-efficiency: recipe " + r.name + " at " + gpus_text(to) + ": " +
                       e.what());
    }
    ClaimBasis b;
    b.recipe = r.name;
    b.recipe_gpus = to;
    b.claim = *claim.efficiency;
    b.expected = at / from;
    b.band = band.band;
    b.basis = "recipe " + r.name + " priced at " + gpus_text(r.gpus) + " with the figures of " +
              gpus_text(base->gpus) + " (" + sig(from) + " TFLOP/s per GPU) and at " +
              gpus_text(to) + " with those of " + gpus_text(largest.gpus) + " (" + sig(at) + "), " +
              (weak ? "its global batch per GPU fixed" : "its global batch fixed") + ", in " +
              precision + " on system " + system.name + "; " + band_text;
    const std::string what = "recipe " + r.name + "'s claim of " + sig(b.claim) +
                             " per-GPU efficiency from " + gpus_text(r.gpus) + " to " +
                             gpus_text(to);
    out.push_back(like_for_like("claim_efficiency", largest, std::move(b), what));
    out.back().baseline_gpus = base->gpus;
  }
  return out;
}

}  // namespace moebench
