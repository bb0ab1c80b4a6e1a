// The host clock every host-side timing uses (monotonic; seconds as double, SI inside).
#pragma once

#include <chrono>

namespace moebench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace moebench
