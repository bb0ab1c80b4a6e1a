#include "harness/output/run_report.hpp"
#include "harness/verify/compare.hpp"

#include <limits>
#include <string>

#include <doctest/doctest.h>

#include "harness/output/schema.hpp"
#include "tests/unit/run_record_fixture.hpp"

using namespace moebench;

namespace {

nlohmann::json report() {
  return nlohmann::json(make_run_report(testing::sample_run_record()));
}

const nlohmann::json& run_schema() {
  static const nlohmann::json schema = load_schema(kRunSchemaFile);
  return schema;
}

bool mentions(const std::vector<std::string>& errors, const std::string& text) {
  for (const auto& e : errors) {
    if (e.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("run report: a complete record validates against reports/run.schema.json") {
  const auto errors = schema_errors(report(), run_schema());
  for (const auto& e : errors) MESSAGE(e);
  CHECK(errors.empty());
}

TEST_CASE("run report: a verification that met NaN still writes a valid report") {
  RunRecord r = testing::sample_run_record();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorCheck t =
      compare("output", std::vector<float>{nan, 1.0f}, std::vector<float>{1.0f, 1.0f}, 1e-3, 1e-3);
  r.verification.enabled = true;
  r.verification.passed = false;
  r.verification.tensors = {t};
  accumulate(t, TensorCheck{});
  r.verification.mismatches = t.mismatches;
  r.verification.nonfinite = t.nonfinite;
  const nlohmann::json j = nlohmann::json(make_run_report(r));
  CHECK(j["verification"]["nonfinite"] == 1);
  CHECK(j["verification"]["tensors"][0]["max_abs_error"] == 0.0);
  CHECK(schema_errors(j, run_schema()).empty());
}

TEST_CASE("run report: a failed run says why and how many ranks its results hold") {
  RunRecord r = testing::sample_run_record();
  r.state = "failed";
  r.error = "mpi on rank 0 (host a): MPI_Wait did not complete within 5 s (--timeout)";
  r.ranks_reporting = 1;
  const nlohmann::json j = nlohmann::json(make_run_report(r));
  CHECK(j["status"]["state"] == "failed");
  CHECK(j["status"]["error"] == r.error);
  CHECK(j["status"]["signal"].is_null());
  CHECK(j["status"]["ranks_reporting"] == 1);
  CHECK(schema_errors(j, run_schema()).empty());
  // A completed run has no error, and its results hold every rank.
  const nlohmann::json done = nlohmann::json(make_run_report(testing::sample_run_record()));
  CHECK(done["status"]["error"].is_null());
  CHECK(done["status"]["ranks_reporting"] == done["parallel"]["world"]);
  // The schema knows no other state, and a report names at least one rank.
  nlohmann::json bad = j;
  bad["status"]["state"] = "crashed";
  CHECK(mentions(schema_errors(bad, run_schema()), "/status/state"));
  bad = j;
  bad["status"]["ranks_reporting"] = 0;
  CHECK(mentions(schema_errors(bad, run_schema()), "/status/ranks_reporting"));
}

TEST_CASE("run report: layout and values come from the record") {
  const nlohmann::ordered_json j = make_run_report(testing::sample_run_record());
  CHECK(j.begin().key() == "schema_version");
  CHECK(j.at("schema_version") == kRunSchemaVersion);
  CHECK(j.at("kind") == "moebench.run");
  CHECK(j.at("meta").at("environment").at("SLURM_JOB_ID") == "42");
  CHECK(j.at("config").at("precision") == "fp32");
  CHECK(j.at("config").at("model").at("hidden_size") == 7168);
  CHECK(j.at("parallel").at("edp") == 2);
  CHECK(j.at("parallel").at("ranks_per_node") == 4);
  CHECK(j.at("accounting").at("collective_bytes").at("dispatch") == 1e8);
  const auto& phases = j.at("results").at("phases");
  CHECK(phases.size() == kPhaseCount);
  CHECK(phases.at("dispatch").at("kind") == "communication");
  CHECK(phases.at("experts").at("kind") == "compute");
  CHECK(phases.at("dispatch").at("group_size") == 2);
  CHECK(j.at("results").at("per_rank").size() == 4);
  CHECK(j.at("results").at("per_rank")[0].at("phase_time_s").size() == kPhaseCount);
  CHECK(j.at("verification").at("tensors")[0].at("name") == "output");
  CHECK(!j.at("config").contains("inject"));
}

TEST_CASE("run report: the schema rejects a missing key, a wrong type and a wrong kind") {
  nlohmann::json missing = report();
  missing["results"].erase("tflops_per_gpu");
  CHECK(
      mentions(schema_errors(missing, run_schema()), "Missing required property 'tflops_per_gpu'"));

  nlohmann::json wrong_type = report();
  wrong_type["config"]["steps"] = "ten";
  const auto type_errors = schema_errors(wrong_type, run_schema());
  CHECK(mentions(type_errors, "/config/steps"));
  CHECK(mentions(type_errors, "found string"));

  nlohmann::json wrong_kind = report();
  wrong_kind["kind"] = "moebench.scaling";
  CHECK(mentions(schema_errors(wrong_kind, run_schema()), "/kind"));

  nlohmann::json bad_phase = report();
  bad_phase["results"]["phases"]["warp_drive"] = bad_phase["results"]["phases"]["experts"];
  CHECK(mentions(schema_errors(bad_phase, run_schema()), "'warp_drive'"));

  nlohmann::json negative = report();
  negative["results"]["phases"]["dispatch"]["busbw"] = -1.0;
  CHECK(mentions(schema_errors(negative, run_schema()), "/results/phases/dispatch/busbw"));

  nlohmann::json extra = report();
  extra["surprise"] = 1;
  CHECK(!schema_errors(extra, run_schema()).empty());

  nlohmann::json version = report();
  version["schema_version"] = 2;
  CHECK(mentions(schema_errors(version, run_schema()), "/schema_version"));
}

TEST_CASE("run report: fp8 runs say so, with the emulation; other runs have no fp8 block") {
  RunRecord r = testing::sample_run_record();
  CHECK(!nlohmann::json(make_run_report(r)).at("config").contains("fp8"));
  r.config.precision = Precision::fp8;
  r.config.backend = ComputeBackend::cpu;  // fp8 is emulated there
  nlohmann::json j = nlohmann::json(make_run_report(r));
  auto errors = schema_errors(j, run_schema());
  for (const auto& e : errors) MESSAGE(e);
  CHECK(errors.empty());
  CHECK(j.at("config").at("precision") == "fp8");
  CHECK(j.at("config").at("fp8").at("emulated") == true);
  CHECK(j.at("config").at("fp8").at("storage") == "fp32");
  CHECK(j.at("config").at("fp8").at("recipe") == "tensor");
  CHECK(j.at("config").at("fp8").at("scaling") == describe(Fp8Recipe::tensor));
  // The weights' copies as run (auto is kept until the memory check says otherwise).
  CHECK(j.at("config").at("fp8").at("weight_copies") == "kept");
  r.config.fp8_weight_copies = Fp8WeightCopies::per_gemm;
  CHECK(nlohmann::json(make_run_report(r)).at("config").at("fp8").at("weight_copies") ==
        "per-gemm");
  r.config.fp8_recipe = Fp8Recipe::mxfp8;
  j = nlohmann::json(make_run_report(r));
  CHECK(schema_errors(j, run_schema()).empty());
  CHECK(j.at("config").at("fp8").at("recipe") == "mxfp8");
  r.config.backend = ComputeBackend::cuda;
  j = nlohmann::json(make_run_report(r));
  CHECK(schema_errors(j, run_schema()).empty());
  CHECK(j.at("config").at("fp8").at("emulated") == false);
  CHECK(j.at("config").at("fp8").at("storage") == "bf16");
  // The schema refuses an fp8 block without its fields.
  j["config"]["fp8"].erase("emulated");
  CHECK(!schema_errors(j, run_schema()).empty());
}

TEST_CASE("run report: a GPU run's devices and precision are written and validate") {
  RunRecord r = testing::sample_run_record();
  r.config.backend = ComputeBackend::cuda;
  r.config.comm = CommBackend::nccl;
  r.config.precision = Precision::bf16;
  const DeviceRecord d = testing::sample_device_record();
  r.meta.devices = {d, d};
  r.meta.devices[1].rank = 1;
  const nlohmann::json j = nlohmann::json(make_run_report(r));
  const auto errors = schema_errors(j, run_schema());
  for (const auto& e : errors) MESSAGE(e);
  CHECK(errors.empty());
  CHECK(j.at("config").at("precision") == "bf16");
  const auto& devices = j.at("meta").at("devices");
  REQUIRE(devices.size() == 2);
  CHECK(devices[1].at("rank") == 1);
  CHECK(devices[0].at("memory_bytes") == 150754820096);
  CHECK(devices[0].at("nccl_version") == "2.28.9");
  CHECK(!devices[0].contains("driver_version"));  // optional: absent, not ""
  CHECK(devices[0].at("compute_capability") == "9.0");
  CHECK(devices[0].at("multiprocessors") == 132);
  // A cpu run has none.
  CHECK(!report().at("meta").contains("devices"));
}
