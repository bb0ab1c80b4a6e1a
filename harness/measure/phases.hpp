// The phases a step's time is split into. Names are the report's keys.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace moebench {

enum class Phase : int {
  attention,      // norms, MLA projections, rope, core attention, output projection, residuals
  dense_mlp,      // the dense layers' SwiGLU MLPs
  router,         // router GEMM, scores and top-k
  permute,        // gathers and scatters that order tokens by expert and combine them back
  dispatch,       // all-to-all of tokens to the experts' ranks (and its reverse in backward)
  experts,        // the routed experts' grouped GEMMs and SwiGLU
  shared_expert,  // the shared experts' MLP on local tokens
  combine,        // all-to-all of expert outputs back (and its reverse in backward)
  grad_reduce,    // data-parallel gradient reduction (and the ZeRO-1 parameter all-gather)
  optimizer,      // AdamW (and the zeroing of the gradients)
  comm_wait,      // waiting at a barrier of a collective's group for its slowest member
  count
};

constexpr std::size_t kPhaseCount = static_cast<std::size_t>(Phase::count);

constexpr std::array<std::string_view, kPhaseCount> kPhaseNames = {
    "attention",     "dense_mlp", "router",      "permute",   "dispatch", "experts",
    "shared_expert", "combine",   "grad_reduce", "optimizer", "comm_wait"};

// A collective's phase starts once every member of its group has arrived (--comm-barrier on,
// the default): the wait for the slowest member is comm_wait, load imbalance and stragglers made
// visible, and the collective's own time is what nccl-tests would measure.
enum class PhaseKind { compute, communication, wait };

constexpr bool is_communication(Phase p) {
  return p == Phase::dispatch || p == Phase::combine || p == Phase::grad_reduce;
}

constexpr PhaseKind phase_kind(Phase p) {
  return is_communication(p)     ? PhaseKind::communication
         : p == Phase::comm_wait ? PhaseKind::wait
                                 : PhaseKind::compute;
}
constexpr bool is_compute(Phase p) {
  return phase_kind(p) == PhaseKind::compute;
}
constexpr std::string_view phase_kind_name(Phase p) {
  return phase_kind(p) == PhaseKind::compute         ? "compute"
         : phase_kind(p) == PhaseKind::communication ? "communication"
                                                     : "wait";
}

constexpr std::string_view phase_name(Phase p) {
  return kPhaseNames[static_cast<std::size_t>(p)];
}

template <typename T>
using PerPhase = std::array<T, kPhaseCount>;

// What one rank measured and counted in one step. Times in seconds; flops and bytes per rank.
struct StepSample {
  double step_time_s = 0;
  PerPhase<double> time_s{};
  PerPhase<double> flops{};  // arithmetic done in the phase (2 per multiply-add)
  PerPhase<double> bytes{};  // bytes sent by this rank (collectives' send-buffer size)
  // bytes x nccl-tests' bus factor of each collective, summed, so busbw = bus_bytes / time even
  // when a phase mixes collectives or groups
  PerPhase<double> bus_bytes{};
  PerPhase<int> group_size{};  // size of the (largest) group a communication phase ran in
  // Communication phases: the collectives' own durations (Communicator::busy_time_s), summed.
  // time_s of such a phase is what the compute stream waited for them (all of it without
  // --overlap; with it, what stayed exposed).
  PerPhase<double> busy_s{};
};

}  // namespace moebench
