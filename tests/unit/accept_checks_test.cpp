// `moebench accept`'s judgements on hand-made ranks: a slow rank against its SKU's median and the
// expected floor, a nominal figure stated but not judged, checksums against a rank's repeats and
// its peers' majority (and no majority: the cluster's failure), the inventory's odd rank, node
// names, and the drain lines, JUnit and JSON that follow.
#include "harness/cli/accept_checks.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

std::vector<AcceptRank> four_ranks(const std::string& host_a = "a",
                                   const std::string& host_b = "b") {
  std::vector<AcceptRank> r;
  for (int i = 0; i < 4; ++i) {
    r.push_back({i, i / 2, i < 2 ? host_a : host_b, "GB300", "driver 1"});
  }
  return r;
}

const AcceptCheck& of_rank(const std::vector<AcceptCheck>& checks, int rank) {
  for (const AcceptCheck& c : checks) {
    if (c.rank == rank) return c;
  }
  FAIL("no check of rank " << rank);
  return checks.front();
}

TEST_CASE("accept: a rate past the median's slowdown or under the floor fails, per rank") {
  const std::vector<AcceptRank> ranks = four_ranks();
  RateSpec spec{"gemm_rate", "gpu", "FLOP/s", "datasheet", 100.0, false, 0.8, 0.1};
  // Rank 1 at 50: 0.52x the median (95.5, of 50, 91, 100, 100) and under 0.8 x 100; rank 3 at
  // 91: within 10% of it.
  const auto checks = judge_rates(spec, ranks, {100, 50, 100, 91});
  REQUIRE(checks.size() == 4);
  CHECK(of_rank(checks, 1).status == "fail");
  CHECK(of_rank(checks, 1).reason.find("0.52x the median rank's") != std::string::npos);
  CHECK(of_rank(checks, 1).node == 0);
  CHECK(of_rank(checks, 3).status == "pass");
  CHECK(of_rank(checks, 0).expected == 100.0);
  // A uniformly slow rack: no rank slower than the median, every rank under the floor.
  for (const AcceptCheck& c : judge_rates(spec, ranks, {70, 70, 70, 70})) CHECK(c.status == "fail");
  // The same figures against a nominal expectation (the cpu system's): stated, not judged.
  spec.nominal = true;
  for (const AcceptCheck& c : judge_rates(spec, ranks, {70, 70, 70, 70})) {
    CHECK(c.status == "pass");
    CHECK(c.reason.find("nominal: not judged") != std::string::npos);
  }
  // Two ranks of a SKU: no median to stand against.
  const std::vector<AcceptRank> two(ranks.begin(), ranks.begin() + 2);
  for (const AcceptCheck& c : judge_rates(spec, two, {100, 10})) CHECK(c.status == "pass");
}

TEST_CASE("accept: checksums against the rank's repeats and its peers' majority") {
  const std::vector<AcceptRank> ranks = four_ranks();
  const std::vector<std::string> sku(4, "GB300");
  // Rank 3's result differs from the three others'; rank 2's repeats disagree with each other.
  const auto checks =
      judge_checksums("sdc_gemm", "sdc", "the GEMM", ranks, {{7, 7}, {7, 7}, {7, 8}, {9, 9}}, sku);
  CHECK(of_rank(checks, 0).status == "pass");
  CHECK(of_rank(checks, 2).status == "fail");
  CHECK(of_rank(checks, 2).reason.find("2 different results in 2 repeats") != std::string::npos);
  CHECK(of_rank(checks, 3).status == "fail");
  CHECK(of_rank(checks, 3).reason.find("differs from 3 of the 4 ranks") != std::string::npos);
  // Two against two: no majority, a failure of the cluster's that names every rank.
  const auto split =
      judge_checksums("sdc_gemm", "sdc", "the GEMM", ranks, {{1}, {1}, {2}, {2}}, sku);
  int cluster = 0;
  for (const AcceptCheck& c : split) {
    if (c.rank < 0) {
      ++cluster;
      CHECK(c.status == "fail");
      CHECK(c.reason.find("ranks 0, 1, 2, 3") != std::string::npos);
    } else {
      CHECK(c.status == "pass");
    }
  }
  CHECK(cluster == 1);
  // Groups are judged apart: a replica group of one rank never fails for its peers'.
  const auto apart = judge_checksums("sdc_replicas", "sdc", "params", ranks, {{1}, {1}, {2}, {2}},
                                     {"stage 0", "stage 0", "stage 1", "stage 1"});
  for (const AcceptCheck& c : apart) CHECK(c.status == "pass");
}

TEST_CASE("accept: the inventory names the rank whose software differs from its SKU's") {
  std::vector<AcceptRank> ranks = four_ranks();
  auto checks = judge_inventory(ranks);
  REQUIRE(checks.size() == 1);
  CHECK(checks.front().status == "pass");
  ranks[2].software = "driver 2";
  checks = judge_inventory(ranks);
  REQUIRE(checks.size() == 1);
  CHECK(checks.front().status == "fail");
  CHECK(checks.front().rank == 2);
  CHECK(checks.front().reason.find("3 of the 4 GB300 ranks run \"driver 1\"") != std::string::npos);
}

TEST_CASE("accept: node names, drain lines, JUnit and JSON follow the failing checks") {
  // Distinct hosts name their nodes; nodes emulated on one host are HOST-nK.
  CHECK(node_names(four_ranks()) == std::vector<std::string>{"a", "b"});
  CHECK(node_names(four_ranks("vm", "vm")) == std::vector<std::string>{"vm-n0", "vm-n1"});
  AcceptResult r;
  r.ranks = four_ranks();
  r.node_names = node_names(r.ranks);
  r.checks = judge_rates({"gemm_rate", "gpu", "FLOP/s", "src", std::nullopt, false, 0.8, 0.1},
                         r.ranks, {100, 100, 100, 10});
  AcceptCheck cluster;
  cluster.name = "verification";
  cluster.stage = "step";
  cluster.status = "fail";
  cluster.reason = "3 of 9 values differ";
  r.checks.push_back(cluster);
  CHECK_FALSE(r.passed());
  // One line, rank 3's node; the cluster's failure drains nothing.
  const std::vector<std::string> drain = drain_lines(r);
  REQUIRE(drain.size() == 1);
  CHECK(drain.front() ==
        "scontrol update NodeName=b State=DRAIN Reason=\"moebench accept: gemm_rate rank 3\"");
  const std::string xml = junit_xml(r);
  CHECK(xml.find("tests=\"5\" failures=\"2\"") != std::string::npos);
  CHECK(xml.find("<testcase classname=\"accept.gpu.gemm_rate\" name=\"b rank 3\">") !=
        std::string::npos);
  const nlohmann::ordered_json j = accept_json(r, {{"system", "cpu"}});
  CHECK(j["passed"] == false);
  CHECK(j["checks"][3]["node"] == "b");
  CHECK(j["checks"][4]["node"].is_null());
  CHECK(j["drain"].size() == 1);
  CHECK(accept_markdown(r, {{"system", "cpu"}}).find("# Acceptance: FAIL") == 0);
  // FNV-1a: the published test vector of "a".
  CHECK(fnv1a("a", 1) == 0xaf63dc4c8601ec8cULL);
}

}  // namespace
}  // namespace moebench

namespace moebench {
namespace {

LinkOutlier outlier(int a, int b) {
  LinkOutlier o;
  o.a = a;
  o.b = b;
  o.metric = "bandwidth";
  o.slowdown = 12;
  return o;
}

TEST_CASE(
    "accept: a rank with two slow links is its node's; one slow link the cluster's, or its "
    "node's when both ends share one") {
  const std::vector<AcceptRank> ranks = four_ranks();
  LinkAnalysis a;
  a.outliers = {outlier(0, 3), outlier(1, 3), outlier(2, 3)};
  auto checks = judge_links(ranks, {}, a);
  REQUIRE(checks.size() == 1);
  CHECK(checks.front().rank == 3);
  CHECK(checks.front().node == 1);
  CHECK(checks.front().reason.find("3 slow links") != std::string::npos);
  a.outliers = {outlier(0, 3)};
  checks = judge_links(ranks, {}, a);
  REQUIRE(checks.size() == 1);
  CHECK(checks.front().rank == -1);
  CHECK(checks.front().status == "fail");
  CHECK(checks.front().reason.find("either end") != std::string::npos);
  a.outliers = {outlier(2, 3)};  // both ends on node 1: the node's, either rank
  checks = judge_links(ranks, {}, a);
  REQUIRE(checks.size() == 1);
  CHECK(checks.front().rank == -1);
  CHECK(checks.front().node == 1);
  CHECK(checks.front().reason.find("inside the node of b") != std::string::npos);
  // Single links not judged (the cpu backend): stated; a slow port still fails.
  checks = judge_links(ranks, {}, a, false);
  REQUIRE(checks.size() == 1);
  CHECK(checks.front().status == "info");
  CHECK(checks.front().reason.find("stated, not judged") != std::string::npos);
  a.outliers = {outlier(0, 3), outlier(1, 3)};
  checks = judge_links(ranks, {}, a, false);
  REQUIRE(checks.size() == 1);
  CHECK(checks.front().status == "fail");
  CHECK(checks.front().rank == 3);
  a.outliers.clear();
  checks = judge_links(ranks, std::vector<LinkSample>(12), a);
  REQUIRE(checks.size() == 1);
  CHECK(checks.front().status == "pass");
  CHECK(checks.front().reason.find("12 links measured") == 0);
}

}  // namespace
}  // namespace moebench

namespace moebench {
namespace {

TEST_CASE("accept: a rank whose rate fell during the burn-in fails; the others pass") {
  const std::vector<AcceptRank> ranks = four_ranks();
  // Rank 2 fell from 100 to 40 (past 2x: 40 x 2 < 100); rank 1 from 100 to 60 (within it).
  const auto checks =
      judge_drift("burnin_gemm_drift", "FLOP/s", ranks,
                  {{100, 100, 100}, {100, 80, 60}, {100, 70, 40}, {90, 95, 110}}, 1.0);
  REQUIRE(checks.size() == 4);
  CHECK(of_rank(checks, 2).status == "fail");
  CHECK(of_rank(checks, 2).measured == 40.0);
  CHECK(of_rank(checks, 2).expected == 100.0);
  CHECK(of_rank(checks, 2).reason.find("(0.40x): it fell") != std::string::npos);
  CHECK(of_rank(checks, 1).status == "pass");
  CHECK(of_rank(checks, 3).status == "pass");
  // Six rounds: the median of the first two against that of the last two. One slow last round
  // (100, 30: a median of 65) does not fail; two do (35, 30).
  const auto six = judge_drift("burnin_gemm_drift", "FLOP/s", ranks,
                               {{100, 100, 100, 100, 100, 30},
                                {100, 100, 100, 100, 35, 30},
                                {100, 100, 100, 100, 100, 100},
                                {100, 100, 100, 100, 100, 100}},
                               1.0);
  CHECK(of_rank(six, 0).status == "pass");
  CHECK(of_rank(six, 0).measured == 65.0);
  CHECK(of_rank(six, 1).status == "fail");
  CHECK(of_rank(six, 1).reason.find("median of 2 rounds") != std::string::npos);
  // Not judged (the cpu backend): stated, passing.
  const auto stated = judge_drift("burnin_gemm_drift", "FLOP/s", ranks,
                                  {{100, 40}, {100, 40}, {100, 40}, {100, 40}}, 1.0, false);
  CHECK(of_rank(stated, 2).status == "pass");
  CHECK(of_rank(stated, 2).reason.find("stated, not judged") != std::string::npos);
  AcceptResult r;
  r.ranks = ranks;
  r.node_names = node_names(ranks);
  r.checks = checks;
  BurnIn b;
  b.duration_s = 3;
  b.rounds = 3;
  b.gemm_rate = {{1, 2, 3}, {1, 2, 3}, {1, 2, 3}, {1, 2, 3}};
  b.step_time_s = b.gemm_rate;
  r.burnin = b;
  const nlohmann::ordered_json j = accept_json(r, {});
  CHECK(j["burnin"]["rounds"] == 3);
  CHECK(j["burnin"]["ranks"][3]["gemm_rate"].size() == 3);
  CHECK(drain_lines(r).size() == 1);  // rank 2's node
}

}  // namespace
}  // namespace moebench
