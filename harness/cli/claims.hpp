// Claims judged like for like (`report --claim-from-recipe`, `--claim-recipe NAME`): a published
// row's claim is about its own stack (Megatron-Core, Transformer Engine, HybridEP, CUDA graphs),
// not moebench's step, so it is judged against the recipe's step priced with this cluster's
// measured hardware figures (`predict --measured`), within the model's own error on the recipes
// it ships; and for each figure, what the claim needs of it (docs/claims.md).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/cli/measured.hpp"
#include "harness/scaling/scaling.hpp"

namespace moebench {

// The model's worst relative error |predicted / published - 1| over the shipped recipes, each
// priced on its own system with the datasheet and the generation's efficiencies: the band a
// like-for-like verdict allows, the same for every run.
struct ModelBand {
  double band = 0;
  std::string worst_recipe;
  int recipes = 0;
};
const ModelBand& model_band();

// One recipe's step at one size, priced with a set of hardware figures.
class RecipePricing {
 public:
  // The recipe `name` at `gpus` on `system` in the figures' precision; a weak-scaling global
  // batch (the recipe's per GPU) where `weak`. UsageError where the recipe cannot be laid out.
  RecipePricing(const std::string& name, int gpus, bool weak, const SystemSpec& system,
                const EfficiencySet& eff, const MeasuredFigures& figures);
  // TFLOP/s per GPU with the figures given at construction.
  double tflops_per_gpu() const { return priced(figures_); }
  // The same with the figure `term` (SI units) in place of the one priced.
  double tflops_with(const std::string& term, double value) const;
  // Every figure that prices something here, as priced: measured, or the model's.
  std::vector<Need> figures() const;
  const RunConfig& config() const { return config_; }

 private:
  double priced(const MeasuredFigures& m) const;
  RunConfig config_;
  Hardware hw_;
  Efficiencies eff_;
  TrainerRules rules_;
  MeasuredFigures figures_;
};

// The smallest value of `f`'s argument at which f reaches `target`, searched on a log scale
// from `start` (f non-decreasing); none where f stays below it up to 1e12 x start. A relative
// precision of 1e-6.
std::optional<double> smallest_reaching(const std::function<double(double)>& f, double start,
                                        double target);

// What the claim needs of each figure (`needed`: reach `claim`; `needed_to_pass`: reach
// claim / (1 + band)), the least raise first (needed / measured); then, where no value of a
// part reaches the claim, the least raise that passes it; those no value passes last.
std::vector<Need> claim_needs(const RecipePricing& p, double claim, double band);

// A claim about a recipe's stack, as `report` was given it.
struct RecipeClaim {
  std::string recipe;
  std::optional<double> tflops;      // TFLOP/s per GPU at the recipe's GPU count
  std::optional<double> efficiency;  // per-GPU efficiency from the recipe's count to `gpus`
  std::optional<int> gpus;           // --claim-gpus: the efficiency claim's larger size
};

// The like-for-like claim_tflops and claim_efficiency verdicts on a study (`result`, its `runs`
// measured on `system`): the recipe's step priced with the figures of the largest size (and of
// the baseline, for efficiency). Warnings where the figures' precision is not the recipe's.
std::vector<Verdict> recipe_claim_verdicts(const RecipeClaim& claim, const ScalingResult& result,
                                           const std::vector<RunPoint>& runs,
                                           const SystemSpec& system, const EfficiencySet& eff,
                                           std::vector<std::string>& warnings);

}  // namespace moebench
