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
  // Without a step breakdown (a record without timed steps' samples): time is the slowest
  // rank's (= max). dispatch: 5 ms exposed of a 102 ms median step, 10 ms busy, 25 MB, 2.5 GB/s
  // algbw, 1.25 GB/s busbw.
  CHECK(line_of(t, "   dispatch") ==
        "   dispatch           5.000    4.9%     5.000    10.000               "
        "25.00         2.50         1.25");
  // experts: 6 ms, 2 TFLOP/s, no busy or bandwidth columns.
  CHECK(line_of(t, "   experts") ==
        "   experts            6.000    5.9%     6.000              2.000");
  CHECK_FALSE(has(t, "   other"));
  CHECK(has(t, "step time: median 102.000 ms, p95 103.800 ms over 3 steps"));
  CHECK(has(t, "TFLOP/s/GPU: 1.500   tokens/s/GPU: 40157"));  // 16384 / (0.102 s x 4)
  // No breakdown: the phases' slowest ranks, said so.
  CHECK(has(t, "# compute 80.000 ms, not computing 22.000 ms (step - compute, from max(ms))"));
  // With one: that rank's own step, whose compute and the rest add up to it.
  RunRecord with = testing::sample_run_record();
  StepBreakdown& b = with.results.breakdown;
  b.rank = 1;
  b.step_time_s = 0.1;
  b.phase_time_s[static_cast<std::size_t>(Phase::attention)] = 0.03;
  b.phase_time_s[static_cast<std::size_t>(Phase::experts)] = 0.04;
  b.phase_time_s[static_cast<std::size_t>(Phase::dispatch)] = 0.01;  // communication
  CHECK(has(format_run_table(with),
            "# compute 70.000 ms, not computing 30.000 ms: rank 1's median step, as time(ms)"));
  CHECK(has(t,
            "# communication: busy 60.000 ms, exposed 30.000 ms, hidden 30.000 ms (50% "
            "overlapped); overlap on, gradient buckets 3 dense + 2 expert"));
  CHECK(has(t, "# verification: 0 wrong of 123456 compared (max rel err 1.2e-06) PASSED"));
}

TEST_CASE("table: the rank that sets the step time, its shares adding up, maxima beside them") {
  RunRecord r = testing::sample_run_record();
  StepBreakdown& b = r.results.breakdown;
  b.rank = 3;
  b.stage = 1;
  b.host = "node-b";
  b.step_time_s = 0.2;
  b.phase_time_s.fill(0.0);
  b.phase_time_s[static_cast<std::size_t>(Phase::experts)] = 0.1;
  b.phase_time_s[static_cast<std::size_t>(Phase::pp_bubble)] = 0.07;
  b.other_s = 0.03;
  const std::string t = format_run_table(r);
  MESSAGE(t);
  CHECK(has(t,
            "# time(ms), share: rank 3 (stage 1, host node-b), which sets the step time, in its "
            "median step (200.000 ms); they add up to it"));
  // Its own 100 ms of experts, 50% of its step; the slowest rank's 6 ms beside it.
  CHECK(line_of(t, "   experts") ==
        "   experts          100.000   50.0%     6.000              2.000");
  CHECK(line_of(t, "   pp_bubble").rfind("   pp_bubble         70.000   35.0%    13.000", 0) == 0);
  CHECK(line_of(t, "   other").rfind("   other             30.000   15.0%", 0) == 0);
  // The share column adds up to 100% (each share rounds by at most 0.05%).
  double sum = 0;
  std::size_t at = t.find("#  phase");
  REQUIRE(at != std::string::npos);
  for (std::size_t line = t.find('\n', at) + 1; line < t.size() && t[line] == ' ';
       line = t.find('\n', line) + 1) {
    sum += std::stod(t.substr(line + 27, 6));
  }
  CHECK(sum == doctest::Approx(100.0).epsilon(0.01));
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

TEST_CASE("table: a line inside a long step says where rank 0 is") {
  PassProgress p;
  p.overall = 2;
  p.total = 13;
  p.kind = "warmup";
  p.index = 1;
  p.of = 3;
  p.since_start_s = 10.04;
  p.done = 6;
  p.passes = 16;
  p.current = PipelineOp{false, 2, 1};
  p.shape = PipelineShape{2, 2, 4};
  CHECK(format_pass_line(p) ==
        "# step 2/13 warmup 2/3: 10.0 s in, rank 0 at pass 7 of 16 (micro-batch 3 of 4, chunk 2 of "
        "2, backward)\n");
  p.done = 16;
  CHECK(format_pass_line(p) ==
        "# step 2/13 warmup 2/3: 10.0 s in, rank 0 past its 16 passes (gradient reduction and "
        "optimizer)\n");
}

TEST_CASE("table: a step's estimate from its first pass counts the fill and drain") {
  // pp 2, vp 2, 4 micro-batches: 3 x (2 x 4 + 2 - 1) = 27 first passes.
  CHECK(estimate_step_s(0.1, PipelineShape{2, 2, 4}) == doctest::Approx(2.7).epsilon(1e-12));
  CHECK(estimate_step_s(0.1, PipelineShape{1, 1, 1}) == doctest::Approx(0.3).epsilon(1e-12));
  CHECK(format_step_estimate(0.1, PipelineShape{2, 2, 4}) ==
        "# a step should take about 2.7 s: 3 x rank 0's first forward pass (0.100 s) x 9 (vp 2 x 4 "
        "micro-batches + pp 2 - 1)\n");
  CHECK(has(format_step_estimate(0.001, PipelineShape{1, 1, 1}), "about 3 ms:"));
  CHECK(has(format_step_estimate(10, PipelineShape{2, 1, 8}), "about 4.5 min:"));
}
