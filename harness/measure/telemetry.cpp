#include "harness/measure/telemetry.hpp"

#include <algorithm>
#include <cstdio>

namespace moebench {

namespace {

// The range of one field over the samples that have it; none when none has.
template <typename Get>
std::optional<Range<double>> range_of(const std::vector<GpuSample>& samples, Get get) {
  std::optional<Range<double>> r;
  int n = 0;
  for (const GpuSample& s : samples) {
    const std::optional<double> v = get(s);
    if (!v) continue;
    if (!r) r = Range<double>{*v, *v, 0};
    r->min = std::min(r->min, *v);
    r->max = std::max(r->max, *v);
    r->mean += *v;
    ++n;
  }
  if (r) r->mean /= n;
  return r;
}

// end - start of a counter both readings have (0 otherwise; a counter that went down, as after a
// driver reload, counts nothing).
std::uint64_t growth(const std::optional<std::uint64_t>& a, const std::optional<std::uint64_t>& b) {
  return a && b && *b > *a ? *b - *a : 0;
}

std::string share_text(double share) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100 * share);
  return buf;
}

}  // namespace

GpuTelemetrySummary summarize_telemetry(const GpuTelemetry& t) {
  GpuTelemetrySummary s;
  s.rank = t.rank;
  s.samples = static_cast<int>(t.during.size());
  s.sm_clock_mhz = range_of(t.during, [](const GpuSample& x) { return x.sm_clock_mhz; });
  s.memory_clock_mhz = range_of(t.during, [](const GpuSample& x) { return x.memory_clock_mhz; });
  s.power_w = range_of(t.during, [](const GpuSample& x) { return x.power_w; });
  s.temperature_c = range_of(t.during, [](const GpuSample& x) { return x.temperature_c; });
  s.power_limit_w = t.end.power_limit_w ? t.end.power_limit_w : t.start.power_limit_w;
  int with_reasons = 0, thermal = 0, power = 0;
  for (const GpuSample& x : t.during) {
    if (!x.clock_event_reasons) continue;
    ++with_reasons;
    if (*x.clock_event_reasons & kThermalReasons) ++thermal;
    if (*x.clock_event_reasons & kPowerReasons) ++power;
  }
  if (with_reasons > 0) {
    s.thermal_throttled_share = static_cast<double>(thermal) / with_reasons;
    s.power_throttled_share = static_cast<double>(power) / with_reasons;
  }
  s.new_ecc_corrected = growth(t.start.ecc_corrected, t.end.ecc_corrected);
  s.new_ecc_uncorrected = growth(t.start.ecc_uncorrected, t.end.ecc_uncorrected);
  s.remapped_rows_pending = t.end.remapped_rows_pending.value_or(0) > 0;
  s.nvlinks_inactive = t.end.nvlinks_inactive.value_or(0);
  s.new_nvlink_errors = growth(t.start.nvlink_errors, t.end.nvlink_errors);
  s.new_pcie_replays = growth(t.start.pcie_replays, t.end.pcie_replays);
  return s;
}

RoundTelemetry summarize_round(const std::vector<GpuSample>& samples) {
  RoundTelemetry r;
  r.samples = static_cast<int>(samples.size());
  if (const auto x = range_of(samples, [](const GpuSample& g) { return g.sm_clock_mhz; })) {
    r.sm_clock_mhz = x->mean;
  }
  if (const auto x = range_of(samples, [](const GpuSample& g) { return g.temperature_c; })) {
    r.temperature_c = x->max;
  }
  if (const auto x = range_of(samples, [](const GpuSample& g) { return g.power_w; })) {
    r.power_w = x->mean;
  }
  int with_reasons = 0, slowdown = 0, cap = 0;
  for (const GpuSample& g : samples) {
    if (!g.clock_event_reasons) continue;
    ++with_reasons;
    slowdown += (*g.clock_event_reasons & kSlowdownReasons) != 0;
    cap += (*g.clock_event_reasons & kClockEventSwPowerCap) != 0;
  }
  r.reason_samples = with_reasons;
  if (with_reasons > 0) {
    r.slowdown_share = static_cast<double>(slowdown) / with_reasons;
    r.power_cap_share = static_cast<double>(cap) / with_reasons;
  }
  return r;
}

std::vector<double> flatten(const GpuTelemetrySummary& s) {
  std::vector<double> v = {static_cast<double>(s.rank), static_cast<double>(s.samples)};
  for (const auto* r : {&s.sm_clock_mhz, &s.memory_clock_mhz, &s.power_w, &s.temperature_c}) {
    v.push_back(r->has_value() ? 1 : 0);
    v.push_back(r->has_value() ? (*r)->min : 0);
    v.push_back(r->has_value() ? (*r)->max : 0);
    v.push_back(r->has_value() ? (*r)->mean : 0);
  }
  v.push_back(s.power_limit_w.value_or(-1));
  v.push_back(s.thermal_throttled_share);
  v.push_back(s.power_throttled_share);
  v.push_back(static_cast<double>(s.new_ecc_corrected));
  v.push_back(static_cast<double>(s.new_ecc_uncorrected));
  v.push_back(s.remapped_rows_pending ? 1 : 0);
  v.push_back(static_cast<double>(s.nvlinks_inactive));
  v.push_back(static_cast<double>(s.new_nvlink_errors));
  v.push_back(static_cast<double>(s.new_pcie_replays));
  return v;
}

GpuTelemetrySummary unflatten_telemetry(const double* p) {
  GpuTelemetrySummary s;
  s.rank = static_cast<int>(*p++);
  s.samples = static_cast<int>(*p++);
  for (auto* r : {&s.sm_clock_mhz, &s.memory_clock_mhz, &s.power_w, &s.temperature_c}) {
    const bool has = *p++ != 0;
    const double lo = *p++, hi = *p++, mean = *p++;
    if (has) *r = Range<double>{lo, hi, mean};
  }
  const double limit = *p++;
  if (limit >= 0) s.power_limit_w = limit;
  s.thermal_throttled_share = *p++;
  s.power_throttled_share = *p++;
  s.new_ecc_corrected = static_cast<std::uint64_t>(*p++);
  s.new_ecc_uncorrected = static_cast<std::uint64_t>(*p++);
  s.remapped_rows_pending = *p++ != 0;
  s.nvlinks_inactive = static_cast<int>(*p++);
  s.new_nvlink_errors = static_cast<std::uint64_t>(*p++);
  s.new_pcie_replays = static_cast<std::uint64_t>(*p++);
  return s;
}

std::vector<TelemetryFlag> telemetry_flags(const GpuTelemetrySummary& s,
                                           double max_throttled_share) {
  std::vector<TelemetryFlag> out;
  const auto count = [&](const char* metric, std::uint64_t n, const std::string& what) {
    if (n > 0) {
      out.push_back({metric, static_cast<double>(n), std::to_string(n) + " " + what});
    }
  };
  if (s.thermal_throttled_share > max_throttled_share) {
    out.push_back({"thermal_throttling", s.thermal_throttled_share,
                   "thermal slowdown in " + share_text(s.thermal_throttled_share) + " of " +
                       std::to_string(s.samples) + " samples during the timed steps"});
  }
  if (s.power_throttled_share > max_throttled_share) {
    out.push_back({"power_throttling", s.power_throttled_share,
                   "power capping or slowdown in " + share_text(s.power_throttled_share) + " of " +
                       std::to_string(s.samples) + " samples during the timed steps"});
  }
  count("ecc_uncorrected", s.new_ecc_uncorrected, "new uncorrected ECC errors during the run");
  count("ecc_corrected", s.new_ecc_corrected, "new corrected ECC errors during the run");
  if (s.remapped_rows_pending) {
    out.push_back({"remapped_rows_pending", 1, "a memory row remapping awaits a GPU reset"});
  }
  count("nvlinks_inactive", static_cast<std::uint64_t>(s.nvlinks_inactive),
        "NVLink(s) down at the end of the run");
  count("nvlink_errors", s.new_nvlink_errors, "new NVLink replay, recovery or CRC errors");
  count("pcie_replays", s.new_pcie_replays, "new PCIe replays");
  return out;
}

}  // namespace moebench
