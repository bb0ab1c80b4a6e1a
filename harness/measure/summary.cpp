#include "harness/measure/summary.hpp"

#include <algorithm>

#include "harness/core/error.hpp"

namespace moebench {

std::vector<double> flatten(const StepSample& s) {
  std::vector<double> v;
  v.reserve(kSampleDoubles);
  v.push_back(s.step_time_s);
  for (const auto* a : {&s.time_s, &s.flops, &s.bytes, &s.bus_bytes, &s.busy_s}) {
    v.insert(v.end(), a->begin(), a->end());
  }
  for (int g : s.group_size) v.push_back(g);
  return v;
}

StepSample unflatten(const double* values) {
  StepSample s;
  s.step_time_s = *values++;
  for (auto* a : {&s.time_s, &s.flops, &s.bytes, &s.bus_bytes, &s.busy_s}) {
    for (double& x : *a) x = *values++;
  }
  for (int& g : s.group_size) g = static_cast<int>(*values++);
  return s;
}

namespace {

// The statistics of out.step_times_s and the rates that follow from their median.
void set_step_rates(RunResults& out, double tokens_per_rank, double flops_per_step_per_gpu) {
  out.step_time_s = summarize(out.step_times_s);
  const double step = out.step_time_s.median;
  if (step > 0) {
    out.tflops_per_gpu = flops_per_step_per_gpu / step / 1e12;
    out.tokens_per_s_per_gpu = tokens_per_rank / step;
  }
}

StepBreakdown step_breakdown(const std::vector<RankSamples>& ranks,
                             const std::vector<RankResult>& per_rank) {
  StepBreakdown b;
  std::size_t slowest = 0;
  for (std::size_t i = 0; i < per_rank.size(); ++i) {
    if (per_rank[i].step_time_s > per_rank[slowest].step_time_s) slowest = i;
  }
  if (ranks.empty() || ranks[slowest].steps.empty()) return b;
  const RankSamples& rs = ranks[slowest];
  std::vector<std::size_t> order(rs.steps.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return rs.steps[x].step_time_s < rs.steps[y].step_time_s;
  });
  const std::size_t step = order[order.size() / 2];
  const StepSample& s = rs.steps[step];
  b.rank = rs.rank;
  b.host = rs.host;
  b.stage = rs.stage;
  b.step = static_cast<int>(step);
  b.step_time_s = s.step_time_s;
  b.other_s = s.step_time_s;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    b.phase_time_s[p] = s.time_s[p];
    b.other_s -= s.time_s[p];
  }
  return b;
}

}  // namespace

RunResults summarize_run(const std::vector<RankSamples>& ranks, double tokens_per_rank,
                         double flops_per_step_per_gpu) {
  MB_CHECK(!ranks.empty(), "no ranks to summarise");
  const std::size_t steps = ranks.front().steps.size();
  for (const RankSamples& r : ranks) {
    MB_CHECK(r.steps.size() == steps, "rank " << r.rank << " has " << r.steps.size()
                                              << " timed steps, rank 0 has " << steps);
  }
  RunResults out;
  PerPhase<std::vector<double>> phase_max, busy_max;
  for (std::size_t i = 0; i < steps; ++i) {
    double slowest = 0;
    PerPhase<double> slowest_phase{}, slowest_busy{};
    for (const RankSamples& r : ranks) {
      slowest = std::max(slowest, r.steps[i].step_time_s);
      for (std::size_t p = 0; p < kPhaseCount; ++p) {
        slowest_phase[p] = std::max(slowest_phase[p], r.steps[i].time_s[p]);
        slowest_busy[p] = std::max(slowest_busy[p], r.steps[i].busy_s[p]);
      }
    }
    out.step_times_s.push_back(slowest);
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      phase_max[p].push_back(slowest_phase[p]);
      busy_max[p].push_back(slowest_busy[p]);
    }
  }
  set_step_rates(out, tokens_per_rank, flops_per_step_per_gpu);

  const double samples = static_cast<double>(ranks.size() * std::max<std::size_t>(steps, 1));
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    PhaseResult r;
    r.phase = static_cast<Phase>(p);
    r.time_s = summarize(phase_max[p]);
    if (is_communication(r.phase)) r.busy_s = summarize(busy_max[p]);
    double bus = 0;
    for (const RankSamples& rs : ranks) {
      for (const StepSample& s : rs.steps) {
        r.flops += s.flops[p] / samples;
        r.bytes += s.bytes[p] / samples;
        bus += s.bus_bytes[p] / samples;
        r.group_size = std::max(r.group_size, s.group_size[p]);
      }
    }
    const double t = r.time_s.median;
    // Bandwidths from the collectives' own duration: with overlap, the phase's time is only the
    // part the compute stream waited for.
    // A group of one rank moves nothing: no bandwidth (nccl-tests would divide its size by
    // the time of a copy).
    const double busy = r.busy_s.median;
    if (is_communication(r.phase) && busy > 0 && r.group_size > 1) {
      r.algbw = r.bytes / busy;
      r.busbw = bus / busy;
    } else if (is_compute(r.phase) && t > 0) {
      r.flop_rate = r.flops / t;
    }
    if (is_communication(r.phase)) {
      out.communication_time_s += t;
      out.overlap.busy_s += busy;
    }
    if (is_compute(r.phase)) out.compute_time_s += t;
    out.phases.push_back(r);
  }
  out.exposed_communication_s = std::max(0.0, out.step_time_s.median - out.compute_time_s);
  out.overlap.exposed_s = out.communication_time_s;
  out.overlap.hidden_s = std::max(0.0, out.overlap.busy_s - out.overlap.exposed_s);
  if (out.overlap.busy_s > 0) out.overlap.fraction = out.overlap.hidden_s / out.overlap.busy_s;

  for (const RankSamples& rs : ranks) {
    RankResult r;
    r.rank = rs.rank;
    r.host = rs.host;
    r.node = rs.node;
    r.local_rank = rs.local_rank;
    r.stage = rs.stage;
    std::vector<double> times, compute;
    PerPhase<std::vector<double>> phases;
    for (const StepSample& s : rs.steps) {
      times.push_back(s.step_time_s);
      double busy = 0;
      for (std::size_t p = 0; p < kPhaseCount; ++p) {
        if (!is_compute(static_cast<Phase>(p))) continue;
        busy += s.time_s[p];
        r.compute_flops += s.flops[p] / static_cast<double>(rs.steps.size());
      }
      compute.push_back(busy);
      for (std::size_t p = 0; p < kPhaseCount; ++p) {
        phases[p].push_back(s.time_s[p]);
        r.phase_flops[p] += s.flops[p] / static_cast<double>(rs.steps.size());
      }
    }
    r.step_time_s = median(times);
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      r.phase_time_s[p] = median(phases[p]);
      r.phase_spread_s[p] = kMadToSigma * median_absolute_deviation(phases[p]);
    }
    r.compute_time_s = median(compute);
    r.compute_spread_s = kMadToSigma * median_absolute_deviation(compute);
    out.per_rank.push_back(r);
  }
  out.breakdown = step_breakdown(ranks, out.per_rank);
  return out;
}

RunResults summarize_own(const RankSamples& own, const std::vector<double>& slowest_step_times_s,
                         double tokens_per_rank, double flops_per_step_per_gpu) {
  MB_CHECK(own.steps.size() == slowest_step_times_s.size(),
           "rank " << own.rank << " has " << own.steps.size() << " timed steps, "
                   << slowest_step_times_s.size() << " agreed step times");
  RunResults out = summarize_run({own}, tokens_per_rank, flops_per_step_per_gpu);
  out.step_times_s = slowest_step_times_s;
  set_step_rates(out, tokens_per_rank, flops_per_step_per_gpu);
  out.exposed_communication_s = std::max(0.0, out.step_time_s.median - out.compute_time_s);
  return out;
}

std::optional<double> measured_bubble(const RunResults& r) {
  double sum = 0;
  int n = 0;
  for (const RankResult& rr : r.per_rank) {
    const double bubble = rr.phase_time_s[static_cast<std::size_t>(Phase::pp_bubble)];
    const double rest = rr.step_time_s - bubble;
    if (rest > 0) {
      sum += bubble / rest;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

}  // namespace moebench
