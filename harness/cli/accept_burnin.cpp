#include "harness/cli/accept_burnin.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/core/human.hpp"

namespace moebench {

BurninTelemetry::BurninTelemetry(const NvmlGpuId& id) {
  gpu_ = NvmlGpu::open(id, note_);
  if (gpu_) sampler_.emplace(*gpu_, kBurninTelemetryIntervalS);
}

void BurninTelemetry::start() {
  if (!gpu_) return;
  first_ = gpu_->read(0);
  last_ = first_;
  sampler_->start();
}

void BurninTelemetry::end_round() {
  if (!gpu_) return;
  std::vector<GpuSample> samples = sampler_->take();
  if (!samples.empty()) elapsed_s_ = samples.back().t_s;
  last_ = gpu_->read(elapsed_s_);
  samples.push_back(last_);
  rounds_.push_back(summarize_round(samples));
}

void BurninTelemetry::stop() {
  if (!gpu_) return;
  sampler_->stop();
  last_ = gpu_->read(elapsed_s_);
}

GpuTelemetrySummary BurninTelemetry::counters(int rank) const {
  GpuTelemetry t;
  t.rank = rank;
  t.start = first_;
  t.end = last_;
  return summarize_telemetry(t);
}

namespace {

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

double put(const std::optional<double>& v) {
  return v ? *v : kUnknown;
}
std::optional<double> get(double v) {
  return std::isnan(v) ? std::nullopt : std::optional<double>(v);
}

}  // namespace

void append_round(std::vector<double>& out, const RoundTelemetry& r) {
  out.insert(out.end(), {static_cast<double>(r.samples), put(r.sm_clock_mhz), put(r.temperature_c),
                         put(r.power_w), r.slowdown_share, r.power_cap_share});
}

RoundTelemetry round_from(const double* p) {
  RoundTelemetry r;
  r.samples = static_cast<int>(p[0]);
  r.sm_clock_mhz = get(p[1]);
  r.temperature_c = get(p[2]);
  r.power_w = get(p[3]);
  r.slowdown_share = p[4];
  r.power_cap_share = p[5];
  return r;
}

BurninTelemetryAll gather_burnin_telemetry(const MpiRuntime& rt, const BurninTelemetry& t) {
  BurninTelemetryAll all;
  if (!rt.all_true(t.available())) {
    const std::vector<std::string> notes = rt.gather_strings_to_root(t.note());
    for (std::size_t r = 0; r < notes.size(); ++r) {
      if (notes[r].empty()) continue;
      all.note = "rank " + std::to_string(r) + ": " + notes[r];
      break;
    }
    return all;
  }
  std::vector<double> mine;
  for (const RoundTelemetry& r : t.rounds()) append_round(mine, r);
  const std::vector<double> rounds = rt.gather_to_root(mine);
  const std::vector<double> counters = rt.gather_to_root(flatten(t.counters(rt.rank())));
  if (rt.rank() != 0) return all;
  all.available = true;
  const std::size_t per_rank = t.rounds().size() * kRoundDoubles;
  for (int r = 0; r < rt.size(); ++r) {
    const std::size_t at = static_cast<std::size_t>(r) * per_rank;
    std::vector<RoundTelemetry> series;
    for (std::size_t k = 0; k < t.rounds().size(); ++k) {
      series.push_back(round_from(rounds.data() + at + k * kRoundDoubles));
    }
    all.rounds.push_back(std::move(series));
    all.counters.push_back(
        unflatten_telemetry(counters.data() + static_cast<std::size_t>(r) * kTelemetryDoubles));
  }
  return all;
}

std::vector<AcceptCheck> judge_burnin_telemetry(
    const std::vector<AcceptRank>& ranks, const std::vector<std::vector<RoundTelemetry>>& rounds,
    const std::vector<GpuTelemetrySummary>& counters, double max_share) {
  std::vector<AcceptCheck> out;
  for (std::size_t i = 0; i < ranks.size() && i < rounds.size(); ++i) {
    int samples = 0;
    double slowed = 0, capped = 0;
    std::optional<double> clock_lo, clock_hi, hottest, power;
    for (const RoundTelemetry& r : rounds[i]) {
      samples += r.samples;
      slowed += r.slowdown_share * r.samples;
      capped += r.power_cap_share * r.samples;
      if (r.sm_clock_mhz) {
        clock_lo = std::min(clock_lo.value_or(*r.sm_clock_mhz), *r.sm_clock_mhz);
        clock_hi = std::max(clock_hi.value_or(*r.sm_clock_mhz), *r.sm_clock_mhz);
      }
      if (r.temperature_c) hottest = std::max(hottest.value_or(*r.temperature_c), *r.temperature_c);
      if (r.power_w) power = std::max(power.value_or(*r.power_w), *r.power_w);
    }
    const double slow_share = samples > 0 ? slowed / samples : 0;
    const double cap_share = samples > 0 ? capped / samples : 0;
    AcceptCheck c = rank_check("burnin_telemetry", "burnin", ranks[i]);
    c.measured = slow_share;
    c.expected = max_share;
    c.unit = "fraction";
    c.source = strprintf("NVML's clocks-event reasons; a slowdown in at most %.0f%% of the samples",
                         100 * max_share);
    std::vector<std::string> findings;
    if (slow_share > max_share) {
      findings.push_back(
          strprintf("slowed down (heat, hardware slowdown or power brake) in %.0f%% of %d samples",
                    100 * slow_share, samples));
    }
    if (i < counters.size()) {
      for (const TelemetryFlag& f : telemetry_flags(counters[i])) {
        // A corrected ECC error is corrected: stated by NVML's inventory, never a drain.
        if (f.metric != "ecc_corrected") findings.push_back(f.reason);
      }
    }
    std::string seen = strprintf("%d samples over %zu rounds", samples, rounds[i].size());
    if (clock_lo) {
      seen += *clock_lo == *clock_hi
                  ? strprintf("; SM clock %.0f MHz", *clock_lo)
                  : strprintf("; SM clock %.0f-%.0f MHz (round means)", *clock_lo, *clock_hi);
    }
    if (hottest) seen += strprintf(", up to %.0f C", *hottest);
    if (power) seen += strprintf(", up to %.0f W (a round's mean)", *power);
    seen += strprintf("; power-capped in %.0f%%", 100 * cap_share);
    c.status = findings.empty() ? "pass" : "fail";
    c.reason = rank_text(ranks[i]) + ": ";
    if (findings.empty()) {
      c.reason += "no slowdown, no new error; " + seen;
    } else {
      for (std::size_t k = 0; k < findings.size(); ++k) c.reason += (k ? "; " : "") + findings[k];
      c.reason += " (" + seen + ")";
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace moebench
