// The scaling computations, pure functions of the runs' figures: runs grouped by GPU count
// (repeats combined by their median), weak or strong scaling detected, efficiencies against a
// baseline size, which phases grew between sizes, the verdicts on claims and thresholds, and the
// warnings a reader should see. Formatting (JSON, Markdown, terminal, plot) only reads the result.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/measure/phases.hpp"
#include "harness/scaling/inputs.hpp"

namespace moebench {

struct ScalingOptions {
  std::optional<int> baseline_gpus;        // default: the smallest GPU count
  std::vector<std::string> allow_mixed;    // mixable_fields() allowed to differ between sizes
  std::optional<double> claim_tflops;      // at the largest size
  std::optional<double> claim_efficiency;  // at the largest size, against the baseline
  std::optional<double> min_tflops;        // at every size
  std::optional<double> min_efficiency;    // at every size but the baseline
  // The largest size's runs against their recipe's published row, as a figure (never a verdict:
  // moebench's step is not the published stack): comparable or not, with every difference.
  bool claim_from_recipe = false;
  // The claims are about a recipe's stack and judged like for like by the caller (the recipe's
  // step priced with the measured figures): no direct claim_tflops or claim_efficiency verdict
  // on moebench's own step, and one size is enough.
  bool claims_like_for_like = false;
  // Runs with health suspects or an injected fault are a failing verdict unless allowed.
  bool allow_suspects = false;
  bool allow_injected = false;
};

enum class ScalingMode {
  weak,    // tokens per GPU fixed: efficiency = TFLOP/s per GPU / the baseline's
  strong,  // global tokens fixed: efficiency = speedup / GPU ratio
  mixed,   // both vary (--allow-mixed): efficiency = TFLOP/s per GPU / the baseline's
};
const char* mode_name(ScalingMode m);

// "1 GPU", "256 GPUs".
std::string gpus_text(int n);

// A figure over the repeated runs of one size.
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
  double relative() const { return median > 0 ? (max - min) / median : 0; }  // (max-min)/median
};

enum class VerificationState { passed, failed, not_run, partial };  // partial: some runs unverified
const char* verification_name(VerificationState v);

struct SizeResult {
  int gpus = 0;
  int nodes = 0;
  int ranks_per_node = 0;
  int ep = 0;
  std::vector<std::size_t> runs;  // indices into the inputs
  double tokens_per_rank = 0;
  double global_tokens = 0;
  Spread step_time_s;
  Spread tflops_per_gpu;
  Spread tokens_per_s_per_gpu;
  // Medians over the repeats:
  double compute_time_s = 0;
  double communication_time_s = 0;
  double exposed_communication_s = 0;
  double exposed_share = 0;         // exposed communication / step time
  PerPhase<double> phase_time_s{};  // the rank that sets the step time (RunPoint::phase_time_s)
  PerPhase<double> phase_max_s{};   // each phase's slowest rank (not additive)
  PerPhase<double> busbw{};   // dispatch, combine (all-to-all) and grad_reduce; 0 for the others
  double alltoall_busbw = 0;  // dispatch and combine together: their bus bytes / their time
  // Against the baseline size:
  double speedup = 0;     // the global FLOP rate relative to the baseline's
  double efficiency = 0;  // see ScalingMode
  VerificationState verification = VerificationState::not_run;
  std::vector<std::string> failed_runs;  // paths of the runs whose verification failed
  long long mismatches = 0;              // wrong elements, summed over the verified runs
  std::vector<std::string> suspects;     // "PATH: rank R on HOST (...)", every run's
  std::vector<std::string> injected;     // "PATH: SPEC", the runs that injected a fault
  bool fp8_emulated = false;             // some run's fp8 was emulated
};

// One phase between two consecutive sizes.
struct PhaseChange {
  Phase phase = Phase::attention;
  double from_s = 0;
  double to_s = 0;
  double delta_s() const { return to_s - from_s; }
  std::optional<double> ratio() const {
    return from_s > 0 ? std::optional<double>(to_s / from_s) : std::nullopt;
  }
};

struct PhaseGrowth {
  int from_gpus = 0;
  int to_gpus = 0;
  double from_step_s = 0;
  double to_step_s = 0;
  std::vector<PhaseChange> phases;  // every phase, in phase order
  // Phases whose time grew by more than 1% of the smaller size's step time, largest first.
  std::vector<Phase> grew;
};

// What a claim needs of one hardware figure (the claims guide, docs/claims.md): the smallest
// value at which the recipe's priced step reaches the claim with every other figure as it was
// measured (none: not reachable by this part alone), in SI units.
struct Need {
  std::string name;              // dense_gemm, grouped_gemm, attention, memory, nvlink, scale_out
  std::string unit;              // FLOP/s or bytes/s
  double measured = 0;           // the value priced: measured, or the model's where `from` says so
  std::string from;              // "measured" or "model" (the system's datasheet x efficiency)
  std::optional<double> needed;  // to reach the claim
  std::optional<double> needed_to_pass;  // for the claim to fall within the band
  double datasheet = 0;
};

// A like-for-like claim verdict's own figures.
struct ClaimBasis {
  std::string recipe;
  int recipe_gpus = 0;  // the size the claim is priced at
  double claim = 0;     // the claimed TFLOP/s per GPU or efficiency
  double expected = 0;  // what the recipe's step gives on this cluster's figures
  double band = 0;      // the model's worst relative error on the recipes it ships
  std::string basis;    // one line: what was priced, with what, from where
  std::vector<Need> needs;
};

struct Verdict {
  // claim_tflops, claim_efficiency, min_tflops, min_efficiency, verification, health, injected
  std::string name;
  int gpus = 0;
  int baseline_gpus = 0;  // efficiency verdicts only
  double measured = 0;
  double threshold = 0;
  std::string comparison;      // ">=" (thresholds) or "<=" (verification: mismatches <= 0)
  double margin = 0;           // how far on the passing side: > 0 passes (ties pass too)
  double relative_margin = 0;  // margin / threshold; 0 when the threshold is 0
  bool passed = false;
  std::string reason;                       // one line: the comparison, or why it cannot pass
  std::optional<ClaimBasis> like_for_like;  // claim_tflops / claim_efficiency about a recipe
};

// --claim-from-recipe: moebench's own step against the published row, a figure beside the
// verdicts (moebench's step is not the stack that published it).
struct RecipeComparison {
  std::string recipe;
  int gpus = 0;                          // the study's largest size
  double published = 0;                  // the row's TFLOP/s per GPU
  double measured = 0;                   // moebench's step, median at the largest size
  std::vector<std::string> differences;  // how the runs differ from the row (empty: comparable)
};

struct ScalingResult {
  ScalingMode mode = ScalingMode::weak;
  std::string mode_explanation;
  std::string efficiency_definition;
  int baseline_gpus = 0;
  std::string model_name;
  // Who was measured: the runs' accelerators and software (distinct values joined by " + "),
  // and the whole study in one line ("NVIDIA H200 (driver ..., CUDA ..., NCCL ...), 256 to 1024
  // GPUs on 32 to 128 nodes").
  SystemName system;
  std::string system_description;
  std::vector<FieldValue> workload;  // the key every run shares (mixed fields say "mixed")
  std::vector<std::string> mixed_fields;
  std::vector<SizeResult> sizes;  // by GPU count, ascending
  std::vector<PhaseGrowth> growth;
  std::vector<Verdict> verdicts;
  std::optional<RecipeComparison> recipe_comparison;
  std::vector<std::string> warnings;
  bool passed() const;  // no verdict failed (true when there is none)
};

// UsageError when the runs cannot be compared: fewer than two GPU counts (one is enough with
// claims_like_for_like), runs of different
// workloads or of different per-GPU work without --allow-mixed (naming the field, the values and
// the files), repeats of one size that differ, a --baseline that is not one of the sizes, or a
// threshold out of range.
ScalingResult compute_scaling(const std::vector<RunPoint>& runs, const ScalingOptions& options);

}  // namespace moebench
