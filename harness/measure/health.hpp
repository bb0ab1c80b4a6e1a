// Which ranks hold the run back: pure functions of the per-rank results, so they are tested on
// recorded figures without MPI.
//
// A rank is a suspect when its compute time per step (the compute phases' sum), for its own
// work, is slower than the median rank's by more than both thresholds: a relative slowdown (so
// that a GPU 1% slower is not flagged, however steady the others are) and a robust spread (k
// robust standard deviations, 1.4826 x MAD, of the larger of the ranks' spread around their
// median and a typical rank's own spread over its steps, so that a noisy machine's spread is not
// flagged either). For a suspect, every compute phase in which it passes the same thresholds is
// listed too: where its time went. The sum decides, not one phase: one phase of one rank slower
// while its total is in line is scheduling noise or uneven work (on 2 oversubscribed cores a
// clean run showed a rank's dense MLP 4.9x the median, run after run of its steps, with its
// compute total 1.24x), while a slow GPU is slow throughout.
//
// Ranks are compared with the others of their pipeline stage (they run the same layers); where
// every one of them counted FLOPs, each rank's time is judged against the median time per FLOP
// applied to its own FLOPs (routing can give experts unequal work).
#pragma once

#include <string>
#include <vector>

#include "harness/measure/results.hpp"

namespace moebench {

struct HealthThresholds {
  double mad_k = 6.0;          // --health-mad: robust standard deviations above the median
  double min_slowdown = 0.10;  // --health-min-slowdown: and at least this much slower (0.1: 10%)
};

// The default minimum slowdown: 10% on a GPU, and 50% where ranks compute on the host, which
// oversubscribed ranks share (on 2 cores, 4 ranks to a core: clean runs' compute totals spread up
// to 1.24x the median).
constexpr double kDeviceMinSlowdown = 0.10;
constexpr double kHostMinSlowdown = 0.50;

// The rule of every verdict here and of the link test's (harness/measure/links.hpp): a time v
// (larger is worse) is past both thresholds against its group's median and robust SD.
bool beyond_thresholds(double v, double median, double sigma, const HealthThresholds& t);

// The fewest ranks of one stage that are compared: with two, neither is the odd one out.
constexpr int kMinRanksCompared = 3;

// The metric of the compute phases' sum.
constexpr const char* kComputeMetric = "compute";

struct Suspect {
  int rank = 0;
  std::string metric;   // "compute", or a compute phase's name
  double value = 0;     // the rank's time per step (seconds, median over timed steps)
  double median = 0;    // what the median rank takes for this rank's work (seconds)
  double slowdown = 0;  // value / median
  std::string reason;   // one line for people
};

// The suspects of one node, so that a bad node shows as one entry.
struct NodeSuspects {
  int node = 0;
  std::string host;
  std::vector<int> ranks;  // ascending, each once
};

struct HealthResult {
  HealthThresholds thresholds;
  int ranks_compared = 0;  // ranks in stages with at least kMinRanksCompared ranks
  std::string note;        // why nothing could be compared, when so
  // Per suspect rank, ascending: its "compute" entry, then its slow phases in phase order.
  std::vector<Suspect> suspects;
  std::vector<NodeSuspects> nodes;
  int suspect_ranks() const;
};

// The ranks' results (RunResults::per_rank) judged as above.
HealthResult find_stragglers(const std::vector<RankResult>& ranks, const HealthThresholds& t);

// Adds suspects found otherwise (GPU telemetry: throttling, ECC or NVLink errors), keeping the
// order by rank and the nodes' entries up to date.
void add_suspects(HealthResult& h, const std::vector<Suspect>& more,
                  const std::vector<RankResult>& ranks);

}  // namespace moebench
