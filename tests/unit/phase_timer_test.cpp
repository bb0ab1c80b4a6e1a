// PhaseTimer on the cpu backend (host-clock marks): scopes sum per phase, nested and adjacent
// scopes each count their own interval, reset() starts over, and an open scope is an error.
#include "harness/measure/phase_timer.hpp"

#include <doctest/doctest.h>

#include <thread>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/core/error.hpp"

namespace moebench {
namespace {

// A cpu backend whose marks are given times, so intervals are exact.
class FakeMarks : public CpuCompute {
 public:
  FakeMarks() : CpuCompute(1) {}
  std::vector<double> times;
  int next = 0;
  int mark() override { return next++; }
  std::vector<double> mark_times_s() override {
    return std::vector<double>(times.begin(), times.begin() + next);
  }
  void clear_marks() override { next = 0; }
};

constexpr auto at(Phase p) {
  return static_cast<std::size_t>(p);
}

// Differences of exact binary fractions: exact in double.
TEST_CASE("PhaseTimer sums each phase's scopes from the marks; nested scopes count their own") {
  FakeMarks c;
  c.times = {0.0, 0.25, 0.5, 1.0, 1.5, 3.0, 3.5, 4.0};
  PhaseTimer t(c);
  {
    auto a = t.scope(Phase::dispatch);  // marks 0 .. 1: 0.25
  }
  {
    auto a = t.scope(Phase::shared_expert);  // marks 2 .. 5: 2.5
    {
      auto b = t.scope(Phase::experts);  // marks 3 .. 4: 0.5, nested
    }
  }
  {
    auto a = t.scope(Phase::dispatch);  // marks 6 .. 7: 0.5
  }
  const PerPhase<double> times = t.times();
  CHECK(times[at(Phase::dispatch)] == 0.75);
  CHECK(times[at(Phase::shared_expert)] == 2.5);
  CHECK(times[at(Phase::experts)] == 0.5);
  CHECK(times[at(Phase::attention)] == 0.0);

  t.reset();
  CHECK(c.next == 0);  // the backend's marks were cleared
  CHECK(t.times()[at(Phase::dispatch)] == 0.0);
  { auto a = t.scope(Phase::router); }
  CHECK(t.times()[at(Phase::router)] == 0.25);
}

TEST_CASE("PhaseTimer refuses to read a phase that is still open") {
  FakeMarks c;
  c.times = {0.0, 1.0, 2.0};
  PhaseTimer t(c);
  auto a = t.scope(Phase::router);
  CHECK_THROWS_AS(t.times(), RuntimeError);
}

TEST_CASE("PhaseTimer on the host clock of the default marks measures a sleep") {
  struct HostMarks : FakeMarks {
    int mark() override { return Compute::mark(); }
    std::vector<double> mark_times_s() override { return Compute::mark_times_s(); }
    void clear_marks() override { Compute::clear_marks(); }
  } c;
  PhaseTimer t(c);
  {
    auto a = t.scope(Phase::comm_wait);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // A 20 ms sleep lasts at least 20 ms; 2 s bounds a loaded machine's scheduling delay.
  const double s = t.times()[at(Phase::comm_wait)];
  CHECK(s >= 0.020);
  CHECK(s < 2.0);
}

}  // namespace
}  // namespace moebench
