#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/cli/commands.hpp"
#include "harness/core/error.hpp"
#include "harness/output/run_report.hpp"
#include "tests/unit/run_record_fixture.hpp"

using namespace moebench;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Workspace {
  fs::path dir;
  std::string run4, run8;
  Workspace() {
    std::string tmpl = (fs::temp_directory_path() / "moebench-report-cmd-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    json doc = json(make_run_report(testing::sample_run_record()));  // 4 GPUs, 1.5 TFLOP/s
    run4 = write("run4.json", doc.dump());
    // The same run at 8 GPUs, weak scaling, at 1.2 TFLOP/s: its figures kept consistent.
    const double median8 = doc["results"]["step_time_s"]["median"].get<double>() * 8;
    doc["parallel"]["world"] = 8;
    doc["results"]["tflops_per_gpu"] = 1.2;
    doc["accounting"]["instantiated"]["flops_per_step"] = 1.2e12 * median8;
    doc["config"]["workload"]["tokens_per_step"] =
        doc["config"]["workload"]["tokens_per_step"].get<std::int64_t>() * 2;
    run8 = write("run8.json", doc.dump());
  }
  ~Workspace() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  int report(std::vector<std::string> args) const {
    args.insert(args.begin(), {"moebench", "report"});
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    return report_command(parse_command_line(static_cast<int>(argv.size()), argv.data()));
  }
};

}  // namespace

TEST_CASE("report command: writes the JSON and Markdown; exit 0, or 4 when a verdict fails") {
  Workspace w;
  CHECK(w.report({w.run4, w.run8, "--out", w.path("s.json"), "--markdown", w.path("s.md"),
                  "--quiet"}) == 0);
  std::ifstream in(w.path("s.json"));
  const json s = json::parse(in);
  CHECK(s["kind"] == "moebench.scaling");
  CHECK(s["sizes"][1]["efficiency"].get<double>() == doctest::Approx(0.8).epsilon(1e-12));
  CHECK(fs::file_size(w.path("s.md")) > 0);
  CHECK(w.report({w.run4, w.run8, "--min-tflops", "1.4", "--out", w.path("f.json"), "--quiet"}) ==
        static_cast<int>(ExitCode::claim));
  CHECK(fs::exists(w.path("f.json")));  // a failed verdict is still reported
}

TEST_CASE("report command: a bad input is a usage error and nothing is written") {
  Workspace w;
  const std::string empty = w.write("empty.json", "");
  CHECK_THROWS_WITH_AS(
      w.report({w.run4, w.run8, empty, "--out", w.path("s.json"), "--markdown", w.path("s.md")}),
      doctest::Contains("empty.json: empty file"), UsageError);
  CHECK_FALSE(fs::exists(w.path("s.json")));
  CHECK_FALSE(fs::exists(w.path("s.md")));
  CHECK_THROWS_WITH_AS(w.report({w.run4, w.run8, "--out", w.run4}),
                       doctest::Contains("is also an input"), UsageError);
  CHECK_THROWS_WITH_AS(w.report({w.run4, w.run8, "--out", w.path("no/such/dir/s.json")}),
                       doctest::Contains("does not exist"), UsageError);
}

TEST_CASE("report command: without a usable python the plot is skipped, the exit code kept") {
  Workspace w;
  ::setenv("MOEBENCH_PYTHON", "/nonexistent/python3", 1);
  const int rc =
      w.report({w.run4, w.run8, "--out", w.path("s.json"), "--plot", w.path("s.png"), "--quiet"});
  ::unsetenv("MOEBENCH_PYTHON");
  CHECK(rc == 0);
  CHECK(fs::exists(w.path("s.json")));
  CHECK_FALSE(fs::exists(w.path("s.png")));
}

TEST_CASE("report command line: --allow-mixed takes one value per flag (or a,b), not the inputs") {
  const char* argv[] = {"moebench", "report",        "--allow-mixed",       "ep",         "a.json",
                        "b.json",   "--allow-mixed", "seq_len,micro_batch", "--baseline", "2"};
  const CliOptions o = parse_command_line(10, argv);
  CHECK(o.command == Command::report);
  CHECK(o.report.inputs == std::vector<std::string>{"a.json", "b.json"});
  CHECK(o.report.allow_mixed == std::vector<std::string>{"ep", "seq_len", "micro_batch"});
  CHECK(o.report.baseline == 2);
  CHECK_FALSE(o.report.claim_tflops.has_value());
}
