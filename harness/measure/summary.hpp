// From every rank's step samples to the run's results: pure, so it is tested without MPI.
#pragma once

#include <optional>

#include <string>
#include <vector>

#include "harness/measure/results.hpp"

namespace moebench {

// StepSample <-> a flat vector of doubles, for gathering over MPI.
constexpr std::size_t kSampleDoubles = 1 + 6 * kPhaseCount;
std::vector<double> flatten(const StepSample& s);
StepSample unflatten(const double* values);

struct RankSamples {
  int rank = 0;
  std::string host;
  int node = 0;
  int local_rank = 0;
  int stage = 0;
  std::vector<StepSample> steps;  // the timed steps, in order
};

// Each step's time is the slowest rank's; a phase's time (and busy time) per step is the slowest
// rank's in that phase. FLOPs and bytes are per rank per step, averaged over ranks and steps.
// flops_per_step_per_gpu: the instantiated stack's Megatron FLOPs per rank per step.
RunResults summarize_run(const std::vector<RankSamples>& ranks, double tokens_per_rank,
                         double flops_per_step_per_gpu);

// What rank 0 alone can report when the run failed after some timed steps (a peer timed out or
// died, so nothing more can be gathered): its own phases and per-rank entry, with each step's time
// the slowest rank's as the ranks agreed on it after the step (the step log's figures).
RunResults summarize_own(const RankSamples& own, const std::vector<double>& slowest_step_times_s,
                         double tokens_per_rank, double flops_per_step_per_gpu);

// The pipeline bubble as (P - 1) / (V m) counts it: each rank's pp_bubble time over the rest of
// its step (its own passes and reductions), the mean over ranks; none without per-rank times.
std::optional<double> measured_bubble(const RunResults& r);

}  // namespace moebench
