#include "harness/measure/health.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "harness/measure/stats.hpp"

namespace moebench {

namespace {

std::string format_ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g ms", s * 1e3);
  return buf;
}

// One metric of one rank: its time, FLOPs and own spread over its steps.
struct Figure {
  double time_s = 0;
  double flops = 0;
  double spread_s = 0;
};

// The suspects among `members` (indices into ranks, one stage) in the metric `of` gives, each
// added to `out`; `only` restricts the verdicts to those ranks when not empty.
void judge(const std::vector<RankResult>& ranks, const std::vector<std::size_t>& members,
           const std::string& metric, const std::function<Figure(const RankResult&)>& of,
           const HealthThresholds& t, const std::vector<int>& only, std::vector<Suspect>& out) {
  std::vector<std::size_t> active;
  for (std::size_t i : members) {
    if (of(ranks[i]).time_s > 0) active.push_back(i);
  }
  if (static_cast<int>(active.size()) < kMinRanksCompared) return;
  const bool per_flop = std::all_of(active.begin(), active.end(),
                                    [&](std::size_t i) { return of(ranks[i]).flops > 0; });
  std::vector<double> x, own;
  for (std::size_t i : active) {
    const Figure f = of(ranks[i]);
    const double work = per_flop ? f.flops : 1.0;
    x.push_back(f.time_s / work);
    own.push_back(f.spread_s / work);
  }
  const double med = median(x);
  const double sigma = std::max(kMadToSigma * median_absolute_deviation(x), median(own));
  for (std::size_t j = 0; j < active.size(); ++j) {
    const RankResult& r = ranks[active[j]];
    if (!only.empty() && std::find(only.begin(), only.end(), r.rank) == only.end()) continue;
    const double v = x[j];
    if (!beyond_thresholds(v, med, sigma, t)) continue;
    const Figure f = of(r);
    Suspect s;
    s.rank = r.rank;
    s.metric = metric;
    s.value = f.time_s;
    s.median = med * (per_flop ? f.flops : 1.0);
    s.slowdown = s.median > 0 ? s.value / s.median : 0;
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.2fx", s.slowdown);
    s.reason = metric + " took " + format_ms(s.value) + " per step, " + ratio +
               " the median of the " + std::to_string(active.size()) + " ranks of stage " +
               std::to_string(r.stage) + " (" + format_ms(s.median) +
               (per_flop ? " for its FLOPs" : "") + ")";
    out.push_back(std::move(s));
  }
}

}  // namespace

bool beyond_thresholds(double v, double median, double sigma, const HealthThresholds& t) {
  return v > median * (1.0 + t.min_slowdown) && v - median > t.mad_k * sigma;
}

int HealthResult::suspect_ranks() const {
  int n = 0;
  for (const NodeSuspects& node : nodes) n += static_cast<int>(node.ranks.size());
  return n;
}

HealthResult find_stragglers(const std::vector<RankResult>& ranks, const HealthThresholds& t) {
  HealthResult h;
  h.thresholds = t;
  std::map<int, std::vector<std::size_t>> stages;
  for (std::size_t i = 0; i < ranks.size(); ++i) stages[ranks[i].stage].push_back(i);
  std::vector<Suspect> found;
  for (const auto& [stage, members] : stages) {
    if (static_cast<int>(members.size()) < kMinRanksCompared) continue;
    h.ranks_compared += static_cast<int>(members.size());
    std::vector<Suspect> slow;
    judge(
        ranks, members, kComputeMetric,
        [](const RankResult& r) {
          return Figure{r.compute_time_s, r.compute_flops, r.compute_spread_s};
        },
        t, {}, slow);
    if (slow.empty()) continue;
    std::vector<int> slow_ranks;
    for (const Suspect& s : slow) slow_ranks.push_back(s.rank);
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      if (!is_compute(static_cast<Phase>(p))) continue;
      judge(
          ranks, members, std::string(kPhaseNames[p]),
          [p](const RankResult& r) {
            return Figure{r.phase_time_s[p], r.phase_flops[p], r.phase_spread_s[p]};
          },
          t, slow_ranks, slow);
    }
    found.insert(found.end(), slow.begin(), slow.end());
  }
  if (h.ranks_compared == 0) {
    h.note = "no pipeline stage has " + std::to_string(kMinRanksCompared) +
             " or more ranks: nothing to compare";
  }
  add_suspects(h, found, ranks);
  return h;
}

void add_suspects(HealthResult& h, const std::vector<Suspect>& more,
                  const std::vector<RankResult>& ranks) {
  // By rank; within a rank in the order found ("compute" first, then the phases in table order).
  h.suspects.insert(h.suspects.end(), more.begin(), more.end());
  std::stable_sort(h.suspects.begin(), h.suspects.end(),
                   [](const Suspect& a, const Suspect& b) { return a.rank < b.rank; });
  h.nodes.clear();
  std::map<int, NodeSuspects> nodes;
  for (const Suspect& s : h.suspects) {
    const auto r = std::find_if(ranks.begin(), ranks.end(),
                                [&](const RankResult& x) { return x.rank == s.rank; });
    if (r == ranks.end()) continue;  // a rank with no results (cannot happen in a full run)
    NodeSuspects& n = nodes[r->node];
    n.node = r->node;
    n.host = r->host;
    if (std::find(n.ranks.begin(), n.ranks.end(), s.rank) == n.ranks.end()) {
      n.ranks.push_back(s.rank);
    }
  }
  for (auto& [node, n] : nodes) h.nodes.push_back(std::move(n));
}

}  // namespace moebench
