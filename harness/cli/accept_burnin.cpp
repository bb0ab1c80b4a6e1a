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
  out.insert(out.end(), {static_cast<double>(r.samples), static_cast<double>(r.reason_samples),
                         put(r.sm_clock_mhz), put(r.temperature_c), put(r.power_w),
                         r.slowdown_share, r.power_cap_share});
}

RoundTelemetry round_from(const double* p) {
  RoundTelemetry r;
  r.samples = static_cast<int>(p[0]);
  r.reason_samples = static_cast<int>(p[1]);
  r.sm_clock_mhz = get(p[2]);
  r.temperature_c = get(p[3]);
  r.power_w = get(p[4]);
  r.slowdown_share = p[5];
  r.power_cap_share = p[6];
  return r;
}

bool BurninTelemetryAll::any() const {
  return std::any_of(available.begin(), available.end(), [](char a) { return a != 0; });
}

std::string BurninTelemetryAll::note() const {
  for (std::size_t r = 0; r < available.size(); ++r) {
    if (!available[r]) return "rank " + std::to_string(r) + ": " + notes[r];
  }
  return std::string();
}

BurninTelemetryAll gather_burnin_telemetry(const MpiRuntime& rt, const BurninTelemetry& t,
                                           std::size_t rounds) {
  // Every rank sends as many rounds (unknown ones where it has no telemetry), so that one gather
  // of doubles carries them all.
  std::vector<double> mine;
  for (std::size_t k = 0; k < rounds; ++k) {
    append_round(mine, t.available() && k < t.rounds().size() ? t.rounds()[k] : RoundTelemetry{});
  }
  const std::vector<double> flags = rt.gather_to_root({t.available() ? 1.0 : 0.0});
  const std::vector<std::string> notes = rt.gather_strings_to_root(t.note());
  const std::vector<double> all_rounds = rt.gather_to_root(mine);
  const std::vector<double> counters =
      rt.gather_to_root(flatten(t.available() ? t.counters(rt.rank()) : GpuTelemetrySummary{}));
  BurninTelemetryAll all;
  if (rt.rank() != 0) return all;
  for (int r = 0; r < rt.size(); ++r) {
    const std::size_t i = static_cast<std::size_t>(r);
    all.available.push_back(flags[i] != 0 ? 1 : 0);
    all.notes.push_back(notes[i]);
    std::vector<RoundTelemetry> series;
    for (std::size_t k = 0; k < rounds && all.available.back(); ++k) {
      series.push_back(round_from(all_rounds.data() + (i * rounds + k) * kRoundDoubles));
    }
    all.rounds.push_back(std::move(series));
    GpuTelemetrySummary c = unflatten_telemetry(counters.data() + i * kTelemetryDoubles);
    c.rank = r;
    all.counters.push_back(c);
  }
  return all;
}

std::vector<AcceptCheck> judge_burnin_telemetry(const std::vector<AcceptRank>& ranks,
                                                const BurninTelemetryAll& all, double duration_s,
                                                double max_share) {
  std::vector<AcceptCheck> out;
  if (!all.any()) return out;
  const double minutes = std::max(duration_s, 1.0) / 60;
  for (std::size_t i = 0; i < ranks.size() && i < all.available.size(); ++i) {
    AcceptCheck c = rank_check("burnin_telemetry", "burnin", ranks[i]);
    if (!all.available[i]) {
      c.status = "info";
      c.reason = rank_text(ranks[i]) + ": no GPU telemetry (" + all.notes[i] + ")";
      out.push_back(c);
      continue;
    }
    int samples = 0, with_reasons = 0;
    double slowed = 0, capped = 0;
    std::optional<double> clock_lo, clock_hi, hottest, power;
    for (const RoundTelemetry& r : all.rounds[i]) {
      samples += r.samples;
      with_reasons += r.reason_samples;
      slowed += r.slowdown_share * r.reason_samples;
      capped += r.power_cap_share * r.reason_samples;
      if (r.sm_clock_mhz) {
        clock_lo = std::min(clock_lo.value_or(*r.sm_clock_mhz), *r.sm_clock_mhz);
        clock_hi = std::max(clock_hi.value_or(*r.sm_clock_mhz), *r.sm_clock_mhz);
      }
      if (r.temperature_c) hottest = std::max(hottest.value_or(*r.temperature_c), *r.temperature_c);
      if (r.power_w) power = std::max(power.value_or(*r.power_w), *r.power_w);
    }
    const double slow_share = with_reasons > 0 ? slowed / with_reasons : 0;
    const double cap_share = with_reasons > 0 ? capped / with_reasons : 0;
    if (with_reasons > 0) {
      c.measured = slow_share;
      c.expected = max_share;
      c.unit = "fraction";
    }
    c.source = strprintf(
        "NVML's clocks-event reasons (a slowdown in at most %.0f%% of the readings); its error "
        "counters against DCGM's rates (NVLink %g/s, PCIe replays %g/min)",
        100 * max_share, kMaxNvlinkErrorsPerS, kMaxPcieReplaysPerMin);
    const GpuTelemetrySummary& k = all.counters[i];
    std::vector<std::string> findings, stated;
    if (with_reasons > 0 && slow_share > max_share) {
      findings.push_back(
          strprintf("slowed down (heat, hardware slowdown or power brake) in %.0f%% of %d readings",
                    100 * slow_share, with_reasons));
    }
    if (k.new_ecc_uncorrected > 0) {
      findings.push_back(std::to_string(k.new_ecc_uncorrected) + " new uncorrected ECC errors");
    }
    if (k.remapped_rows_pending) findings.push_back("a memory row remapping awaits a GPU reset");
    // `n` over the burn-in as a rate in `unit`, of which a minute holds `per_minute`.
    const auto rate = [&](std::uint64_t n, double limit, double per_minute, const char* what,
                          const char* unit) {
      if (n == 0) return;
      const double r = static_cast<double>(n) / (minutes * per_minute);
      (r > limit ? findings : stated)
          .push_back(strprintf("%llu new %s (%.3g %s)", static_cast<unsigned long long>(n), what, r,
                               unit));
    };
    rate(k.new_nvlink_errors, kMaxNvlinkErrorsPerS, 60.0, "NVLink errors", "a second");
    rate(k.new_pcie_replays, kMaxPcieReplaysPerMin, 1.0, "PCIe replays", "a minute");
    if (k.new_ecc_corrected > 0) {
      stated.push_back(std::to_string(k.new_ecc_corrected) + " new corrected ECC errors");
    }
    if (k.nvlinks_inactive > 0) {
      stated.push_back(std::to_string(k.nvlinks_inactive) + " NVLink(s) down");
    }
    std::string seen = strprintf("%d readings over %zu rounds", samples, all.rounds[i].size());
    if (clock_lo) {
      seen += *clock_lo == *clock_hi
                  ? strprintf("; SM clock %.0f MHz", *clock_lo)
                  : strprintf("; SM clock %.0f-%.0f MHz (round means)", *clock_lo, *clock_hi);
    }
    if (hottest) seen += strprintf(", up to %.0f C", *hottest);
    if (power) seen += strprintf(", up to %.0f W (a round's mean)", *power);
    seen += with_reasons > 0 ? strprintf("; power-capped in %.0f%%", 100 * cap_share)
                             : std::string("; NVML gave no clocks-event reasons");
    for (const std::string& x : stated) seen += "; " + x;
    c.reason = rank_text(ranks[i]) + ": ";
    if (!findings.empty()) {
      c.status = "fail";
      for (std::size_t n = 0; n < findings.size(); ++n) c.reason += (n ? "; " : "") + findings[n];
      c.reason += " (" + seen + ")";
    } else if (with_reasons == 0) {
      c.status = "info";
      c.reason += "a slowdown is not known, no new error; " + seen;
    } else {
      c.status = "pass";
      c.reason += "no slowdown, no new error; " + seen;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace moebench
