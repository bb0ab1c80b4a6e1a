#include "harness/measure/phase_timer.hpp"

#include "harness/core/error.hpp"

namespace moebench {

int PhaseTimer::begin(Phase p) {
  intervals_.push_back({p, compute_.mark(), -1});
  return static_cast<int>(intervals_.size()) - 1;
}

void PhaseTimer::end(int index) {
  intervals_[static_cast<std::size_t>(index)].end = compute_.mark();
}

void PhaseTimer::reset() {
  intervals_.clear();
  compute_.clear_marks();
}

PerPhase<double> PhaseTimer::times() {
  PerPhase<double> out{};
  if (intervals_.empty()) return out;
  const std::vector<double> t = compute_.mark_times_s();
  for (const Interval& i : intervals_) {
    MB_CHECK(i.end >= 0, "phase " << phase_name(i.phase) << " is still being timed");
    MB_CHECK(i.begin >= 0 && static_cast<std::size_t>(i.end) < t.size(),
             "phase " << phase_name(i.phase) << ": its marks were cleared (another timer reset "
                      << "the compute backend's marks)");
    out[static_cast<std::size_t>(i.phase)] +=
        t[static_cast<std::size_t>(i.end)] - t[static_cast<std::size_t>(i.begin)];
  }
  return out;
}

}  // namespace moebench
