#include "harness/output/table.hpp"

#include <string>

#include <doctest/doctest.h>

#include "tests/unit/run_record_fixture.hpp"

using namespace moebench;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string line_of(const std::string& text, const std::string& start) {
  const auto at = text.find(start);
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

}  // namespace

TEST_CASE("table: header, one row per phase and the summary, in friendly units") {
  const std::string t = format_run_table(testing::sample_run_record());
  MESSAGE(t);
  CHECK(has(t, "model deepseek-v3, 4 layers (1 dense, 3 MoE), 4096 tokens/micro-batch"));
  CHECK(has(t, "global batch 4 (1 micro-batch of 1 a rank), pp 1, vp 1"));
  CHECK(has(t, "world 4, ep 2, edp 2, nodes 1 (4 ranks/node), backend cpu, comm mpi"));
  CHECK(has(t, "time(ms)"));
  CHECK(has(t, "busbw(GB/s)"));
  for (std::string_view name : kPhaseNames) CHECK(!line_of(t, "   " + std::string(name)).empty());
  // dispatch: 5 ms exposed of a 102 ms median step, 10 ms busy, 25 MB, 2.5 GB/s algbw, 1.25 GB/s
  // busbw.
  CHECK(line_of(t, "   dispatch") ==
        "   dispatch           5.000    10.000    4.9%               "
        "25.00         2.50         1.25");
  // experts: 6 ms, 2 TFLOP/s, no busy or bandwidth columns.
  CHECK(line_of(t, "   experts") == "   experts            6.000              5.9%    2.000");
  CHECK(has(t, "step time: median 102.000 ms, p95 103.800 ms over 3 steps"));
  CHECK(has(t, "TFLOP/s/GPU: 1.500   tokens/s/GPU: 40157"));  // 16384 / (0.102 s x 4)
  CHECK(has(t, "# compute 80.000 ms, not computing 22.000 ms (step - compute)"));
  CHECK(has(t,
            "# communication: busy 60.000 ms, exposed 30.000 ms, hidden 30.000 ms (50% "
            "overlapped); overlap on, gradient buckets 3 dense + 2 expert"));
  CHECK(has(t, "# verification: 0 wrong of 123456 compared (max rel err 1.2e-06) PASSED"));
}

TEST_CASE("table: verification off") {
  RunRecord r = testing::sample_run_record();
  r.verification.enabled = false;
  CHECK(has(format_run_table(r), "# verification: off\n"));
}

TEST_CASE("table: the line per step names the step, its kind, time and rates") {
  StepProgress p;
  p.kind = "timed";
  p.index = 0;
  p.of = 10;
  p.overall = 5;
  p.total = 14;
  p.step_time_s = 0.1662294;
  p.tflops_per_gpu = 1648.25;
  p.tokens_per_s_per_gpu = 6338.4;
  CHECK(format_step_line(p) ==
        "# step 5/14 timed 1/10: 166.229 ms, 1648.250 TFLOP/s/GPU, 6338 tokens/s/GPU\n");
  p.kind = "warmup";
  p.index = 2;
  p.of = 3;
  CHECK(has(format_step_line(p), "# step 5/14 warmup 3/3: "));
}
