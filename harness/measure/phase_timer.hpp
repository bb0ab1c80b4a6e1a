// Per-phase time of one rank, without synchronising at phase boundaries: a scope records a
// compute mark (Compute::mark(): the host clock on host backends, an event on the stream on the
// cuda backend) where it begins and where it ends, and a phase's time is the sum of its scopes'
// intervals, read after the step has synchronised. On a stream the interval is the time the
// stream spent between the marks, so a communication phase's time is what the compute stream
// waited for its collectives: all of their duration without overlap, the exposed part with it.
#pragma once

#include <vector>

#include "harness/compute/compute.hpp"
#include "harness/measure/phases.hpp"

namespace moebench {

class PhaseTimer {
 public:
  explicit PhaseTimer(Compute& compute) : compute_(compute) {}

  // Times `p` from here until the returned guard goes out of scope. Scopes may be adjacent or
  // nested; each counts its own interval.
  class Scope {
   public:
    Scope(PhaseTimer& t, Phase p) : timer_(t), index_(t.begin(p)) {}
    ~Scope() { timer_.end(index_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PhaseTimer& timer_;
    int index_;
  };
  Scope scope(Phase p) { return Scope(*this, p); }

  // Forgets every scope and clears the backend's marks (one timer per backend at a time): a step
  // starts here.
  void reset();
  // Each phase's time summed over its scopes since reset(), in seconds. Call once the compute
  // backend has synchronised after the last scope ended; RuntimeError if a scope is still open.
  PerPhase<double> times();

 private:
  struct Interval {
    Phase phase;
    int begin;
    int end;
  };
  int begin(Phase p);
  void end(int index);

  Compute& compute_;
  std::vector<Interval> intervals_;
};

}  // namespace moebench
