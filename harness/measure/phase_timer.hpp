// Per-phase wall time of one rank. A phase's time is taken between synchronisations of the
// compute backend and the communicator, so it is the time the work took on any backend (the
// cuda backend replaces this with events when it overlaps phases).
#pragma once

#include <chrono>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/measure/phases.hpp"

namespace moebench {

class PhaseTimer {
 public:
  PhaseTimer(Compute& compute, Communicator& comm) : compute_(compute), comm_(comm) {}

  // Starts timing `p` until the returned guard goes out of scope.
  class Scope {
   public:
    Scope(PhaseTimer& t, Phase p) : timer_(t), phase_(p) { timer_.begin(); }
    ~Scope() { timer_.end(phase_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PhaseTimer& timer_;
    Phase phase_;
  };
  Scope scope(Phase p) { return Scope(*this, p); }

  void reset() { time_s_ = {}; }
  const PerPhase<double>& times() const { return time_s_; }

 private:
  using Clock = std::chrono::steady_clock;
  void begin() {
    sync();
    start_ = Clock::now();
  }
  void end(Phase p) {
    sync();
    time_s_[static_cast<std::size_t>(p)] +=
        std::chrono::duration<double>(Clock::now() - start_).count();
  }
  void sync() {
    compute_.synchronize();
    comm_.synchronize();
  }

  Compute& compute_;
  Communicator& comm_;
  Clock::time_point start_{};
  PerPhase<double> time_s_{};
};

}  // namespace moebench
