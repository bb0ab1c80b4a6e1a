// Like-for-like claims on hand-computed cases: the bisection finds the value a monotone function
// reaches its target at (or says none does), the band is the model's worst error over the
// shipped recipes, pricing with the model's own figures is the recipe's prediction (the stack's
// terms kept), and a figure halved is the one the claim needs, at the value it had.
#include "harness/cli/claims.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "harness/cli/prediction.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {
namespace {

TEST_CASE("claims: the smallest value that reaches a target, searched either way") {
  // f(x) = x / (1 + x) reaches 0.5 at x = 1; the search stops within 1e-6 relative, and its
  // answer reaches the target (the bracket's upper end).
  const auto f = [](double x) { return x / (1 + x); };
  for (double start : {1e-3, 0.7, 1.0, 40.0, 1e4}) {
    CAPTURE(start);
    const std::optional<double> x = smallest_reaching(f, start, 0.5);
    REQUIRE(x.has_value());
    CHECK(*x == doctest::Approx(1.0).epsilon(2e-6));
    CHECK(f(*x) >= 0.5);
  }
  // Bounded below the target: no value reaches it.
  CHECK_FALSE(smallest_reaching([](double x) { return std::min(x, 2.0); }, 1.0, 3.0));
  // A step: anything at or above 5 reaches 1.
  const auto step = [](double x) { return x >= 5 ? 1.0 : 0.0; };
  CHECK(*smallest_reaching(step, 100.0, 1.0) == doctest::Approx(5.0).epsilon(2e-6));
}

TEST_CASE("claims: the band is the model's worst error over the recipes it ships") {
  const ModelBand& b = model_band();
  CHECK(b.recipes >= 1);
  CHECK(b.band > 0);
  recipe(b.worst_recipe);  // a shipped recipe (throws otherwise)
  // Every recipe priced on its own system lies within the band, the worst one on its edge.
  int priced = 0;
  for (const Recipe& r : recipes()) {
    if (!r.tflops_per_gpu || system_for_gpu(r.gpu).empty()) continue;
    const SystemSpec system = find_system(system_for_gpu(r.gpu));
    CliOptions o;
    o.workload.recipe = r.name;
    const RunConfig c = predict_config(o, r.gpus, system);
    const double error = std::abs(
        predict_step(c, hardware_for(system, c), efficiencies_for(system).values, trainer_rules(c))
                .tflops_per_gpu /
            *r.tflops_per_gpu -
        1);
    CAPTURE(r.name);
    CHECK(error <= b.band);
    if (r.name == b.worst_recipe) CHECK(error == doctest::Approx(b.band).epsilon(1e-12));
    ++priced;
  }
  CHECK(priced == b.recipes);
}

// The cpu system's own figures for a recipe, as if a run had measured exactly the model's rates.
MeasuredFigures model_figures(const SystemSpec& system, const RunConfig& c, double grouped) {
  const Hardware hw = hardware_for(system, c);
  const Efficiencies& e = efficiencies_for(system).values;
  MeasuredFigures m;
  m.precision = c.precision;
  for (const char* name : kHardwareTerms) {
    if (hw.nvlink_domain <= 1 && std::string(name) == "nvlink") continue;
    MeasuredTerm t = model_term(name, hw, e);
    if (std::string(name) == "grouped_gemm") {
      t.factor = grouped;
      t.measured *= grouped;
    }
    m.terms.push_back(t);
  }
  return m;
}

// gb300-mxfp8-256 at its 256 GPUs on `system`, in fp32 (the cpu system's precision).
RunConfig recipe_config(const SystemSpec& system) {
  CliOptions o;
  o.workload.recipe = "gb300-mxfp8-256";
  o.workload.precision = Precision::fp32;
  return predict_config(o, 256, system);
}

TEST_CASE("claims: the model's figures price the recipe as predict does; a halved one is needed") {
  const SystemSpec system = find_system("cpu");
  const EfficiencySet& eff = efficiencies_for(system);
  const RunConfig c = recipe_config(system);
  // The recipe's trainer terms (HybridEP, its overlap, CUDA graphs) stay: the same prediction as
  // predict's, to rounding (1e-9 relative: the same arithmetic with factors of exactly 1).
  const double predicted =
      predict_step(c, hardware_for(system, c), eff.values, trainer_rules(c)).tflops_per_gpu;
  const RecipePricing same("gb300-mxfp8-256", 256, false, system, eff,
                           model_figures(system, c, 1.0));
  CHECK(same.tflops_per_gpu() == doctest::Approx(predicted).epsilon(1e-9));

  // The grouped GEMM at half its rate: the claim of the full-rate figure needs it back at the
  // full rate (1e-5: the search's precision), it comes first, and passing the claim within the
  // band needs less of it than reaching the claim.
  const MeasuredFigures halved = model_figures(system, c, 0.5);
  const RecipePricing slow("gb300-mxfp8-256", 256, false, system, eff, halved);
  CHECK(slow.tflops_per_gpu() < predicted);
  const double full = hardware_for(system, c).gemm_flops * eff.values.grouped_gemm;
  const std::vector<Need> needs = claim_needs(slow, predicted, 0.1);
  REQUIRE(!needs.empty());
  CHECK(needs.front().name == "grouped_gemm");
  CHECK(needs.front().from == "measured");
  CHECK(needs.front().measured == doctest::Approx(full / 2).epsilon(1e-12));
  REQUIRE(needs.front().needed.has_value());
  CHECK(*needs.front().needed == doctest::Approx(full).epsilon(1e-5));
  REQUIRE(needs.front().needed_to_pass.has_value());
  CHECK(*needs.front().needed_to_pass < *needs.front().needed);
  // Every other figure needs more than its own value, or cannot reach it alone.
  for (std::size_t i = 1; i < needs.size(); ++i) {
    CAPTURE(needs[i].name);
    if (needs[i].needed) CHECK(*needs[i].needed > needs[i].measured);
  }
}

TEST_CASE("claims: where no part alone reaches the claim, the least raise that passes it first") {
  const SystemSpec system = find_system("cpu");
  const EfficiencySet& eff = efficiencies_for(system);
  const RunConfig c = recipe_config(system);
  const RecipePricing full("gb300-mxfp8-256", 256, false, system, eff,
                           model_figures(system, c, 1.0));
  // Every figure at 70% of the model's, the grouped GEMM at a tenth: at the full-rate figure's
  // claim no part alone is enough (the others fell too), but with a band of 50% the grouped GEMM
  // alone passes. It comes first, with only needed_to_pass.
  MeasuredFigures slowed = model_figures(system, c, 0.1);
  for (MeasuredTerm& t : slowed.terms) {
    if (t.name == "grouped_gemm") continue;
    t.factor *= 0.7;
    t.measured *= 0.7;
  }
  const RecipePricing slow("gb300-mxfp8-256", 256, false, system, eff, slowed);
  const std::vector<Need> needs = claim_needs(slow, full.tflops_per_gpu(), 0.5);
  REQUIRE(!needs.empty());
  for (const Need& n : needs) {
    CAPTURE(n.name);
    CHECK(!n.needed.has_value());
  }
  CHECK(needs.front().name == "grouped_gemm");
  REQUIRE(needs.front().needed_to_pass.has_value());
  CHECK(*needs.front().needed_to_pass > needs.front().measured);
  // The rest in order: each passing part by its raise, then those that cannot pass alone.
  for (std::size_t i = 1; i < needs.size(); ++i) {
    CAPTURE(needs[i].name);
    if (needs[i].needed_to_pass) {
      REQUIRE(needs[i - 1].needed_to_pass.has_value());
      CHECK(*needs[i - 1].needed_to_pass / needs[i - 1].measured <=
            *needs[i].needed_to_pass / needs[i].measured);
    }
  }
}

}  // namespace
}  // namespace moebench
