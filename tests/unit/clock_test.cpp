// The host clocks: seconds_since on the monotonic clock, and this thread's CPU time, which a
// sleep does not advance and a busy loop does. Tolerances: a sleep of 200 ms may be charged a
// few ms of CPU for the wake-up (allowed: under 50 ms); 200 ms of spinning gets at least 1 ms of
// CPU even on a machine whose cores are shared many times over.
#include "harness/core/clock.hpp"

#include <doctest/doctest.h>

#include <thread>

namespace moebench {
namespace {

TEST_CASE("clock: the thread's CPU time counts its work, not its sleep") {
  const Clock::time_point start = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(seconds_since(start) >= 0.2);
  CHECK(thread_cpu_seconds() - cpu0 < 0.05);
  const double cpu1 = thread_cpu_seconds();
  volatile double sink = 0;
  for (const Clock::time_point spin = Clock::now(); seconds_since(spin) < 0.2;) sink = sink + 1;
  CHECK(thread_cpu_seconds() - cpu1 > 0.001);
}

}  // namespace
}  // namespace moebench
