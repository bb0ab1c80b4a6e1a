// The link test's report and table from a hand-made record: the matrix (source by row, nulls
// where nothing was measured), the estimate at 1,024 ranks, the outliers named by host, and the
// JSON valid against reports/linkcheck.schema.json.
#include "harness/output/linkcheck_report.hpp"

#include <doctest/doctest.h>

#include "harness/output/schema.hpp"

namespace moebench {
namespace {

LinkcheckRecord record() {
  LinkcheckRecord r;
  r.tool_version = "0.0.0";
  r.git_sha = "abc";
  r.argv = {"moebench", "linkcheck"};
  r.start_time = "2026-12-01T00:00:00Z";
  r.backend = "cpu";
  r.comm = "mpi";
  r.mpi_library = "Open MPI";
  r.domain_source = "node";
  r.level = "rank";
  r.large_bytes = 1 << 20;
  r.small_bytes = 8;
  r.iterations = 20;
  r.thresholds = {6.0, 0.5};
  for (int i = 0; i < 4; ++i)
    r.ranks.push_back({i, "host-" + std::to_string(i / 2), i / 2, i % 2, i / 2});
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b || (a == 0 && b == 3)) continue;  // 0 -> 3 not measured
      const bool slow = (a == 1 && b == 2) || (a == 2 && b == 1);
      r.samples.push_back({a, b, slow ? 1e9 : 10e9, 5e-6});
    }
  }
  LinkPlacement p{{0, 0, 1, 1}, {0, 0, 1, 1}};
  r.analysis = analyse_links(r.samples, p, r.thresholds);
  r.rounds = 3;
  r.wall_time_s = 0.3;
  return r;
}

TEST_CASE("linkcheck report: matrix, estimate, outliers, and valid against its schema") {
  const LinkcheckRecord r = record();
  const nlohmann::ordered_json j = make_linkcheck_report(r);
  CHECK(schema_errors(nlohmann::json::parse(j.dump()), load_schema(kLinkcheckSchemaFile)).empty());
  const auto& bw = j["matrix"]["bandwidth"];
  CHECK(bw[0][0].is_null());
  CHECK(bw[0][3].is_null());
  CHECK(bw[1][2].get<double>() == 1e9);
  CHECK(bw[3][0].get<double>() == 10e9);
  CHECK(j["estimate"]["all_pairs_rounds"] == 1023);
  CHECK(j["estimate"]["ranks_per_node"] == 2);
  CHECK(j["estimate"]["node_level_rounds"] == 511 + 1);
  CHECK(j["estimate"]["round_time_s"].get<double>() == doctest::Approx(0.1));
  REQUIRE(j["outliers"].size() == 1);
  CHECK(j["outliers"][0]["a"]["rank"] == 1);
  CHECK(j["outliers"][0]["b"]["host"] == "host-1");
  CHECK(j["outliers"][0]["metric"] == "bandwidth");
  const std::string text = format_linkcheck(r);
  CHECK(text.find("outliers: 1") != std::string::npos);
  CHECK(text.find("rank 1 (host host-0) -> rank 2 (host host-1)") != std::string::npos);
  CHECK(text.find("every pair 1023 rounds") != std::string::npos);
}

TEST_CASE("linkcheck report: a bad document fails the schema") {
  nlohmann::json j = nlohmann::json::parse(make_linkcheck_report(record()).dump());
  j["config"]["level"] = "pairs";
  CHECK_FALSE(schema_errors(j, load_schema(kLinkcheckSchemaFile)).empty());
}

}  // namespace
}  // namespace moebench
