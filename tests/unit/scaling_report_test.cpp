#include "harness/scaling/scaling_report.hpp"

#include <doctest/doctest.h>

#include "harness/output/schema.hpp"
#include "tests/unit/scaling_fixture.hpp"

using namespace moebench;
using moebench::testing::scaling_point;
using nlohmann::json;

namespace {

struct Sample {
  std::vector<RunPoint> runs = {scaling_point(1, 10), scaling_point(2, 9),
                                scaling_point(2, 7, "x")};
  ScalingOptions options;
  ScalingResult result;
  json report;
  Sample() {
    options.claim_efficiency = 0.9;
    result = compute_scaling(runs, options);
    report = json(make_scaling_report(result, runs, options,
                                      {"0.1.0", "abc", false, {"moebench", "report"}, "2025"}));
  }
};

std::vector<std::string> errors_of(const json& doc) {
  return schema_errors(doc, load_schema(kScalingSchemaFile));
}

}  // namespace

TEST_CASE("scaling report: validates against reports/scaling.schema.json") {
  const Sample s;
  const auto errors = errors_of(s.report);
  CHECK_MESSAGE(errors.empty(), (errors.empty() ? "" : errors.front()));
}

TEST_CASE("scaling report: figures, verdicts and provenance come from the result and the inputs") {
  const Sample s;
  const json& j = s.report;
  CHECK(j["kind"] == "moebench.scaling");
  CHECK(j["schema_version"] == 1);
  CHECK(j["scaling"]["mode"] == "weak");
  CHECK(j["scaling"]["baseline_gpus"] == 1);
  REQUIRE(j["sizes"].size() == 2);
  const json& two = j["sizes"][1];
  CHECK(two["runs"] == 2);
  CHECK(two["inputs"] == json::array({1, 2}));
  // medians of 9 and 7: efficiency 0.8 against the 1-GPU run's 10 (1e-12: one division)
  CHECK(two["tflops_per_gpu"]["median"].get<double>() == doctest::Approx(8).epsilon(1e-12));
  CHECK(two["efficiency"].get<double>() == doctest::Approx(0.8).epsilon(1e-12));
  CHECK(two["phase_time_s"].size() == kPhaseCount);
  CHECK(j["thresholds"]["claim_efficiency"] == 0.9);
  CHECK(j["thresholds"]["min_tflops"].is_null());
  const json& claim = j["verdicts"].back();
  CHECK(claim["name"] == "claim_efficiency");
  CHECK(claim["result"] == "FAIL");
  CHECK(claim["margin"].get<double>() == doctest::Approx(-0.1).epsilon(1e-9));
  CHECK(j["passed"] == false);
  REQUIRE(j["inputs"].size() == 3);
  CHECK(j["inputs"][0]["job_id"] == "job1");
  CHECK(j["inputs"][0]["sha256"] == s.runs[0].sha256);
  CHECK(j["workload"]["fields"]["config.model.hidden_size"] == 256);
  CHECK(j["workload"]["fields"]["config.precision"] == "fp32");
}

TEST_CASE("scaling report: the schema rejects a missing key, a bad verdict and a bad digest") {
  const Sample s;
  json doc = s.report;
  doc.erase("passed");
  CHECK_FALSE(errors_of(doc).empty());
  doc = s.report;
  doc["verdicts"][0]["result"] = "MAYBE";
  CHECK_FALSE(errors_of(doc).empty());
  doc = s.report;
  doc["inputs"][0]["sha256"] = "xyz";
  CHECK_FALSE(errors_of(doc).empty());
}
