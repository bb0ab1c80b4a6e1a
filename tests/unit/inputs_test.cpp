#include "harness/scaling/inputs.hpp"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "harness/core/error.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/schema.hpp"
#include "harness/scaling/sha256.hpp"
#include "tests/unit/run_record_fixture.hpp"

using namespace moebench;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json sample_doc() {
  return json(make_run_report(testing::sample_run_record()));
}

DocumentCheck run_schema_check() {
  static const SchemaValidator validator(load_schema(kRunSchemaFile));
  return [](const json& doc) { return validator.errors(doc); };
}

std::string parse_error(const std::string& text) {
  try {
    parse_run_report("r.json", text, run_schema_check());
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "moebench-inputs-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

}  // namespace

TEST_CASE("parse_run_report: phase times from the step breakdown, maxima from the phases") {
  RunRecord r = testing::sample_run_record();
  r.results.breakdown.rank = 1;
  r.results.breakdown.host = "node-a";
  r.results.breakdown.step_time_s = 0.1;
  r.results.breakdown.phase_time_s.fill(0.0);
  r.results.breakdown.phase_time_s[static_cast<std::size_t>(Phase::dispatch)] = 0.04;
  r.results.breakdown.other_s = 0.06;
  const RunPoint p =
      parse_run_report("r.json", json(make_run_report(r)).dump(), run_schema_check());
  CHECK(p.phase_time_s[static_cast<std::size_t>(Phase::dispatch)] == doctest::Approx(0.04));
  CHECK(p.phase_time_s[static_cast<std::size_t>(Phase::attention)] == 0.0);
  CHECK(p.phase_max_s[static_cast<std::size_t>(Phase::dispatch)] == doctest::Approx(0.005));
  // A report without one (written before it existed): the maxima for both.
  const RunPoint old = parse_run_report("r.json", sample_doc().dump(), run_schema_check());
  CHECK(old.phase_time_s == old.phase_max_s);
}

TEST_CASE("parse_run_report takes the figures, the key and the provenance of a valid report") {
  const std::string text = sample_doc().dump();
  const RunPoint p = parse_run_report("r.json", text, run_schema_check());
  CHECK(p.path == "r.json");
  CHECK(p.sha256 == sha256_hex(text));
  CHECK(p.job_id == "42");
  CHECK(p.hosts == std::vector<std::string>{"node-a"});
  CHECK(p.gpus == 4);
  CHECK(p.ep == 2);
  CHECK(p.tflops_per_gpu == 1.5);
  CHECK(p.step_time_s == doctest::Approx(0.102).epsilon(1e-12));  // median of 0.100/0.102/0.104
  CHECK(p.phase_time_s[static_cast<std::size_t>(Phase::dispatch)] == doctest::Approx(0.005));
  CHECK(p.busbw[static_cast<std::size_t>(Phase::dispatch)] ==
        doctest::Approx(1.25e9));  // the fixture: 25 MB in 10 ms busy, 2 ranks
  CHECK(p.verification_enabled);
  CHECK_FALSE(p.synthetic);
  bool has_hidden = false, has_ep = false;
  for (const auto& [field, value] : p.workload_key) {
    has_hidden = has_hidden || (field == "config.model.hidden_size" && value == "7168");
    has_ep = has_ep || (field == "parallel.ep" && value == "2");
  }
  CHECK(has_hidden);
  CHECK(has_ep);
  json synthetic = sample_doc();
  synthetic["meta"]["synthetic"] = true;
  CHECK(parse_run_report("s.json", synthetic.dump(), run_schema_check()).synthetic);
}

TEST_CASE("each kind of bad input has its own message naming the file and the field") {
  CHECK(parse_error("") == "r.json: empty file: not a run report");
  CHECK(parse_error(" \n") == "r.json: empty file: not a run report");
  CHECK(contains(parse_error("hello"), "r.json: not JSON: "));
  const std::string text = sample_doc().dump();
  CHECK(contains(parse_error(text.substr(0, text.size() / 2)), "r.json: truncated JSON"));
  CHECK(contains(parse_error("[1, 2]"), "r.json: top level is array"));
  json doc = sample_doc();
  doc.erase("kind");
  CHECK(parse_error(doc.dump()) == "r.json: no /kind: not a moebench run report");
  doc = sample_doc();
  doc["kind"] = "moebench.plan";
  CHECK(contains(parse_error(doc.dump()), "r.json: /kind is \"moebench.plan\", expected"));
  doc = sample_doc();
  doc["schema_version"] = 2;
  CHECK(contains(parse_error(doc.dump()), "r.json: /schema_version is 2, from a newer moebench"));
  doc["schema_version"] = 0;
  CHECK(contains(parse_error(doc.dump()), "r.json: /schema_version is 0, not a version"));
  doc = sample_doc();
  doc["results"].erase("tflops_per_gpu");
  const std::string missing = parse_error(doc.dump());
  CHECK(contains(missing, "r.json: not a valid run report (run.schema.json): /results: "));
  CHECK(contains(missing, "tflops_per_gpu"));
  doc = sample_doc();
  doc["results"]["step_time_s"]["median"] = 0.0;
  CHECK(contains(parse_error(doc.dump()), "must be > 0 (no timed step)"));
  // Figures that do not follow from each other: an edited or damaged report.
  doc = sample_doc();
  doc["results"]["tflops_per_gpu"] = 1e308;
  CHECK(contains(parse_error(doc.dump()), "/results/tflops_per_gpu 1e+308 disagrees with"));
  doc = sample_doc();
  doc["results"]["tokens_per_s_per_gpu"] = doc["results"]["tokens_per_s_per_gpu"].get<double>() * 2;
  CHECK(contains(parse_error(doc.dump()), "/results/tokens_per_s_per_gpu"));
  doc = sample_doc();
  doc["parallel"]["nodes"] = std::int64_t{1} << 40;
  CHECK(contains(parse_error(doc.dump()), "/parallel/nodes is 1099511627776, outside 0.."));
  // An interrupted run parses, marked.
  doc = sample_doc();
  doc["status"]["state"] = "interrupted";
  doc["status"]["signal"] = "SIGTERM";
  CHECK(parse_run_report("r.json", doc.dump(), run_schema_check()).interrupted ==
        "interrupted by SIGTERM after " +
            std::to_string(doc["status"]["steps_completed"].get<int>()) + " of " +
            std::to_string(doc["status"]["steps_requested"].get<int>()) + " timed steps");
  // A failed run too, with its error cut short.
  doc["status"]["state"] = "failed";
  doc["status"]["signal"] = nullptr;
  doc["status"]["error"] = "rank 2 did not complete MPI_Wait " + std::string(500, 'x');
  doc["status"]["ranks_reporting"] = 1;
  const std::string failed = parse_run_report("r.json", doc.dump(), run_schema_check()).interrupted;
  CHECK(contains(failed, "stopped by a failure after "));
  CHECK(contains(failed, "rank 2 did not complete MPI_Wait"));
  CHECK(contains(failed, "rank 0's own"));
  CHECK(failed.size() < 260);
}

TEST_CASE("expand_inputs: files, sorted directory listings and globs; outputs are left out") {
  TempDir dir;
  const std::string b = dir.write("b.json", "{}");
  const std::string a = dir.write("a.json", "{}");
  dir.write("notes.txt", "x");
  const std::string out = dir.write("scaling.json", "{}");
  auto files = expand_inputs({dir.path.string()}, {out});
  REQUIRE(files.size() == 2);
  CHECK(files[0].path == a);
  CHECK(files[1].path == b);
  CHECK(files[0].from_directory);
  files = expand_inputs({(dir.path / "*.json").string(), a});  // a named twice is kept once
  REQUIRE(files.size() == 3);
  CHECK_FALSE(files[0].from_directory);
  CHECK_THROWS_WITH_AS(expand_inputs({(dir.path / "missing.json").string()}),
                       doctest::Contains("missing.json: no such file or directory"), UsageError);
  CHECK_THROWS_WITH_AS(expand_inputs({(dir.path / "*.nothing").string()}),
                       doctest::Contains("no file matches this pattern"), UsageError);
  CHECK_THROWS_AS(expand_inputs({}), UsageError);
  fs::create_directory(dir.path / "empty");
  CHECK_THROWS_WITH_AS(expand_inputs({(dir.path / "empty").string()}),
                       doctest::Contains("directory holds no *.json run reports"), UsageError);
  // A symlink loop in a directory of runs: bad input naming it, not a crash.
  fs::create_directory(dir.path / "loop");
  fs::create_symlink(dir.path / "loop" / "x.json", dir.path / "loop" / "x.json");
  CHECK_THROWS_AS(expand_inputs({(dir.path / "loop").string()}), UsageError);
}

TEST_CASE("read_run_reports: other kinds in a directory are skipped; the first bad file is named") {
  TempDir dir;
  const std::string run = dir.write("run.json", sample_doc().dump());
  dir.write("scaling.json", R"({"kind": "moebench.scaling"})");
  std::vector<std::string> skipped;
  const auto points =
      read_run_reports(expand_inputs({dir.path.string()}), run_schema_check(), &skipped);
  CHECK(points.size() == 1);
  REQUIRE(skipped.size() == 1);
  CHECK(contains(skipped[0], "scaling.json (kind \"moebench.scaling\")"));
  // Named explicitly, the same file is an error, not a skip.
  CHECK_THROWS_WITH_AS(
      read_run_reports({{run, false, ""}, {(dir.path / "scaling.json").string(), false, ""}},
                       run_schema_check(), nullptr),
      doctest::Contains("scaling.json: /kind is \"moebench.scaling\""), UsageError);
  // Many files over several threads: still the first bad one in argument order.
  std::vector<InputFile> many;
  for (int i = 0; i < 40; ++i) many.push_back({run, false, ""});
  many[30] = {dir.write("empty.json", ""), false, ""};
  many[35] = {dir.write("bad.json", "nope"), false, ""};
  CHECK_THROWS_WITH_AS(read_run_reports(many, run_schema_check(), nullptr),
                       doctest::Contains("empty.json: empty file"), UsageError);
}

TEST_CASE("parse_run_report: GPU runs' driver, CUDA and NCCL versions are compared between runs") {
  json doc = sample_doc();
  doc["meta"]["devices"] = json::array(
      {{{"name", "NVIDIA H200"}, {"driver_version", "550.54"}, {"nccl_version", "2.21.5"}},
       {{"name", "NVIDIA H200"}, {"driver_version", "550.90"}, {"nccl_version", "2.21.5"}}});
  // the device list's own schema is another module's; only the extraction is tested here
  const DocumentCheck no_schema = [](const json&) { return std::vector<std::string>{}; };
  const RunPoint p = parse_run_report("gpu.json", doc.dump(), no_schema);
  auto value = [&](const std::string& field) {
    for (const auto& [f, v] : p.software) {
      if (f == field) return v;
    }
    return std::string("(none)");
  };
  CHECK(value("meta.devices[].name") == "NVIDIA H200");
  CHECK(value("meta.devices[].driver_version") == "550.54 + 550.90");
  CHECK(value("meta.devices[].nccl_version") == "2.21.5");
  CHECK(value("meta.devices[].cuda_runtime_version") == "(none)");
  CHECK(value("meta.mpi_library") == "Open MPI v4.1.4");
  // The system it names: the model, and the software's distinct values.
  CHECK(p.system.gpu);
  CHECK(p.system.accelerator == "NVIDIA H200");
  CHECK(p.system.software == "driver 550.54 + 550.90, NCCL 2.21.5, Open MPI v4.1.4");
}
