// accept-merge on hand-made reports written by accept_json (the writer the real command uses):
// every report's checks kept with their report's index, a node expected with no report and a
// directory with none both failing, the fleet's view across single-node reports (a slow node
// and a wrong GEMM that no single job could name), different software between nodes, and the
// --nodes list.
#include "harness/cli/accept_merge.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

// One single-node job's report: `ranks` ranks on `host`, each with a GEMM and a memory rate
// check (passing, as a lone node judges them) and the GEMM probe's checksum.
nlohmann::json node_report(const std::string& host, int ranks, double gemm, std::uint64_t sum,
                           const std::string& software = "driver 1") {
  AcceptResult r;
  for (int i = 0; i < ranks; ++i) {
    r.ranks.push_back({i, 0, host, "H200", software, sum});
    for (const auto& [name, unit, value] :
         {std::tuple<std::string, std::string, double>{"gemm_rate", "FLOP/s", gemm},
          {"memory_bandwidth", "bytes/s", 4e12}}) {
      AcceptCheck c;
      c.name = name;
      c.stage = "gpu";
      c.status = "pass";
      c.rank = i;
      c.node = 0;
      c.measured = value;
      c.unit = unit;
      c.reason = "as judged on its node";
      r.checks.push_back(c);
    }
  }
  r.node_names = node_names(r.ranks);
  r.stages.push_back({"gpu", 1.0});
  const nlohmann::ordered_json meta = {{"tool_version", "test"},
                                       {"git_sha", "x"},
                                       {"argv", {"moebench", "accept"}},
                                       {"start_time", "t"},
                                       {"backend", "cuda"},
                                       {"system", "h200"},
                                       {"world", ranks},
                                       {"nodes", 1},
                                       {"floor", 0.8},
                                       {"min_slowdown", 0.1},
                                       {"gemm_n", 8192},
                                       {"duration_s", 0},
                                       {"inject", ""}};
  return nlohmann::json(accept_json(r, meta));
}

std::vector<const AcceptCheck*> failures(const AcceptResult& r, const std::string& name) {
  std::vector<const AcceptCheck*> out;
  for (const AcceptCheck& c : r.checks) {
    if (c.name == name && c.status == "fail") out.push_back(&c);
  }
  return out;
}

TEST_CASE("accept-merge: healthy nodes merge into one passing verdict, every check kept") {
  const MergedAccept m = merge_accept({{"a/accept.json", node_report("a", 4, 900e12, 7)},
                                       {"b/accept.json", node_report("b", 4, 910e12, 7)},
                                       {"c/accept.json", node_report("c", 4, 905e12, 7)}},
                                      {{"a", "b", "c"}, std::nullopt});
  CHECK(m.result.passed());
  CHECK(drain_lines(m.result).empty());
  CHECK(m.result.node_names == std::vector<std::string>{"a", "b", "c"});
  CHECK(m.result.ranks.size() == 12);
  CHECK(m.reports.size() == 3);
  CHECK(m.meta_fields["min_slowdown"] == 0.1);  // the reports' own
  // 3 x 8 per-rank checks kept with their report; one passing fleet check each of 4 kinds.
  int kept = 0, fleet = 0;
  for (const AcceptCheck& c : m.result.checks) {
    if (c.report >= 0) ++kept;
    if (c.name.rfind("fleet_", 0) == 0) ++fleet;
  }
  CHECK(kept == 24);
  CHECK(fleet == 4);
  CHECK(m.result.checks[8].report == 1);
  CHECK(m.result.checks[8].node == 1);
}

TEST_CASE("accept-merge: the fleet names a node no job alone could") {
  // Node b's GPUs are uniformly 30% slow (its own job saw no outlier), and c's GEMM result
  // differs from every other node's (its own ranks agreed with each other).
  const MergedAccept m = merge_accept({{"a", node_report("a", 2, 900e12, 7)},
                                       {"b", node_report("b", 2, 630e12, 7)},
                                       {"c", node_report("c", 2, 905e12, 8)},
                                       {"d", node_report("d", 2, 902e12, 7)}},
                                      {});
  CHECK_FALSE(m.result.passed());
  const auto slow = failures(m.result, "fleet_gemm_rate");
  REQUIRE(slow.size() == 2);
  for (const AcceptCheck* c : slow) CHECK(m.result.node_names[c->node] == "b");
  const auto wrong = failures(m.result, "fleet_sdc_gemm");
  REQUIRE(wrong.size() == 2);
  for (const AcceptCheck* c : wrong) CHECK(m.result.node_names[c->node] == "c");
  const std::vector<std::string> drain = drain_lines(m.result);
  REQUIRE(drain.size() == 2);
  CHECK(drain[0].find("NodeName=b ") != std::string::npos);
  CHECK(drain[1].find("NodeName=c ") != std::string::npos);
  // A looser --min-slowdown lets the slow node pass; the wrong GEMM still fails.
  const MergedAccept loose = merge_accept({{"a", node_report("a", 2, 900e12, 7)},
                                           {"b", node_report("b", 2, 630e12, 7)},
                                           {"c", node_report("c", 2, 905e12, 7)}},
                                          {{}, 0.5});
  CHECK(failures(loose.result, "fleet_gemm_rate").empty());
  CHECK(loose.result.passed());
}

TEST_CASE("accept-merge: a node with no report, a job that wrote none, software that differs") {
  const MergedAccept m =
      merge_accept({{"a", node_report("a", 2, 900e12, 7)},
                    {"jobs/x", std::nullopt},  // a directory that names no node, no accept.json
                    {"c", node_report("c", 2, 900e12, 7, "driver 2")},
                    {"e", node_report("e", 2, 900e12, 7)}},
                   {{"a", "b", "c", "e"}, std::nullopt});
  const auto missing = failures(m.result, "report_missing");
  REQUIRE(missing.size() == 2);
  CHECK(missing[0]->node == -1);  // the directory: its node cannot be told from its name
  CHECK(missing[0]->reason.find("jobs/x holds no accept.json") != std::string::npos);
  CHECK(m.result.node_names[missing[1]->node] == "b");  // --nodes names it
  const auto odd = failures(m.result, "fleet_inventory");
  REQUIRE(odd.size() == 2);
  for (const AcceptCheck* c : odd) CHECK(m.result.node_names[c->node] == "c");
  const std::vector<std::string> drain = drain_lines(m.result);
  REQUIRE(drain.size() == 2);
  CHECK(drain[0].find("NodeName=c ") != std::string::npos);
  CHECK(drain[1] ==
        "scontrol update NodeName=b State=DRAIN Reason=\"moebench accept: "
        "report_missing\"");
}

TEST_CASE("accept-merge: a node whose own job wrote nothing is drained, a fleet report or not") {
  // accept.sh's layout: nodes/b's job died; the job across the nodes reported b healthy.
  nlohmann::json fleet = node_report("a", 2, 900e12, 7);
  for (nlohmann::json& x : fleet["ranks"]) {
    if (x["rank"] == 1) x["node_name"] = x["host"] = "b";
  }
  const MergedAccept m = merge_accept({{"run/nodes/a", node_report("a", 2, 900e12, 7)},
                                       {"run/nodes/b/", std::nullopt},
                                       {"run/fleet", fleet}},
                                      {{"a", "b"}, std::nullopt});
  const auto missing = failures(m.result, "report_missing");
  REQUIRE(missing.size() == 1);
  REQUIRE(missing[0]->node >= 0);
  CHECK(m.result.node_names[missing[0]->node] == "b");
  CHECK(missing[0]->reason.find("not accepted without its own report") != std::string::npos);
  const std::vector<std::string> drain = drain_lines(m.result);
  REQUIRE(drain.size() == 1);
  CHECK(drain[0].find("NodeName=b ") != std::string::npos);
}

TEST_CASE("accept-merge: a report stopped before the GEMM probe has no checksum to compare") {
  nlohmann::json stopped = node_report("c", 2, 900e12, 7);
  for (nlohmann::json& x : stopped["ranks"]) x["gemm_checksum"] = nullptr;
  const MergedAccept m = merge_accept({{"a", node_report("a", 2, 900e12, 7)},
                                       {"b", node_report("b", 2, 900e12, 7)},
                                       {"c", stopped}},
                                      {});
  CHECK(failures(m.result, "fleet_sdc_gemm").empty());
  CHECK(m.result.passed());
}

TEST_CASE("accept-merge: nothing to merge, or reports of different backends, is bad input") {
  CHECK_THROWS_AS(merge_accept({{"x", std::nullopt}}, {}), UsageError);
  nlohmann::json cpu = node_report("b", 1, 1e11, 7);
  cpu["meta"]["backend"] = "cpu";
  CHECK_THROWS_AS(merge_accept({{"a", node_report("a", 1, 9e14, 7)}, {"b", cpu}}, {}), UsageError);
}

TEST_CASE("accept-merge: --nodes takes commas or white space, each name once") {
  CHECK(parse_node_list("n01,n02") == std::vector<std::string>{"n01", "n02"});
  CHECK(parse_node_list("n01\nn02 n03\n") == std::vector<std::string>{"n01", "n02", "n03"});
  CHECK_THROWS_AS(parse_node_list("n01,n01"), UsageError);
  CHECK_THROWS_AS(parse_node_list(" , "), UsageError);
}

}  // namespace
}  // namespace moebench
