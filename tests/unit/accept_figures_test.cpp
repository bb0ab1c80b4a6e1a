// accept's site figures: --floors read and checked (a typo in a key, a figure of zero, no
// figure at all: each refused with the file named), --baseline's per-SKU medians from a real
// accept.json (accept_json's), and a run's SKU the baseline does not have refused before work.
#include "harness/cli/accept_figures.hpp"

#include <doctest/doctest.h>

#include <fstream>

#include "harness/cli/accept_checks.hpp"
#include "harness/core/error.hpp"
#include "tests/unit/temp_dir.hpp"

namespace moebench {
namespace {

using test::TempDir;

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("accept --floors: the site's floors, each figure optional, anything else refused") {
  TempDir dir;
  const SiteFigures f =
      read_floors(write(dir, "f.json", R"({"gemm_rate": 6e14, "source": "site spec 7"})"));
  CHECK(f.floors);
  CHECK(site_value(f, "gemm_rate", "any GPU") == 6e14);
  CHECK_FALSE(site_value(f, "memory_bandwidth", "any GPU"));
  CHECK(f.source.find("site spec 7") != std::string::npos);
  CHECK_NOTHROW(check_site_skus(f, {"H200", "B200"}));  // a floor for any SKU
  const SiteFigures a =
      read_floors(write(dir, "a.json", R"({"attention_rate": 3e14, "grouped_gemm_rate": 5e14})"));
  CHECK(site_value(a, "attention_rate", "any GPU") == 3e14);
  CHECK(site_value(a, "grouped_gemm_rate", "any GPU") == 5e14);
  CHECK_FALSE(site_value(a, "gemm_rate", "any GPU"));
  CHECK_THROWS_WITH_AS(read_floors(write(dir, "typo.json", R"({"gemm_rat": 6e14})")),
                       doctest::Contains("unknown key 'gemm_rat'"), UsageError);
  CHECK_THROWS_WITH_AS(read_floors(write(dir, "zero.json", R"({"gemm_rate": 0})")),
                       doctest::Contains("floors.schema.json"), UsageError);
  CHECK_THROWS_WITH_AS(read_floors(write(dir, "none.json", R"({"source": "x"})")),
                       doctest::Contains("floors.schema.json"), UsageError);
  CHECK_THROWS_WITH_AS(read_floors(write(dir, "bad.json", "{")), doctest::Contains("not JSON"),
                       UsageError);
}

TEST_CASE("accept --baseline: each figure's median over the baseline's ranks of each SKU") {
  TempDir dir;
  AcceptResult r;
  const double gemm[] = {900e12, 800e12, 1000e12, 500e12};
  for (int i = 0; i < 4; ++i) {
    r.ranks.push_back({i, 0, "a", i < 3 ? "H200" : "H100", "driver 1", 7});
    AcceptCheck c;
    c.name = "gemm_rate";
    c.stage = "gpu";
    c.status = "pass";
    c.rank = i;
    c.node = 0;
    c.measured = gemm[i];
    c.unit = "FLOP/s";
    c.reason = "r";
    r.checks.push_back(c);
    c.name = "attention_rate";  // a third of the GEMM's rate
    c.measured = gemm[i] / 3;
    r.checks.push_back(c);
  }
  r.node_names = node_names(r.ranks);
  const nlohmann::ordered_json meta = {
      {"tool_version", "t"}, {"git_sha", "x"},      {"argv", {"moebench"}}, {"start_time", "t"},
      {"backend", "cuda"},   {"system", "h200"},    {"world", 4},           {"nodes", 1},
      {"floor", 0.8},        {"min_slowdown", 0.1}, {"gemm_n", 8192},       {"duration_s", 0},
      {"inject", ""}};
  const std::string path = write(dir, "accept.json", accept_json(r, meta).dump());
  const SiteFigures f = read_baseline(path);
  CHECK_FALSE(f.floors);                                // expected figures, judged x --floor
  CHECK(site_value(f, "gemm_rate", "H200") == 900e12);  // the median of 900, 800, 1000
  CHECK(site_value(f, "gemm_rate", "H100") == 500e12);
  CHECK(site_value(f, "attention_rate", "H200") == 300e12);
  CHECK_FALSE(site_value(f, "gemm_rate", "B200"));
  CHECK_NOTHROW(check_site_skus(f, {"H200", "H100"}));
  CHECK_THROWS_WITH_AS(check_site_skus(f, {"H200", "B200"}),
                       doctest::Contains("_rate for B200 (it has H100, H200)"), UsageError);
  CHECK_THROWS_WITH_AS(read_baseline(write(dir, "run.json", R"({"kind": "moebench.run"})")),
                       doctest::Contains("accept.schema.json"), UsageError);
}

}  // namespace
}  // namespace moebench
