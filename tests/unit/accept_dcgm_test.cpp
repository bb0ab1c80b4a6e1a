// accept --dcgm on dcgmi diag -j output in both of DCGM's layouts (tests/data/dcgm: built from
// the keys DCGM's JSON writer uses, see tests/data/README.md): a GPU's failed test is its rank's,
// a GPU no rank uses and a test of the node are the node's, a null result is a GPU that did not
// run the test, a runtime error fails the node, and a file that is not DCGM's is refused.
#include "harness/cli/accept_dcgm.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

DcgmDiag fixture(const std::string& name) {
  std::ifstream in(std::string(MOEBENCH_TEST_DATA_DIR) + "/dcgm/" + name);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return parse_dcgm(nlohmann::json::parse(text.str()));
}

// Two nodes of two ranks each (ranks 2 and 3 on node 1 use its GPUs 0 and 1).
std::vector<AcceptRank> ranks() {
  return {{0, 0, "a", "H200", "s"},
          {1, 0, "a", "H200", "s"},
          {2, 1, "b", "H200", "s"},
          {3, 1, "b", "H200", "s"}};
}

TEST_CASE("accept --dcgm: DCGM 3.x, a GPU's failed PCIe test is its rank's") {
  const DcgmDiag d = fixture("diag-3.3-gpu1-pcie.json");
  CHECK(d.version == "3.3.9");
  CHECK(d.driver == "535.129.03");
  REQUIRE(d.results.size() == 6);  // 3 node tests, PCIe on 2 GPUs, GPU Memory on GPU 0 (1 null)
  CHECK(d.results[0].gpu == -1);
  CHECK(d.results[4].status == "fail");
  CHECK(d.results[4].gpu == 1);
  const std::vector<AcceptCheck> c = judge_dcgm(ranks(), 1, "b", d);
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == "fail");
  CHECK(c[0].rank == 3);
  CHECK(c[0].node == 1);
  CHECK(c[0].reason ==
        "rank 3 on b: Integration/PCIe failed on GPU 1: Detected more than 8 PCIe replays per "
        "minute for GPU 1 : 13");
  // On a node where the job uses one GPU, GPU 1's failure is the node's.
  const std::vector<AcceptRank> one = {{0, 0, "a", "H200", "s"}};
  const std::vector<AcceptCheck> n = judge_dcgm(one, 0, "a", d);
  REQUIRE(n.size() == 1);
  CHECK(n[0].rank == -1);
  CHECK(n[0].node == 0);
  CHECK(n[0].reason.find("no rank of this job uses it") != std::string::npos);
}

TEST_CASE("accept --dcgm: DCGM 4.x, entity ids, a pass and a GPU memory failure") {
  const DcgmDiag pass = fixture("diag-4.2-pass.json");
  CHECK(pass.version == "4.2.3");
  const std::vector<AcceptCheck> ok = judge_dcgm(ranks(), 0, "a", pass);
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].status == "pass");
  CHECK(ok[0].reason == "DCGM 4.2.3 on a: 3 results passed, 1 skipped, none failed");
  const DcgmDiag bad = fixture("diag-4.2-gpu0-memory.json");
  const std::vector<AcceptCheck> c = judge_dcgm(ranks(), 1, "b", bad);
  REQUIRE(c.size() == 1);
  CHECK(c[0].rank == 2);
  CHECK(c[0].reason.find("Hardware/memory failed on GPU 0: A memory mismatch") !=
        std::string::npos);
}

TEST_CASE("accept --dcgm: a runtime error, a global failure, and files that are not DCGM's") {
  const DcgmDiag err = fixture("diag-runtime-error.json");
  const std::vector<AcceptCheck> c = judge_dcgm(ranks(), 0, "a", err);
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == "fail");
  CHECK(c[0].rank == -1);
  CHECK(c[0].reason.find("did not run its tests: Error: unable to establish") != std::string::npos);
  // 4.x: a test whose summary failed with no GPU's result failing fails the node.
  const DcgmDiag global = parse_dcgm(nlohmann::json::parse(R"({"DCGM Diagnostic": {
      "test_categories": [{"category": "Integration", "tests": [{"name": "pcie",
        "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                     "status": "Pass"}],
        "test_summary": {"status": "Fail", "warnings": [{"warning": "link down"}]}}]}]}})"));
  REQUIRE(global.results.size() == 2);
  CHECK(global.results[1].gpu == -1);
  CHECK(global.results[1].message == "link down");
  CHECK_THROWS_AS(parse_dcgm(nlohmann::json::parse(R"({"kind": "moebench.run"})")), UsageError);
  CHECK_THROWS_AS(parse_dcgm(nlohmann::json::parse(R"({"DCGM Diagnostic": {}})")), UsageError);
  CHECK(dcgm_path("/s/dcgm-%h.json", "n01") == "/s/dcgm-n01.json");
}

}  // namespace
}  // namespace moebench
