// find_stragglers on recorded figures: the per-rank phase medians (ms) of two 8-rank runs of
// deepseek-v3-tiny on this 2-core machine (`mpirun -np 8 moebench run --preset deepseek-v3-tiny
// --ep 8 --steps 10`), one clean and one with --inject slow:rank=5,factor=4; and hand-made cases
// for the rules (stages, FLOPs, thresholds, nodes).
#include "harness/measure/health.hpp"

#include <doctest/doctest.h>

#include <array>

namespace moebench {
namespace {

constexpr std::array<Phase, 8> kRecorded = {
    Phase::attention, Phase::dense_mlp,     Phase::router, Phase::permute,
    Phase::experts,   Phase::shared_expert, Phase::head,   Phase::optimizer};
using Row = std::array<double, 8>;

constexpr Row kClean[8] = {
    {17.48, 3.59, 0.611, 1.447, 13.95, 3.782, 12.88, 44.12},
    {14, 3.56, 0.6179, 1.488, 15.38, 3.752, 9.193, 45.06},
    {15.09, 3.703, 0.5948, 1.49, 13.83, 3.72, 11.51, 37.46},
    {13.96, 3.635, 0.6369, 1.504, 17, 3.702, 11.5, 38.15},
    {15.1, 3.507, 0.665, 1.51, 16.05, 3.764, 13.53, 45.64},
    {17.6, 3.504, 0.6218, 1.443, 14.15, 3.748, 12.56, 40.85},
    {14.83, 3.642, 0.6179, 1.487, 16.12, 3.722, 14.52, 39.96},
    {13.06, 3.494, 0.6313, 1.46, 16.2, 3.701, 10.41, 38.02},
};
constexpr Row kSlow5[8] = {
    {14.55, 15.57, 0.6594, 1.511, 14.19, 3.817, 11.52, 39.14},
    {14.86, 11.15, 0.6517, 1.491, 18.94, 3.996, 13.14, 39.43},
    {19.93, 5.718, 0.6429, 1.517, 15.95, 3.961, 12.54, 46.56},
    {13.07, 6.608, 0.6432, 1.537, 21.32, 4.873, 13.14, 29.21},
    {13.89, 7.393, 0.6757, 1.499, 20.64, 4.297, 11.39, 44.32},
    {34.94, 11.83, 2.708, 11.21, 55.32, 17.52, 25.57, 135.9},
    {22.07, 3.569, 0.6445, 1.474, 15.03, 3.78, 8.653, 44.82},
    {16.52, 3.485, 0.6277, 1.509, 15.6, 3.75, 14.69, 32.92},
};

// The compute totals summarize_run sets, from the phases; each rank's own spread over its steps
// is `spread` times its median, in every phase and the total.
void finish(std::vector<RankResult>& ranks, double spread) {
  for (RankResult& r : ranks) {
    r.compute_time_s = r.compute_flops = 0;
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      if (!is_compute(static_cast<Phase>(p))) continue;
      r.compute_time_s += r.phase_time_s[p];
      r.compute_flops += r.phase_flops[p];
      r.phase_spread_s[p] = spread * r.phase_time_s[p];
    }
    r.compute_spread_s = spread * r.compute_time_s;
  }
}

// Ranks r on node r / per_node, one stage.
std::vector<RankResult> ranks_from(const Row* rows, int n, int per_node, double spread) {
  std::vector<RankResult> out;
  for (int r = 0; r < n; ++r) {
    RankResult x;
    x.rank = r;
    x.node = r / per_node;
    x.host = "node-" + std::to_string(x.node);
    x.local_rank = r % per_node;
    for (std::size_t i = 0; i < kRecorded.size(); ++i) {
      const auto p = static_cast<std::size_t>(kRecorded[i]);
      x.phase_time_s[p] = rows[r][i] * 1e-3;
    }
    out.push_back(x);
  }
  finish(out, spread);
  return out;
}

TEST_CASE("health: the recorded clean run names nobody") {
  // Each rank's spread over its steps, 10% of its median, is what the clean run's ranks showed.
  const HealthResult h = find_stragglers(ranks_from(kClean, 8, 2, 0.10), {6.0, kHostMinSlowdown});
  CHECK(h.ranks_compared == 8);
  CHECK(h.note.empty());
  CHECK(h.suspects.empty());
  CHECK(h.nodes.empty());
}

TEST_CASE("health: one phase slow on one rank while its total is in line is not a fault") {
  // The clean run with rank 0's dense MLP 4.9x the median, as one clean 8-rank run here showed.
  std::vector<RankResult> r = ranks_from(kClean, 8, 2, 0.10);
  r[0].phase_time_s[static_cast<std::size_t>(Phase::dense_mlp)] *= 4.9;
  finish(r, 0.10);
  CHECK(find_stragglers(r, {6.0, kHostMinSlowdown}).suspects.empty());
}

TEST_CASE("health: the recorded run with rank 5 slowed 4x names rank 5 and only rank 5") {
  const HealthResult h = find_stragglers(ranks_from(kSlow5, 8, 2, 0.10), {6.0, kHostMinSlowdown});
  REQUIRE(h.suspects.size() >= 2);
  CHECK(h.suspects[0].metric == kComputeMetric);  // the total first, then where the time went
  CHECK(h.suspects[0].slowdown == doctest::Approx(2.9).epsilon(0.05));  // 295 ms / ~101 ms
  CHECK(h.suspect_ranks() == 1);
  for (const Suspect& s : h.suspects) {
    CAPTURE(s.metric);
    CHECK(s.rank == 5);
    CHECK(s.value > s.median * 1.1);
    CHECK(s.slowdown == doctest::Approx(s.value / s.median));
    CHECK(s.reason.find(s.metric) == 0);
  }
  // Rank 5 lives on node 2 (two ranks per node): one node entry, counting every suspect.
  REQUIRE(h.nodes.size() == 1);
  CHECK(h.nodes[0].node == 2);
  CHECK(h.nodes[0].host == "node-2");
  CHECK(h.nodes[0].ranks == std::vector<int>{5});
}

TEST_CASE("health: both thresholds must be passed") {
  // Seven steady ranks at 10 ms and one at 11.5 ms: 15% slower, far beyond a spread of zero.
  std::vector<RankResult> r(8);
  for (int i = 0; i < 8; ++i) {
    r[i].rank = i;
    r[i].phase_time_s[static_cast<std::size_t>(Phase::experts)] = i == 3 ? 11.5e-3 : 10e-3;
  }
  finish(r, 0.0);
  CHECK(find_stragglers(r, {6.0, 0.10}).suspects.size() == 2);  // compute, and experts
  CHECK(find_stragglers(r, {6.0, 0.20}).suspects.empty());      // not 20% slower
  // A noisy machine: each rank's own steps spread 1 ms, so 1.5 ms is within 6 of those.
  finish(r, 0.1);
  CHECK(find_stragglers(r, {6.0, 0.10}).suspects.empty());
  CHECK(find_stragglers(r, {1.0, 0.10}).suspects.size() == 2);
}

TEST_CASE("health: per FLOP where every rank counted FLOPs, so unequal work is not slowness") {
  // Rank 2 has twice the experts' work (routing) and takes twice as long: not a suspect. Rank 3
  // has the same work as most and takes twice as long: a suspect, judged against 10 ms.
  std::vector<RankResult> r(6);
  const auto e = static_cast<std::size_t>(Phase::experts);
  for (int i = 0; i < 6; ++i) {
    r[i].rank = i;
    r[i].phase_flops[e] = i == 2 ? 2e9 : 1e9;
    r[i].phase_time_s[e] = i == 2 || i == 3 ? 20e-3 : 10e-3;
  }
  finish(r, 0.0);
  const HealthResult h = find_stragglers(r, {});
  REQUIRE(h.suspects.size() == 2);
  for (const Suspect& s : h.suspects) {
    CHECK(s.rank == 3);
    CHECK(s.median == doctest::Approx(10e-3));
    CHECK(s.slowdown == doctest::Approx(2.0));
    CHECK(s.reason.find("for its FLOPs") != std::string::npos);
  }
  CHECK(h.suspects[1].metric == "experts");
}

TEST_CASE("health: ranks are compared within their pipeline stage, three or more of them") {
  // Stage 1's ranks run the head and take longer there; within each stage all agree.
  std::vector<RankResult> r(8);
  const auto head = static_cast<std::size_t>(Phase::head);
  for (int i = 0; i < 8; ++i) {
    r[i].rank = i;
    r[i].stage = i / 4;
    r[i].phase_time_s[head] = r[i].stage == 1 ? 30e-3 : 1e-3;
  }
  finish(r, 0.0);
  CHECK(find_stragglers(r, {}).suspects.empty());
  r[6].phase_time_s[head] = 60e-3;
  finish(r, 0.0);
  const HealthResult h = find_stragglers(r, {});
  REQUIRE(h.suspects.size() == 2);
  CHECK(h.suspects[0].rank == 6);
  CHECK(h.suspects[0].reason.find("stage 1") != std::string::npos);
  // Two ranks per stage: nobody is the odd one out, and the note says so.
  std::vector<RankResult> pairs(4);
  for (int i = 0; i < 4; ++i) {
    pairs[i].rank = i;
    pairs[i].stage = i / 2;
    pairs[i].phase_time_s[head] = i == 1 ? 1.0 : 1e-3;
  }
  finish(pairs, 0.0);
  const HealthResult none = find_stragglers(pairs, {});
  CHECK(none.suspects.empty());
  CHECK(none.ranks_compared == 0);
  CHECK(none.note.find("nothing to compare") != std::string::npos);
}

TEST_CASE("health: communication and wait phases are not judged") {
  // A slow rank makes the others wait: their comm_wait and dispatch grow, and that is no fault.
  std::vector<RankResult> r(4);
  for (int i = 0; i < 4; ++i) {
    r[i].rank = i;
    r[i].phase_time_s[static_cast<std::size_t>(Phase::comm_wait)] = i == 0 ? 1.0 : 1e-3;
    r[i].phase_time_s[static_cast<std::size_t>(Phase::dispatch)] = i == 0 ? 1.0 : 1e-3;
    r[i].phase_time_s[static_cast<std::size_t>(Phase::attention)] = 1e-3;
  }
  finish(r, 0.0);
  CHECK(find_stragglers(r, {}).suspects.empty());
}

}  // namespace
}  // namespace moebench
