// accept's burn-in telemetry judged on hand-made rounds: GPUs at their power cap pass (a GPU at
// its limit is no fault) with what they read stated; a slowdown past the share fails its rank
// alone, naming the share; a counter that grew (uncorrected ECC, NVLink errors) fails its rank,
// a corrected ECC error does not; and a round survives the trip through doubles, unknown
// figures included.
#include "harness/cli/accept_burnin.hpp"

#include <doctest/doctest.h>

#include "tests/unit/accept_fixture.hpp"

namespace moebench {
namespace {

// Three rounds of 8 samples at 1755 MHz, 70 C, 690 W, power-capped in half of them; `slowed` of
// each round's samples slowed down.
std::vector<RoundTelemetry> rounds(double slowed) {
  RoundTelemetry r;
  r.samples = 8;
  r.sm_clock_mhz = 1755;
  r.temperature_c = 70;
  r.power_w = 690;
  r.power_cap_share = 0.5;
  r.slowdown_share = slowed;
  return {r, r, r};
}

TEST_CASE("accept burnin: a power cap passes, a slowdown or a grown counter fails its rank alone") {
  std::vector<std::vector<RoundTelemetry>> series(4, rounds(0));
  std::vector<GpuTelemetrySummary> counters(4);
  std::vector<AcceptCheck> checks = judge_burnin_telemetry(accept_ranks(4), series, counters);
  REQUIRE(checks.size() == 4);
  for (const AcceptCheck& c : checks) {
    CAPTURE(c.reason);
    CHECK(c.status == "pass");
    CHECK(c.name == "burnin_telemetry");
    CHECK(c.stage == "burnin");
    CHECK(c.reason.find("power-capped in 50%") != std::string::npos);
    CHECK(c.reason.find("SM clock 1755 MHz") != std::string::npos);
  }
  // Rank 1 slowed in a quarter of its samples (6 of 24), past the 5% a rank may have; rank 2,
  // slowed in 1 of 24 (4.2%), passes.
  series[1] = rounds(0.25);
  series[2] = rounds(0);
  series[2][0].slowdown_share = 1.0 / 8;
  // Rank 3: 2 new uncorrected ECC errors; rank 0: corrected ones only, and a slower last round.
  counters[3].new_ecc_uncorrected = 2;
  counters[0].new_ecc_corrected = 7;
  series[0][2].sm_clock_mhz = 1700;
  checks = judge_burnin_telemetry(accept_ranks(4), series, counters);
  REQUIRE(checks.size() == 4);
  CHECK(checks[0].status == "pass");
  CHECK(checks[0].reason.find("SM clock 1700-1755 MHz (round means)") != std::string::npos);
  CHECK(checks[1].status == "fail");
  CHECK(checks[1].measured == doctest::Approx(0.25));
  CHECK(checks[1].expected == doctest::Approx(kMaxThrottledShare));
  CHECK(checks[1].reason.find("slowed down") != std::string::npos);
  CHECK(checks[1].reason.find("25% of 24 samples") != std::string::npos);
  CHECK(checks[2].status == "pass");
  CHECK(*checks[2].measured == doctest::Approx(1.0 / 24));
  CHECK(checks[3].status == "fail");
  CHECK(checks[3].reason.find("2 new uncorrected ECC errors") != std::string::npos);
  CHECK(checks[3].node == 1);
}

TEST_CASE("accept burnin: a round through doubles, unknown figures kept unknown") {
  RoundTelemetry r = rounds(0.125)[0];
  r.temperature_c.reset();
  std::vector<double> flat;
  append_round(flat, r);
  append_round(flat, rounds(0)[0]);
  REQUIRE(flat.size() == 2 * kRoundDoubles);
  const RoundTelemetry back = round_from(flat.data());
  CHECK(back.samples == 8);
  CHECK(back.sm_clock_mhz == 1755);
  CHECK(!back.temperature_c.has_value());
  CHECK(back.power_w == 690);
  CHECK(back.slowdown_share == 0.125);
  CHECK(back.power_cap_share == 0.5);
  CHECK(round_from(flat.data() + kRoundDoubles).temperature_c == 70);
}

}  // namespace
}  // namespace moebench
