// The telemetry summary and its flags on recorded samples: an H200-like GPU over 20 samples of
// a timed window (clocks, power, temperature as NVML reports them), clean, then with thermal
// slowdown, new ECC and NVLink errors, a link down; the MPI round trip of a summary; and a burn-in
// round's summary (a power cap told from a slowdown).
#include "harness/measure/telemetry.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

GpuSample reading(double t, double sm, double watts, double celsius, std::uint64_t reasons) {
  GpuSample s;
  s.t_s = t;
  s.sm_clock_mhz = sm;
  s.memory_clock_mhz = 3201;
  s.power_w = watts;
  s.power_limit_w = 700;
  s.temperature_c = celsius;
  s.clock_event_reasons = reasons;
  s.ecc_corrected = 12;
  s.ecc_uncorrected = 0;
  s.remapped_rows_pending = 0;
  s.nvlinks_active = 18;
  s.nvlinks_inactive = 0;
  s.nvlink_errors = 5;
  s.pcie_replays = 0;
  return s;
}

// 20 readings at 10 Hz of a GPU at full clock, 650-690 W, 61-70 C; `slow` of them thermally
// slowed (SW thermal slowdown, with the clock down to 1500 MHz).
GpuTelemetry window(int slow) {
  GpuTelemetry t;
  t.rank = 3;
  t.start = reading(0, 1980, 120, 45, 0x1);  // idle before the steps: GpuIdle
  for (int i = 0; i < 20; ++i) {
    const bool hot = i >= 20 - slow;
    t.during.push_back(reading(0.1 * i, hot ? 1500 : 1980, 650 + 2 * i, 61 + 0.45 * i,
                               hot ? kClockEventSwThermal : 0));
  }
  t.end = reading(2.0, 1980, 140, 66, 0x1);
  return t;
}

TEST_CASE("telemetry: a healthy window's summary and no flags") {
  const GpuTelemetrySummary s = summarize_telemetry(window(0));
  CHECK(s.rank == 3);
  CHECK(s.samples == 20);
  REQUIRE(s.sm_clock_mhz.has_value());
  CHECK(s.sm_clock_mhz->min == 1980);
  REQUIRE(s.power_w.has_value());
  CHECK(s.power_w->min == 650);
  CHECK(s.power_w->max == 688);
  CHECK(s.power_w->mean == doctest::Approx(669));
  CHECK(s.power_limit_w == 700);
  CHECK(s.temperature_c->max == doctest::Approx(69.55));
  CHECK(s.thermal_throttled_share == 0);  // the idle reason before and after is not counted
  CHECK(s.new_ecc_corrected == 0);
  CHECK(telemetry_flags(s).empty());
}

TEST_CASE("telemetry: throttling, ECC, NVLink and PCIe faults are flagged, each with a reason") {
  GpuTelemetry t = window(4);  // 20% of the window thermally slowed
  t.end.ecc_uncorrected = 2;
  t.end.ecc_corrected = 15;
  t.end.nvlink_errors = 9;
  t.end.nvlinks_inactive = 1;
  t.end.remapped_rows_pending = 1;
  t.end.pcie_replays = 7;
  const GpuTelemetrySummary s = summarize_telemetry(t);
  CHECK(s.thermal_throttled_share == doctest::Approx(0.2));
  CHECK(s.sm_clock_mhz->min == 1500);
  std::vector<std::string> metrics;
  for (const TelemetryFlag& f : telemetry_flags(s)) metrics.push_back(f.metric);
  CHECK(metrics == std::vector<std::string>{"thermal_throttling", "ecc_uncorrected",
                                            "ecc_corrected", "remapped_rows_pending",
                                            "nvlinks_inactive", "nvlink_errors", "pcie_replays"});
  const std::vector<TelemetryFlag> f = telemetry_flags(s);
  CHECK(f[0].reason == "thermal slowdown in 20% of 20 samples during the timed steps");
  CHECK(f[1].reason == "2 new uncorrected ECC errors during the run");
  CHECK(f[5].value == 4);
  // One slowed sample of 20 (5%) is within the default allowance; a stricter one flags it.
  const GpuTelemetrySummary one = summarize_telemetry(window(1));
  CHECK(telemetry_flags(one).empty());
  CHECK(telemetry_flags(one, 0.01).size() == 1);
  // Power capping counts as power throttling.
  GpuTelemetry p = window(0);
  for (GpuSample& x : p.during) x.clock_event_reasons = kClockEventSwPowerCap;
  CHECK(telemetry_flags(summarize_telemetry(p)).at(0).metric == "power_throttling");
}

TEST_CASE("telemetry: counters that go down or are missing count nothing; no samples, no ranges") {
  GpuTelemetry t = window(0);
  t.end.ecc_corrected = 3;  // a driver reload reset the volatile counts
  t.end.nvlink_errors.reset();
  t.during.clear();
  const GpuTelemetrySummary s = summarize_telemetry(t);
  CHECK(s.new_ecc_corrected == 0);
  CHECK(s.new_nvlink_errors == 0);
  CHECK_FALSE(s.sm_clock_mhz.has_value());
  CHECK(s.thermal_throttled_share == 0);
}

TEST_CASE("telemetry: a summary survives the trip through doubles") {
  GpuTelemetry t = window(4);
  t.end.ecc_uncorrected = 2;
  t.end.pcie_replays = 7;
  const GpuTelemetrySummary s = summarize_telemetry(t);
  const std::vector<double> v = flatten(s);
  REQUIRE(v.size() == kTelemetryDoubles);
  const GpuTelemetrySummary back = unflatten_telemetry(v.data());
  CHECK(back.rank == 3);
  CHECK(back.samples == 20);
  CHECK(back.power_w->mean == s.power_w->mean);
  CHECK(back.temperature_c->max == s.temperature_c->max);
  CHECK(back.power_limit_w == 700);
  CHECK(back.thermal_throttled_share == s.thermal_throttled_share);
  CHECK(back.new_ecc_uncorrected == 2);
  CHECK(back.new_pcie_replays == 7);
  CHECK_FALSE(unflatten_telemetry(flatten(GpuTelemetrySummary{}).data()).power_w.has_value());
}

TEST_CASE("telemetry: a burn-in round's summary tells a power cap from a slowdown") {
  // 10 readings: 4 at the software power cap (1755 MHz), 2 with the hardware power brake
  // (1200 MHz), 4 unthrottled (1980 MHz); 60 C rising 1 C a reading; 600 W then 700 W.
  std::vector<GpuSample> samples;
  for (int i = 0; i < 10; ++i) {
    const std::uint64_t reasons = i < 4   ? kClockEventSwPowerCap
                                  : i < 6 ? kClockEventHwPowerBrake
                                          : 0;
    const double sm = i < 4 ? 1755 : i < 6 ? 1200 : 1980;
    samples.push_back(reading(0.1 * i, sm, i < 5 ? 600 : 700, 60 + i, reasons));
  }
  const RoundTelemetry r = summarize_round(samples);
  CHECK(r.samples == 10);
  // Exact: means of values exactly representable in binary (sums of integers / 10).
  REQUIRE(r.sm_clock_mhz.has_value());
  CHECK(*r.sm_clock_mhz == doctest::Approx((4 * 1755 + 2 * 1200 + 4 * 1980) / 10.0));
  CHECK(r.temperature_c == 69);
  CHECK(r.power_w == doctest::Approx(650));
  CHECK(r.slowdown_share == doctest::Approx(0.2));
  CHECK(r.power_cap_share == doctest::Approx(0.4));
  // Thermal reasons are a slowdown too; a reading without reasons counts in neither share.
  samples[9].clock_event_reasons = kClockEventHwThermal;
  samples[8].clock_event_reasons.reset();
  const RoundTelemetry hot = summarize_round(samples);
  CHECK(hot.slowdown_share == doctest::Approx(3.0 / 9));
  // No readings: nothing known, no share.
  const RoundTelemetry none = summarize_round({});
  CHECK(none.samples == 0);
  CHECK(!none.sm_clock_mhz.has_value());
  CHECK(!none.temperature_c.has_value());
  CHECK(none.slowdown_share == 0);
}

}  // namespace
}  // namespace moebench
