// The host clock every host-side timing uses (monotonic; seconds as double, SI inside).
#pragma once

#include <time.h>

#include <chrono>

namespace moebench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// This thread's CPU time in seconds: a host rank's own work where ranks share cores, and a wall
// clock would time the neighbours too.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace moebench
