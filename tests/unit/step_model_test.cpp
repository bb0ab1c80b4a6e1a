// The step-time model's composition on hand-computed cases: one GEMM, one transfer, one
// all-to-all over NVLink domains, a ring all-reduce, the 1F1B and interleaved schedules whose
// step time is known in closed form, and what of the data-parallel exchanges the passes hide.
#include "workloads/predict/step_model.hpp"

#include <cmath>

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

using namespace moebench;

// Sums and products of a few exact decimals: 1e-12 relative covers their rounding.
constexpr double kEps = 1e-12;

TEST_CASE("step model: one GEMM is its FLOPs over the peak times the efficiency") {
  // 8192^3 x 2 FLOPs at 989 TFLOP/s and 80%: 1.0995e12 / 7.912e14 s.
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  CHECK(compute_time_s(flops, 989e12, 0.8) ==
        doctest::Approx(flops / (989e12 * 0.8)).epsilon(kEps));
  CHECK(compute_time_s(flops, 989e12, 0.8) == doctest::Approx(1.38962e-3).epsilon(1e-5));
  CHECK_THROWS_AS(compute_time_s(flops, 989e12, 0), UsageError);
  CHECK_THROWS_AS(compute_time_s(flops, 989e12, 1.5), UsageError);
}

TEST_CASE("step model: a transfer is its latency plus its bytes over the bandwidth") {
  const LinkCost ib{5e-6, 50e9};
  CHECK(transfer_time_s(ib, 0) == doctest::Approx(5e-6).epsilon(kEps));
  CHECK(transfer_time_s(ib, 1e9) == doctest::Approx(5e-6 + 0.02).epsilon(kEps));
}

TEST_CASE("step model: an all-to-all splits into NVLink and scale-out traffic") {
  const LinkCost nvlink{2e-6, 900e9}, ib{5e-6, 100e9};
  // EP 32 in domains of 8 (HGX): 7 peers inside, 24 outside, 1/32 of the bytes each.
  const AllToAllCost hgx = alltoall_cost(32e6, 32, 8, nvlink, ib);
  CHECK(hgx.in_domain_bytes == doctest::Approx(7e6).epsilon(kEps));
  CHECK(hgx.cross_domain_bytes == doctest::Approx(24e6).epsilon(kEps));
  // Outside is the slower part: 24 latencies + 24 MB at 100 GB/s.
  CHECK(hgx.time_s == doctest::Approx(24 * 5e-6 + 24e6 / 100e9).epsilon(kEps));
  // EP 32 inside an NVL72 rack: all of it over NVLink.
  const AllToAllCost nvl72 = alltoall_cost(32e6, 32, 72, nvlink, ib);
  CHECK(nvl72.cross_domain_bytes == 0);
  CHECK(nvl72.in_domain_bytes == doctest::Approx(31e6).epsilon(kEps));
  CHECK(nvl72.time_s == doctest::Approx(31 * 2e-6 + 31e6 / 900e9).epsilon(kEps));
  CHECK(alltoall_cost(32e6, 1, 8, nvlink, ib).time_s == 0);  // a group of one moves nothing
}

TEST_CASE("step model: an exchange under compute costs its SMs' share, or what it outlasts") {
  // 4 ms of exchanges under 10 ms of compute, their kernels on 32 of 160 SMs (0.2): the compute
  // gets 0.8 of the GPU for 4 ms, so it ends at 10 + 4 x 0.2 = 10.8 ms: 0.8 ms added.
  CHECK(overlapped_exchange_s(4e-3, 10e-3, 0.2) == doctest::Approx(0.8e-3).epsilon(kEps));
  // Under 3 ms of compute the exchanges outlast it (3 + 0.8 < 4): 1 ms added, the exchange's end.
  CHECK(overlapped_exchange_s(4e-3, 3e-3, 0.2) == doctest::Approx(1e-3).epsilon(kEps));
  // Exchanges that take no SMs from the compute are free under it.
  CHECK(overlapped_exchange_s(4e-3, 10e-3, 0.0) == 0.0);
  CHECK_THROWS_AS(overlapped_exchange_s(4e-3, 10e-3, 1.0), UsageError);
}

TEST_CASE("step model: a ring all-reduce takes 2 (n - 1) steps of bytes / n") {
  const LinkCost link{1e-6, 100e9};
  CHECK(ring_allreduce_time_s(8e9, 8, link) ==
        doctest::Approx(14 * (1e-6 + 1e9 / 100e9)).epsilon(kEps));
  CHECK(ring_allreduce_time_s(8e9, 1, link) == 0);
}

TEST_CASE("step model: 1F1B takes (m + P - 1) (f + b), its bubble (P - 1) / m") {
  // P = 4 stages of equal passes, m = 8 micro-batches, no transfer time.
  const PipelineShape shape{4, 1, 8};
  const PipelineTimes t{{1, 1, 1, 1}, {2, 2, 2, 2}, 0};
  const SimulatedPipeline s = simulate_pipeline(shape, t);
  CHECK(s.step_s == doctest::Approx((8 + 4 - 1) * 3.0).epsilon(kEps));
  for (double busy : s.busy_s) CHECK(busy == doctest::Approx(8 * 3.0).epsilon(kEps));
  CHECK((s.step_s - s.busy_s[0]) / s.busy_s[0] ==
        doctest::Approx(theoretical_bubble(shape)).epsilon(kEps));
}

TEST_CASE("step model: transfers delay the fill and the drain (a timeline worked by hand)") {
  // P = 2, m = 2, forward 1 s, backward 2 s, 0.5 s a transfer. Rank 0 runs F0 F1 B0 B1, rank 1
  // F0 B0 F1 B1: rank 0 F0 [0, 1], F1 [1, 2]; rank 1 F0 [1.5, 2.5], B0 [2.5, 4.5], F1 [4.5, 5.5],
  // B1 [5.5, 7.5]; rank 0 B0 [5, 7] (its gradient arrives at 5), B1 [8, 10].
  const SimulatedPipeline s = simulate_pipeline({2, 1, 2}, {{1, 1}, {2, 2}, 0.5});
  CHECK(s.end_s[1] == doctest::Approx(7.5).epsilon(kEps));
  CHECK(s.step_s == doctest::Approx(10).epsilon(kEps));
  // Without transfer time: (m + P - 1) (f + b) = 9.
  CHECK(simulate_pipeline({2, 1, 2}, {{1, 1}, {2, 2}, 0}).step_s ==
        doctest::Approx(9).epsilon(kEps));
}

TEST_CASE("step model: interleaving V chunks cuts the bubble to (P - 1) / (V m)") {
  // P = 2, V = 2, m = 4; each chunk half a stage's work (0.5 forward, 1 backward).
  const PipelineShape shape{2, 2, 4};
  const PipelineTimes t{{0.5, 0.5, 0.5, 0.5}, {1, 1, 1, 1}, 0};
  const SimulatedPipeline s = simulate_pipeline(shape, t);
  const double ideal = 4 * 2 * 1.5;  // m x V chunks of 1.5 s a rank
  CHECK(s.busy_s[0] == doctest::Approx(ideal).epsilon(kEps));
  CHECK(s.step_s == doctest::Approx(ideal * (1 + theoretical_bubble(shape))).epsilon(kEps));
}

TEST_CASE("step model: an uneven stage sets the pace") {
  // P = 2, m = 4: stage 1's passes twice stage 0's; the step is its work plus the fill.
  const SimulatedPipeline s = simulate_pipeline({2, 1, 4}, {{1, 2}, {2, 4}, 0});
  CHECK(s.busy_s[1] == doctest::Approx(24).epsilon(kEps));
  CHECK(s.step_s == doctest::Approx(1 + 24 + 2).epsilon(kEps));  // stage 0's first forward,
  // stage 1's 4 x (2 + 4), stage 0's last backward
}

TEST_CASE("step model: DeepEP's exchange sends a token once per rank and once per domain") {
  const LinkCost nvlink{0, 100e9}, ib{0, 10e9};
  // One expert a token (k 1) among 4 ranks in domains of 2: a quarter of the tokens stay, a
  // quarter go to the domain's other rank over NVLink, half cross once to the other domain.
  const AllToAllCost one = dedup_alltoall_cost(1000, 1, 2.0, 4, 2, nvlink, ib);
  CHECK(one.in_domain_bytes == doctest::Approx(0.25 * 1000 * 2).epsilon(kEps));
  CHECK(one.cross_domain_bytes == doctest::Approx(0.5 * 1000 * 2).epsilon(kEps));
  CHECK(one.time_s == doctest::Approx(1000.0 / 10e9).epsilon(kEps));  // 1000 B over IB
  // Top-8 among 8 ranks in one domain: a rank is hit with 1 - (7/8)^8 = 11012415 / 16777216, so 7 x
  // that rows a token leave it, not the 7 of one row per expert.
  const AllToAllCost hgx = dedup_alltoall_cost(1, 8, 1.0, 8, 8, nvlink, ib);
  CHECK(hgx.in_domain_bytes == doctest::Approx(7 * 11012415.0 / 16777216.0).epsilon(kEps));
  CHECK(hgx.cross_domain_bytes == 0.0);
  CHECK(hgx.in_domain_bytes < alltoall_cost(8, 8, 8, nvlink, ib).in_domain_bytes);
  CHECK(dedup_alltoall_cost(100, 8, 1.0, 1, 8, nvlink, ib).time_s == 0.0);
}

TEST_CASE("step model: expert parallelism across HGX nodes, what crosses the NIC and NVLink") {
  // EP 32 over four 8-GPU nodes (Megatron-LM's B200 row), top-8, one row of 7,168 BF16 values a
  // (token, destination), 4,096 tokens: NVLink 900 GB/s at 0.66, one 400 Gb/s NIC a GPU at 0.86.
  const LinkCost nvlink{0, 900e9 * 0.66}, nic{0, 50e9 * 0.86};
  const double row = 7168 * 2.0, tokens = 4096;
  const double q = 1 - std::pow(31.0 / 32, 8);          // a given rank among 32 is hit: 0.2243
  const double nodes = 3 * (1 - std::pow(0.75, 8));     // remote nodes hit a token: 2.6997
  REQUIRE(q == doctest::Approx(0.2243).epsilon(1e-4));  // to the digits written
  REQUIRE(nodes == doctest::Approx(2.6997).epsilon(1e-4));
  const AllToAllCost d = dedup_alltoall_cost(tokens, 8, row, 32, 8, nvlink, nic);
  // DeepEP and HybridEP: once to each remote node hit (to the peer of the same local index), then
  // forwarded there over NVLink to the other ranks hit: 2.70 rows a token over the NIC, the 7 q
  // of its own node's ranks plus the 24 q - 2.70 it forwards for others over NVLink.
  CHECK(d.cross_domain_bytes == doctest::Approx(tokens * row * nodes).epsilon(kEps));
  CHECK(d.in_domain_bytes ==
        doctest::Approx(tokens * row * (7 * q + 24 * q - nodes)).epsilon(kEps));
  // The NIC sets the time: 158.5 MB at 43 GB/s, 3.69 ms (NVLink's 249.8 MB take 0.42 ms).
  CHECK(d.time_s == doctest::Approx(tokens * row * nodes / (50e9 * 0.86)).epsilon(kEps));
  CHECK(d.time_s == doctest::Approx(3.687e-3).epsilon(1e-3));  // the 4 digits written
  // moebench's step and Megatron's alltoall dispatcher: a row per (token, expert), 24 of 32 ranks
  // off the node: 6 rows a token over the NIC, 2.2 times DeepEP's.
  const AllToAllCost a = alltoall_cost(tokens * 8 * row, 32, 8, nvlink, nic);
  CHECK(a.cross_domain_bytes == doctest::Approx(tokens * 8 * row * 24 / 32).epsilon(kEps));
  CHECK(a.cross_domain_bytes / d.cross_domain_bytes == doctest::Approx(6 / nodes).epsilon(kEps));
}

TEST_CASE("step model: 1F1B hides a rank's gradient reduction behind its last backward only") {
  // P = 4, m = 8, forward 1 s, backward 2 s: rank 0's last backward runs [31, 33] of the
  // (8 + 3) x 3 = 33 s step. Its reduction starts with it, so 5 s of reduction leave 5 - 2 = 3 s
  // after it (the 3 cool-down backwards before it do not count: the reduction waits for the last
  // micro-batch's gradients). Its all-gather hides behind its first forward, [0, 1].
  const PipelineShape shape{4, 1, 8};
  const SimulatedPipeline s = simulate_pipeline(shape, {{1, 1, 1, 1}, {2, 2, 2, 2}, 0});
  REQUIRE(s.end_s[0] == doctest::Approx(33).epsilon(kEps));
  const DataParallelExposure e = exposed_data_parallel(shape, s, 0, {5}, {2.5});
  CHECK(e.reduce_s == doctest::Approx(3).epsilon(kEps));
  CHECK(e.gather_s == doctest::Approx(1.5).epsilon(kEps));
  const DataParallelExposure hidden = exposed_data_parallel(shape, s, 0, {2}, {1});
  CHECK(hidden.reduce_s == 0.0);
  CHECK(hidden.gather_s == 0.0);
}

TEST_CASE("step model: interleaved chunks reduce and gather one after another, as reached") {
  // P = 2, V = 2, m = 4: rank 0 runs F(mb, chunk) F00 F10 F01 F11 F20 B01 F30 B11 F21 B00 F31 B10
  // B21 B31 B20 B30. Timed by hand, one second a pass with no waits: chunk 1's last backward
  // (B31) starts at 13, chunk 0's (B30) at 15, the rank ends at 16; chunk 0's first forward ends
  // at 1, chunk 1's (F01) at 3.
  const PipelineShape shape{2, 2, 4};
  const std::vector<PipelineOp> ops = pipeline_schedule(shape, 0);
  REQUIRE(ops.size() == 16);
  REQUIRE(ops[2] == PipelineOp{true, 0, 1});
  REQUIRE(ops[13] == PipelineOp{false, 3, 1});
  REQUIRE(ops[15] == PipelineOp{false, 3, 0});
  SimulatedPipeline s;
  s.end_s = {16, 16};
  s.pass_start_s.resize(2);
  s.pass_end_s.resize(2);
  for (int i = 0; i < 16; ++i) {
    s.pass_start_s[0].push_back(i);
    s.pass_end_s[0].push_back(i + 1);
  }
  // Reductions: chunk 1's 2.5 s from 13 end at 15.5, chunk 0's 1 s after it at 16.5 (not from
  // its own start at 15): 0.5 s past the rank's end.
  CHECK(exposed_data_parallel(shape, s, 0, {1, 2.5}, {0, 0}).reduce_s ==
        doctest::Approx(0.5).epsilon(kEps));
  // All-gathers from the step's start: chunk 0's 1.5 s is due at 1 (0.5 s late), chunk 1's then
  // ends at 1.5 + 2.5 = 4, due at 3 (1 s late): the forwards wait the larger, 1 s.
  CHECK(exposed_data_parallel(shape, s, 0, {0, 0}, {1.5, 2.5}).gather_s ==
        doctest::Approx(1).epsilon(kEps));
  CHECK(exposed_data_parallel(shape, s, 0, {0, 0}, {1.5, 1}).gather_s ==
        doctest::Approx(0.5).epsilon(kEps));
  CHECK_THROWS(exposed_data_parallel(shape, s, 0, {1}, {1}));  // one time per chunk
}
