// accept's burn-in telemetry judged on hand-made rounds: GPUs at their power cap pass (a GPU at
// its limit is no fault) with what they read stated; a slowdown past the share fails its rank
// alone, naming the share; new uncorrected ECC errors fail, as do NVLink errors or PCIe replays
// past DCGM's rates, while a count under the rate, corrected ECC errors and NVLinks down are
// stated; NVML without clocks-event reasons is `info`, the slowdown not known; a rank without
// telemetry beside ranks with it is `info` with its reason, and none at all is no check; a round
// survives the trip through doubles, unknown figures included.
#include "harness/cli/accept_burnin.hpp"

#include <doctest/doctest.h>

#include "tests/unit/accept_fixture.hpp"

namespace moebench {
namespace {

// Three rounds of 8 readings at 1755 MHz, 70 C, 690 W, power-capped in half of them; `slowed` of
// each round's readings slowed down.
std::vector<RoundTelemetry> rounds(double slowed) {
  RoundTelemetry r;
  r.samples = 8;
  r.reason_samples = 8;
  r.sm_clock_mhz = 1755;
  r.temperature_c = 70;
  r.power_w = 690;
  r.power_cap_share = 0.5;
  r.slowdown_share = slowed;
  return {r, r, r};
}

BurninTelemetryAll fleet(int n) {
  BurninTelemetryAll all;
  all.available.assign(static_cast<std::size_t>(n), 1);
  all.notes.assign(static_cast<std::size_t>(n), "");
  all.rounds.assign(static_cast<std::size_t>(n), rounds(0));
  all.counters.resize(static_cast<std::size_t>(n));
  return all;
}

constexpr double kTenMinutes = 600;

TEST_CASE("accept burnin: a power cap passes, a slowdown or a grown counter fails its rank alone") {
  BurninTelemetryAll all = fleet(4);
  std::vector<AcceptCheck> checks = judge_burnin_telemetry(accept_ranks(4), all, kTenMinutes);
  REQUIRE(checks.size() == 4);
  for (const AcceptCheck& c : checks) {
    CAPTURE(c.reason);
    CHECK(c.status == "pass");
    CHECK(c.name == "burnin_telemetry");
    CHECK(c.stage == "burnin");
    CHECK(c.reason.find("power-capped in 50%") != std::string::npos);
    CHECK(c.reason.find("SM clock 1755 MHz") != std::string::npos);
  }
  // Rank 1 slowed in a quarter of its readings (6 of 24), past the 5% a rank may have; rank 2,
  // slowed in 1 of 24 (4.2%), passes.
  all.rounds[1] = rounds(0.25);
  all.rounds[2][0].slowdown_share = 1.0 / 8;
  // Rank 3: 2 new uncorrected ECC errors; rank 0: corrected ones only, 5 PCIe replays and 9,000
  // NVLink errors in ten minutes (0.5 a minute, 15 a second: under DCGM's rates), an NVLink down,
  // and a slower last round.
  all.counters[3].new_ecc_uncorrected = 2;
  all.counters[0].new_ecc_corrected = 7;
  all.counters[0].new_pcie_replays = 5;
  all.counters[0].new_nvlink_errors = 9000;
  all.counters[0].nvlinks_inactive = 1;
  all.rounds[0][2].sm_clock_mhz = 1700;
  checks = judge_burnin_telemetry(accept_ranks(4), all, kTenMinutes);
  REQUIRE(checks.size() == 4);
  CAPTURE(checks[0].reason);
  CHECK(checks[0].status == "pass");
  CHECK(checks[0].reason.find("SM clock 1700-1755 MHz (round means)") != std::string::npos);
  CHECK(checks[0].reason.find("5 new PCIe replays (0.5 a minute)") != std::string::npos);
  CHECK(checks[0].reason.find("9000 new NVLink errors (15 a second)") != std::string::npos);
  CHECK(checks[0].reason.find("7 new corrected ECC errors; 1 NVLink(s) down") != std::string::npos);
  CHECK(checks[1].status == "fail");
  CHECK(checks[1].measured == doctest::Approx(0.25));
  CHECK(checks[1].expected == doctest::Approx(kMaxThrottledShare));
  CHECK(checks[1].reason.find("slowed down") != std::string::npos);
  CHECK(checks[1].reason.find("25% of 24 readings") != std::string::npos);
  CHECK(checks[2].status == "pass");
  CHECK(*checks[2].measured == doctest::Approx(1.0 / 24));
  CHECK(checks[3].status == "fail");
  CHECK(checks[3].reason.find("2 new uncorrected ECC errors") != std::string::npos);
  CHECK(checks[3].node == 1);
  // Past the rates: 100 PCIe replays in ten minutes (10 a minute, over 8); NVLink errors over a
  // burn-in shorter than a second counted over one second (101 past 100 a second, 100 not).
  all.counters[0].new_pcie_replays = 100;
  checks = judge_burnin_telemetry(accept_ranks(4), all, kTenMinutes);
  CHECK(checks[0].status == "fail");
  CHECK(checks[0].reason.find("100 new PCIe replays (10 a minute)") ==
        checks[0].reason.find(':') + 2);
  all.counters[0].new_pcie_replays = 0;
  all.counters[0].new_nvlink_errors = 101;
  CHECK(judge_burnin_telemetry(accept_ranks(4), all, 0.5)[0].status == "fail");
  all.counters[0].new_nvlink_errors = 100;
  CHECK(judge_burnin_telemetry(accept_ranks(4), all, 0.5)[0].status == "pass");
}

TEST_CASE("accept burnin: no reasons is not a pass; a rank without telemetry is info") {
  BurninTelemetryAll all = fleet(4);
  for (RoundTelemetry& r : all.rounds[2]) {
    r.reason_samples = 0;
    r.slowdown_share = r.power_cap_share = 0;
  }
  all.available[3] = 0;
  all.rounds[3].clear();
  all.notes[3] = "NVML does not know the GPU at 0000:19:00.0";
  const std::vector<AcceptCheck> checks = judge_burnin_telemetry(accept_ranks(4), all, kTenMinutes);
  REQUIRE(checks.size() == 4);
  CHECK(checks[2].status == "info");
  CHECK(!checks[2].measured.has_value());
  CHECK(checks[2].reason.find("a slowdown is not known") != std::string::npos);
  CHECK(checks[3].status == "info");
  CHECK(checks[3].reason.find("no GPU telemetry (NVML does not know the GPU") != std::string::npos);
  CHECK(all.note() == "rank 3: NVML does not know the GPU at 0000:19:00.0");
  // No rank with telemetry (no NVML anywhere): no check, the note says why.
  BurninTelemetryAll none = fleet(2);
  none.available.assign(2, 0);
  none.notes.assign(2, "libnvidia-ml.so.1 (NVML, part of the driver) cannot be loaded");
  CHECK(judge_burnin_telemetry(accept_ranks(2), none, kTenMinutes).empty());
  CHECK(none.note().find("rank 0: libnvidia-ml.so.1") == 0);
}

TEST_CASE("accept burnin: a round through doubles, unknown figures kept unknown") {
  RoundTelemetry r = rounds(0.125)[0];
  r.temperature_c.reset();
  r.reason_samples = 6;
  std::vector<double> flat;
  append_round(flat, r);
  append_round(flat, rounds(0)[0]);
  REQUIRE(flat.size() == 2 * kRoundDoubles);
  const RoundTelemetry back = round_from(flat.data());
  CHECK(back.samples == 8);
  CHECK(back.reason_samples == 6);
  CHECK(back.sm_clock_mhz == 1755);
  CHECK(!back.temperature_c.has_value());
  CHECK(back.power_w == 690);
  CHECK(back.slowdown_share == 0.125);
  CHECK(back.power_cap_share == 0.5);
  CHECK(round_from(flat.data() + kRoundDoubles).temperature_c == 70);
}

}  // namespace
}  // namespace moebench
