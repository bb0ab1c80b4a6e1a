#include "harness/scaling/scaling_text.hpp"

#include <doctest/doctest.h>

#include "tests/unit/scaling_fixture.hpp"

using namespace moebench;
using moebench::testing::scaling_point;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

ScalingResult sample(std::vector<RunPoint>& runs) {
  runs = {scaling_point(1, 10), scaling_point(2, 9), scaling_point(4, 8)};
  runs[2].verification_enabled = false;
  ScalingOptions o;
  o.min_tflops = 8.5;
  return compute_scaling(runs, o);
}

}  // namespace

TEST_CASE("terminal table: one row per GPU count with the figures in readable units") {
  std::vector<RunPoint> runs;
  const ScalingResult r = sample(runs);
  const std::string t = scaling_terminal(r, runs.size());
  INFO(t);
  CHECK(contains(t, "# moebench report: tiny, 3 sizes from 3 runs\n"));
  CHECK(contains(t, "GPUs  nodes  runs  step (ms)"));
  CHECK(contains(t, "efficiency  exposed comm"));
  // 4 GPUs: step 1/8 s = 125 ms, 8 TFLOP/s, 1024 tokens/s, efficiency 0.8, 20% exposed,
  // all-to-all 15 GB/s, no grad-reduce phase, not verified, min_tflops failed
  CHECK(contains(t,
                 "      4      1     1    125.000       -            8          1024       "
                 "0.800         20.0%                15                  -  not_run       "
                 "FAIL: min_tflops\n"));
  CHECK(contains(t,
                 "# FAIL  min_tflops: TFLOP/s per GPU at 4 GPUs: 8 < 8.5, margin -0.5 "
                 "(-5.88%)\n"));
  CHECK(contains(t, "# verdict: FAIL\n"));
  CHECK(contains(t, "# warning: verification not run"));
}

TEST_CASE("verdict_cell: PASS, the failed checks, or - without verdicts") {
  std::vector<RunPoint> runs;
  const ScalingResult r = sample(runs);
  CHECK(verdict_cell(r, 1) == "PASS");
  CHECK(verdict_cell(r, 4) == "FAIL: min_tflops");
  CHECK(verdict_cell(r, 3) == "-");
}

TEST_CASE("markdown: the table, the phases, the verdicts, the inputs with SHA-256, the warnings") {
  std::vector<RunPoint> runs;
  const ScalingResult r = sample(runs);
  const std::string md = scaling_markdown(r, runs, {"0.1.0", "abc", true, {}, "2025-01-01"});
  INFO(md);
  CHECK(contains(md, "# Scaling report: tiny\n"));
  CHECK(contains(md, "- **verdict: FAIL**\n"));
  CHECK(contains(md, "| GPUs | nodes | runs | step (ms) |"));
  CHECK(contains(md, "|---|---:|---:|"));
  CHECK(contains(md,
                 "| 4 | 1 | 1 | 125.000 | - | 8 | 1024 | 0.800 | 20.0% | 15 | - | not_run | "
                 "FAIL: min_tflops |"));
  CHECK(contains(md, "| min_tflops | 4 | 8 | >= 8.5 | -0.5 (-5.88%) | **FAIL** |"));
  CHECK(contains(md, "| run-4.json | 4 | 1 | job4 | node0 |"));
  CHECK(contains(md, "`" + runs[0].sha256 + "`"));
  CHECK(contains(md, "## Warnings\n\n- verification not run"));
  CHECK(contains(md, "moebench 0.1.0 (abc, dirty), 2025-01-01"));
}
