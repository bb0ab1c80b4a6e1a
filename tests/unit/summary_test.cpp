// summarize_run on hand-made samples: the slowest rank per step, medians, per-rank means of FLOPs
// and bytes, bandwidths, exposed communication, per-rank medians; flatten/unflatten.
#include "harness/measure/summary.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

constexpr auto at(Phase p) {
  return static_cast<std::size_t>(p);
}

StepSample sample(double step, double attention, double dispatch, double flops, double bytes,
                  int group) {
  StepSample s;
  s.step_time_s = step;
  s.time_s[at(Phase::attention)] = attention;
  s.time_s[at(Phase::dispatch)] = dispatch;
  s.busy_s[at(Phase::dispatch)] = 2 * dispatch;  // half of the all-to-all hidden behind compute
  s.flops[at(Phase::attention)] = flops;
  s.bytes[at(Phase::dispatch)] = bytes;
  s.bus_bytes[at(Phase::dispatch)] = bytes / 2;
  s.group_size[at(Phase::dispatch)] = group;
  return s;
}

std::vector<RankSamples> two_ranks() {
  RankSamples a;
  a.rank = 0;
  a.host = "a";
  a.node = 0;
  a.steps = {sample(1.0, 0.5, 0.1, 100, 1000, 2), sample(2.0, 0.5, 0.2, 100, 1000, 2),
             sample(3.0, 0.5, 0.3, 100, 1000, 2)};
  RankSamples b;
  b.rank = 1;
  b.host = "b";
  b.node = 1;
  b.steps = {sample(2.0, 0.25, 0.2, 300, 3000, 4), sample(1.0, 1.0, 0.1, 300, 3000, 4),
             sample(4.0, 0.75, 0.1, 300, 3000, 4)};
  return {a, b};
}

// Inputs are short sums of exact binary fractions and small integers: 1e-12 relative is ample.
constexpr double kEps = 1e-12;

TEST_CASE("summarize_own: rank 0's phases with the agreed step times") {
  const RankSamples own = two_ranks().front();
  // The slowest rank's times as the ranks agreed on them: the step time and the rates follow
  // them, the phases and the per-rank entry are rank 0's own.
  const RunResults r = summarize_own(own, {2.0, 4.0, 4.0}, 6.0, 8e12);
  CHECK(r.step_times_s == std::vector<double>{2.0, 4.0, 4.0});
  CHECK(r.step_time_s.median == doctest::Approx(4.0).epsilon(kEps));
  CHECK(r.tflops_per_gpu == doctest::Approx(2.0).epsilon(kEps));        // 8e12 / 4 s / 1e12
  CHECK(r.tokens_per_s_per_gpu == doctest::Approx(1.5).epsilon(kEps));  // 6 / 4 s
  REQUIRE(r.per_rank.size() == 1);
  CHECK(r.per_rank[0].rank == 0);
  CHECK(r.per_rank[0].step_time_s == doctest::Approx(2.0).epsilon(kEps));  // its own median
  CHECK(r.phases[at(Phase::attention)].time_s.median == doctest::Approx(0.5).epsilon(kEps));
  CHECK(r.exposed_communication_s == doctest::Approx(4.0 - r.compute_time_s).epsilon(kEps));
  CHECK_THROWS_AS(summarize_own(own, {2.0}, 6.0, 8e12), RuntimeError);
}

TEST_CASE("summarize_run takes each step's slowest rank and the medians over steps") {
  const RunResults r = summarize_run(two_ranks(), 6.0, 8e12);
  // Slowest per step: max(1, 2), max(2, 1), max(3, 4).
  CHECK(r.step_times_s == std::vector<double>{2.0, 2.0, 4.0});
  CHECK(r.step_time_s.median == doctest::Approx(2.0).epsilon(kEps));
  CHECK(r.step_time_s.max == doctest::Approx(4.0).epsilon(kEps));
  CHECK(r.step_time_s.count == 3);
  CHECK(r.tflops_per_gpu == doctest::Approx(4.0).epsilon(kEps));        // 8e12 / 2 s / 1e12
  CHECK(r.tokens_per_s_per_gpu == doctest::Approx(3.0).epsilon(kEps));  // 6 / 2 s

  REQUIRE(r.phases.size() == kPhaseCount);
  for (std::size_t p = 0; p < kPhaseCount; ++p) CHECK(r.phases[p].phase == static_cast<Phase>(p));
  const PhaseResult& att = r.phases[at(Phase::attention)];
  // Slowest per step: 0.5, 1.0, 0.75 -> median 0.75.
  CHECK(att.time_s.median == doctest::Approx(0.75).epsilon(kEps));
  CHECK(att.flops == doctest::Approx(200.0).epsilon(kEps));  // mean of 100 and 300
  CHECK(att.flop_rate == doctest::Approx(200.0 / 0.75).epsilon(kEps));
  CHECK(att.algbw == 0.0);

  const PhaseResult& dis = r.phases[at(Phase::dispatch)];
  // Slowest per step: 0.2, 0.2, 0.3 -> median 0.2.
  CHECK(dis.time_s.median == doctest::Approx(0.2).epsilon(kEps));
  CHECK(dis.bytes == doctest::Approx(2000.0).epsilon(kEps));
  // Busy, the slowest rank's per step: 0.4, 0.4, 0.6 -> median 0.4; bandwidths divide by it.
  CHECK(dis.busy_s.median == doctest::Approx(0.4).epsilon(kEps));
  CHECK(dis.busy_s.max == doctest::Approx(0.6).epsilon(kEps));
  CHECK(dis.algbw == doctest::Approx(2000.0 / 0.4).epsilon(kEps));
  CHECK(dis.busbw == doctest::Approx(1000.0 / 0.4).epsilon(kEps));
  CHECK(dis.group_size == 4);
  CHECK(dis.flop_rate == 0.0);

  // A phase nobody timed: zeros, no division by zero.
  const PhaseResult& gr = r.phases[at(Phase::grad_reduce)];
  CHECK(gr.time_s.median == 0.0);
  CHECK(gr.algbw == 0.0);
  CHECK(gr.busbw == 0.0);

  CHECK(r.compute_time_s == doctest::Approx(0.75).epsilon(kEps));
  CHECK(r.communication_time_s == doctest::Approx(0.2).epsilon(kEps));
  // Exposed communication: the median step minus the compute phases' medians.
  CHECK(r.exposed_communication_s == doctest::Approx(2.0 - 0.75).epsilon(kEps));
  // Overlap: busy 0.4 of which the compute stream waited 0.2.
  CHECK(r.overlap.busy_s == doctest::Approx(0.4).epsilon(kEps));
  CHECK(r.overlap.exposed_s == doctest::Approx(0.2).epsilon(kEps));
  CHECK(r.overlap.hidden_s == doctest::Approx(0.2).epsilon(kEps));
  CHECK(r.overlap.fraction == doctest::Approx(0.5).epsilon(kEps));
  // Compute phases have no busy time.
  CHECK(att.busy_s.count == 0);

  REQUIRE(r.per_rank.size() == 2);
  CHECK(r.per_rank[0].rank == 0);
  CHECK(r.per_rank[0].host == "a");
  CHECK(r.per_rank[1].node == 1);
  CHECK(r.per_rank[0].step_time_s == doctest::Approx(2.0).epsilon(kEps));  // median 1, 2, 3
  CHECK(r.per_rank[1].step_time_s == doctest::Approx(2.0).epsilon(kEps));  // median 2, 1, 4
  CHECK(r.per_rank[1].phase_time_s[at(Phase::attention)] ==
        doctest::Approx(0.75).epsilon(kEps));  // median 0.25, 1, 0.75
  CHECK(r.per_rank[0].phase_time_s[at(Phase::dispatch)] == doctest::Approx(0.2).epsilon(kEps));
}

TEST_CASE("summarize_run clamps exposed communication at zero") {
  // Compute phases longer than the step (overlapping timers) must not give a negative value.
  RankSamples a;
  a.steps = {sample(1.0, 1.5, 0.1, 1, 1, 1)};
  const RunResults r = summarize_run({a}, 1.0, 1.0);
  CHECK(r.exposed_communication_s == 0.0);
}

TEST_CASE("summarize_run: exposed above busy (host-side counts exchange) hides nothing") {
  RankSamples a;
  StepSample s = sample(1.0, 0.5, 0.3, 1, 1, 1);
  s.busy_s[at(Phase::dispatch)] = 0.25;
  a.steps = {s};
  const RunResults r = summarize_run({a}, 1.0, 1.0);
  CHECK(r.overlap.hidden_s == 0.0);
  CHECK(r.overlap.fraction == 0.0);
  CHECK(r.overlap.exposed_s == doctest::Approx(0.3).epsilon(kEps));
}

TEST_CASE("summarize_run rejects no ranks and ranks with different step counts") {
  CHECK_THROWS_AS(summarize_run({}, 1.0, 1.0), RuntimeError);
  std::vector<RankSamples> r = two_ranks();
  r[1].steps.pop_back();
  CHECK_THROWS_AS(summarize_run(r, 1.0, 1.0), RuntimeError);
}

TEST_CASE("flatten and unflatten round-trip every field") {
  StepSample s;
  s.step_time_s = 0.5;
  double v = 1.0;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    s.time_s[p] = v++;
    s.flops[p] = v++ * 1e12;
    s.bytes[p] = v++ * 1e9;
    s.bus_bytes[p] = v++ * 1e9;
    s.group_size[p] = static_cast<int>(p) + 2;
    s.busy_s[p] = v++ * 0.5;
  }
  const std::vector<double> flat = flatten(s);
  CHECK(flat.size() == kSampleDoubles);
  const StepSample back = unflatten(flat.data());
  CHECK(back.step_time_s == s.step_time_s);
  CHECK(back.time_s == s.time_s);
  CHECK(back.flops == s.flops);
  CHECK(back.bytes == s.bytes);
  CHECK(back.bus_bytes == s.bus_bytes);
  CHECK(back.group_size == s.group_size);
  CHECK(back.busy_s == s.busy_s);
  // Consecutive samples in one gathered buffer stay apart.
  std::vector<double> two = flat;
  StepSample t;
  t.step_time_s = 9.0;
  const std::vector<double> second = flatten(t);
  two.insert(two.end(), second.begin(), second.end());
  CHECK(unflatten(two.data() + kSampleDoubles).step_time_s == 9.0);
}

}  // namespace
}  // namespace moebench

namespace moebench {
namespace {

TEST_CASE("summarize_run: a collective over one rank has no bandwidth") {
  RankSamples one;
  one.steps = {sample(1.0, 0.5, 0.1, 100, 1000, 1)};  // dispatch over a group of 1
  const RunResults r = summarize_run({one}, 6.0, 8e12);
  const PhaseResult& dis = r.phases[at(Phase::dispatch)];
  CHECK(dis.bytes == doctest::Approx(1000).epsilon(kEps));  // its buffer, as counted
  CHECK(dis.algbw == 0);
  CHECK(dis.busbw == 0);
  RankSamples two = one;
  two.steps[0].group_size[at(Phase::dispatch)] = 2;
  CHECK(summarize_run({two}, 6.0, 8e12).phases[at(Phase::dispatch)].algbw > 0);
}

TEST_CASE("summarize_run: the step breakdown is the slowest rank's median step, adding up") {
  std::vector<RankSamples> ranks = two_ranks();
  ranks[1].steps[0].step_time_s = 5.0;  // rank 1: steps of 5, 1 and 4 s, median 4 > rank 0's 2
  ranks[1].stage = 1;
  const RunResults r = summarize_run(ranks, 6.0, 8e12);
  const StepBreakdown& b = r.breakdown;
  CHECK(b.rank == 1);
  CHECK(b.host == "b");
  CHECK(b.stage == 1);
  CHECK(b.step == 2);  // its median step: the one of 4 s
  CHECK(b.step_time_s == doctest::Approx(4.0).epsilon(kEps));
  CHECK(b.phase_time_s[at(Phase::attention)] == doctest::Approx(0.75).epsilon(kEps));
  CHECK(b.phase_time_s[at(Phase::dispatch)] == doctest::Approx(0.1).epsilon(kEps));
  CHECK(b.other_s == doctest::Approx(3.15).epsilon(kEps));
  // The cross-rank maxima differ: attention's slowest rank per step is 0.5, 1.0, 0.75.
  CHECK(r.phases[at(Phase::attention)].time_s.median == doctest::Approx(0.75).epsilon(kEps));
  // An even count takes the upper median; ties go to the lower rank.
  std::vector<RankSamples> even = two_ranks();
  for (RankSamples& rs : even) rs.steps.pop_back();
  const StepBreakdown e = summarize_run(even, 6.0, 8e12).breakdown;
  CHECK(e.rank == 0);  // medians 1.5 and 1.5
  CHECK(e.step == 1);  // rank 0's steps of 1 and 2 s: the 2 s one
  CHECK(summarize_run({RankSamples{}}, 6.0, 8e12).breakdown.rank == -1);  // no timed step
}

}  // namespace
}  // namespace moebench
