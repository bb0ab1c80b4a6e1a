// What a run measured, summarised over its timed steps and ranks, as plain data (SI units):
// harness/measure/summary.hpp computes it from the ranks' step samples; the report and the table
// only read it.
#pragma once

#include <string>
#include <vector>

#include "harness/measure/phases.hpp"
#include "harness/measure/stats.hpp"

namespace moebench {

struct PhaseResult {
  Phase phase = Phase::attention;
  Stats time_s;      // over timed steps, of the slowest rank's time in this phase
  double flops = 0;  // per rank per step (mean over ranks)
  double bytes = 0;  // per rank per step (mean over ranks)
  // Communication phases: over timed steps, of the slowest rank's busy time, the collectives' own
  // durations (time_s is what the compute stream waited for them: the exposed part).
  Stats busy_s;
  double flop_rate = 0;  // flops / median time (compute phases)
  double algbw = 0;      // bytes / median busy time (communication phases), bytes/s
  double busbw = 0;
  int group_size = 0;
};

struct RankResult {
  int rank = 0;
  std::string host;
  int node = 0;
  int local_rank = 0;               // on its node
  int stage = 0;                    // its pipeline stage (ranks of one stage run the same layers)
  double step_time_s = 0;           // median over timed steps
  PerPhase<double> phase_time_s{};  // median over timed steps
  PerPhase<double> phase_flops{};   // mean over timed steps (routing may vary it)
  // The spread of its phase times over the timed steps: 1.4826 x their median absolute
  // deviation (a robust standard deviation), so that health checks know this machine's noise.
  PerPhase<double> phase_spread_s{};
  double compute_time_s = 0;    // median over timed steps of the compute phases' sum
  double compute_spread_s = 0;  // that sum's robust spread over the timed steps
  double compute_flops = 0;     // the compute phases' FLOPs, mean over timed steps
};

// One step of the rank that sets the step time, phase by phase, so that its parts add up: the
// rank whose median step is the longest, in its own median step (the upper one of an even
// count). The cross-rank figures (PhaseResult::time_s) take each phase's slowest rank, which
// differ from phase to phase, so they add up to more than a step.
struct StepBreakdown {
  int rank = -1;  // none without timed steps
  std::string host;
  int stage = 0;
  int step = 0;            // which timed step, from 0
  double step_time_s = 0;  // that step's time on that rank
  PerPhase<double> phase_time_s{};
  double other_s = 0;  // step_time_s minus the phases: host work no phase times
};

struct RunResults {
  Stats step_time_s;  // each step's time is the slowest rank's
  std::vector<double> step_times_s;
  double tflops_per_gpu = 0;           // instantiated Megatron FLOPs per GPU / median step / 1e12
  double tokens_per_s_per_gpu = 0;     // tokens per rank / median step time
  double compute_time_s = 0;           // sum of compute phases' medians
  double communication_time_s = 0;     // sum of communication phases' medians
  double exposed_communication_s = 0;  // median step time minus compute time, >= 0 (includes
                                       // comm_wait: time the GPU does no compute)
  // Communication against compute (--overlap), from the communication phases' medians.
  struct Overlap {
    double busy_s = 0;     // sum of busy medians: the collectives' own durations
    double exposed_s = 0;  // sum of time medians: what the compute stream waited for them
    double hidden_s = 0;   // max(0, busy - exposed): communication hidden behind compute
    double fraction = 0;   // hidden / busy (0 without communication)
  } overlap;
  // Gradient buckets per step and group (TrainingStep::grad_buckets()), set by the run.
  int grad_buckets_dense = 0;
  int grad_buckets_expert = 0;
  std::vector<PhaseResult> phases;
  std::vector<RankResult> per_rank;
  StepBreakdown breakdown;
};

}  // namespace moebench
