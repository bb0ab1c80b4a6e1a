// The run's outputs: the step log's path, the destinations' checks (never aliased, never
// replacing a file of another kind), the step log's whole lines, and the report's fallback.
#include "harness/cli/run_outputs.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/core/error.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace moebench;
using moebench::test::TempDir;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

CliOptions with(const std::string& out, const std::string& step_log = "") {
  CliOptions o;
  o.out = out;
  o.step_log = step_log;
  return o;
}

}  // namespace

TEST_CASE("run outputs: the step log beside --out unless given") {
  CHECK(step_log_path(with("r.json")) == "r.json.steps.jsonl");
  CHECK(step_log_path(with("r.json", "s.jsonl")) == "s.jsonl");
  CHECK(step_log_path(with("")).empty());
}

TEST_CASE("run outputs: destinations never alias and never replace another kind of file") {
  TempDir dir;
  const std::string out = (dir.path / "r.json").string();
  CHECK(check_destinations(with(out)) != nullptr);  // fine, and released at once
  CHECK_THROWS_WITH_AS(check_destinations(with(out, (dir.path / "." / "r.json").string())),
                       doctest::Contains("is also --out"), UsageError);
  std::ofstream((dir.path / "report.json").string()) << "{\"kind\": \"moebench.run\"}\n";
  CHECK_THROWS_WITH_AS(check_destinations(with(out, (dir.path / "report.json").string())),
                       doctest::Contains("is not a step log"), UsageError);
  std::ofstream((dir.path / "old.jsonl").string()) << "{\"step\": 1, \"step_time_s\": 0.1}\n";
  CHECK(check_destinations(with(out, (dir.path / "old.jsonl").string())) != nullptr);
  CHECK_THROWS_WITH_AS(
      check_destinations(with((dir.path / "old.jsonl").string(), (dir.path / "s.jsonl").string())),
      doctest::Contains("is a step log"), UsageError);
  const auto held = check_destinations(with(out));
  CHECK_THROWS_WITH_AS(check_destinations(with(out)), doctest::Contains("another moebench run"),
                       UsageError);
}

TEST_CASE("run outputs: the step log holds one whole JSON line a step") {
  TempDir dir;
  RunConfig c;
  c.model = preset("deepseek-v3-tiny");
  c.workload.seq_len = 8;
  const std::string path = (dir.path / "s.jsonl").string();
  {
    StepLog log(path, c, 1e9);
    log.add(log.progress("timed", 0, 2, 1, 2, 0.5));
    log.add(log.progress("timed", 1, 2, 2, 2, 0.25));
  }
  const std::string text = slurp(path);
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    CHECK(line.find("\"step\":" + std::to_string(++n)) != std::string::npos);
  }
  CHECK(n == 2);
  CHECK(text.back() == '\n');
}

TEST_CASE("run outputs: a report --out cannot take goes to a fallback, which is named") {
  TempDir dir;
  const std::string gone = (dir.path / "gone" / "r.json").string();  // its folder is missing
  const std::string spare = (dir.path / "spare").string();
  std::filesystem::create_directory(spare);
  setenv("TMPDIR", spare.c_str(), 1);
  CHECK(write_report(with(gone), "{}\n"));
  unsetenv("TMPDIR");
  int found = 0;
  for (const auto& e : std::filesystem::directory_iterator(spare)) {
    CHECK(e.path().filename().string().rfind("r-rescued-", 0) == 0);
    CHECK(slurp(e.path()) == "{}\n");
    ++found;
  }
  CHECK(found == 1);
  CHECK_FALSE(write_report(with((dir.path / "here.json").string()), "{}\n"));
  CHECK(slurp(dir.path / "here.json") == "{}\n");
}
