// accept's collectives: nccl-tests' bus-bandwidth factors, the table's columns, and the check an
// op at its largest size against the expected figure (failing under floor x it, stated only
// where the figure is nominal). The measurement itself runs under mpirun in test_accept.py.
#include "harness/cli/accept_collectives.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

CollectiveRow row(const std::string& op, std::int64_t bytes, double busbw) {
  CollectiveRow r;
  r.op = op;
  r.bytes = bytes;
  r.busbw = busbw;
  r.algbw = busbw / bus_factor(op, 8);
  r.time_s = static_cast<double>(bytes) / r.algbw;
  return r;
}

TEST_CASE("accept collectives: nccl-tests' factors from algorithm to bus bandwidth") {
  CHECK(bus_factor("all_reduce", 8) == doctest::Approx(2.0 * 7 / 8));
  CHECK(bus_factor("reduce_scatter", 8) == doctest::Approx(7.0 / 8));
  CHECK(bus_factor("all_gather", 2) == doctest::Approx(0.5));
  CHECK(bus_factor("all_to_all", 4) == doctest::Approx(0.75));
  CHECK(bus_factor("all_reduce", 1) == 0.0);  // one rank moves nothing over a link
}

TEST_CASE("accept collectives: an op at its largest size against floor x the expected") {
  const std::vector<CollectiveRow> rows = {
      row("all_reduce", 1 << 20, 10e9), row("all_reduce", 1 << 26, 40e9),
      row("all_gather", 1 << 26, 20e9), row("all_to_all", 1 << 26, 33e9)};
  RateSpec spec;
  spec.name = "collective_busbw";
  spec.stage = "collectives";
  spec.unit = "bytes/s";
  spec.source = "system x";
  spec.expected = 40e9;
  spec.floor = 0.8;  // 32 GB/s
  const std::vector<AcceptCheck> checks = judge_collectives(rows, spec);
  REQUIRE(checks.size() == 3);  // all_reduce, all_gather, all_to_all (no reduce_scatter row)
  CHECK(checks[0].status == "pass");
  CHECK(checks[0].measured == 40e9);  // the largest size's, not the small one's 10
  CHECK(checks[1].status == "fail");
  CHECK(checks[1].reason.find("under 0.80 x it") != std::string::npos);
  CHECK(checks[2].status == "pass");
  CHECK(checks[0].rank == -1);  // the cluster's: every rank takes part
  spec.nominal = true;
  for (const AcceptCheck& c : judge_collectives(rows, spec)) {
    CHECK(c.status == "pass");
    CHECK(c.reason.find("nominal: not judged") != std::string::npos);
  }
  const std::vector<std::string> table = collectives_table(rows);
  REQUIRE(table.size() == 5);
  CHECK(table[0].find("busbw (GB/s)") != std::string::npos);
  CHECK(table[2].find("all_reduce") == 0);
  CHECK(table[2].find("40.00") != std::string::npos);
}

}  // namespace
}  // namespace moebench
