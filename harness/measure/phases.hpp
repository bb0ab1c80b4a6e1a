// The phases a step's time is split into: the one table of their names (the reports' keys),
// kinds and meanings. The schemas, the plot and the test helpers derive from it or are checked
// against it (tests/unit/phases_test.cpp); `moebench phases` prints it.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace moebench {

enum class Phase : int {
  attention,
  dense_mlp,
  router,
  permute,
  dispatch,
  experts,
  shared_expert,
  combine,
  head,
  grad_reduce,
  optimizer,
  comm_wait,
  pp_bubble,
  count
};

constexpr std::size_t kPhaseCount = static_cast<std::size_t>(Phase::count);

// compute: arithmetic on the compute stream; communication: the compute stream waiting for
// collectives (their own duration is the busy time); wait: waiting at a barrier of a
// collective's group for its slowest member (--comm-barrier on), so that the collective's own
// time is what nccl-tests would measure.
enum class PhaseKind { compute, communication, wait };

struct PhaseDef {
  Phase phase;
  std::string_view name;
  PhaseKind kind;
  std::string_view description;
};

constexpr std::array<PhaseDef, kPhaseCount> kPhases = {{
    {Phase::attention, "attention", PhaseKind::compute,
     "norms, MLA projections, rope, core attention, output projection, residuals"},
    {Phase::dense_mlp, "dense_mlp", PhaseKind::compute, "the dense layers' SwiGLU MLPs"},
    {Phase::router, "router", PhaseKind::compute, "router GEMM, scores and top-k"},
    {Phase::permute, "permute", PhaseKind::compute,
     "gathers and scatters that order tokens by expert and combine them back"},
    {Phase::dispatch, "dispatch", PhaseKind::communication,
     "all-to-all of tokens to the experts' ranks (and its reverse in backward)"},
    {Phase::experts, "experts", PhaseKind::compute, "the routed experts' grouped GEMMs and SwiGLU"},
    {Phase::shared_expert, "shared_expert", PhaseKind::compute,
     "the shared experts' MLP on local tokens"},
    {Phase::combine, "combine", PhaseKind::communication,
     "all-to-all of expert outputs back (and its reverse in backward)"},
    {Phase::head, "head", PhaseKind::compute,
     "the model's ends: the embedding lookup and its gradient, the final norm, the output head "
     "GEMM and the cross-entropy loss, and the MTP layers' norms and input projection (their "
     "transformer layers count in the phases above)"},
    {Phase::grad_reduce, "grad_reduce", PhaseKind::communication,
     "data-parallel gradient reduction (and the ZeRO-1 parameter all-gather)"},
    {Phase::optimizer, "optimizer", PhaseKind::compute, "AdamW (and the zeroing of the gradients)"},
    {Phase::comm_wait, "comm_wait", PhaseKind::wait,
     "waiting at a barrier of a collective's group for its slowest member"},
    {Phase::pp_bubble, "pp_bubble", PhaseKind::wait,
     "waiting for the neighbouring pipeline stage's activations or gradients (the pipeline "
     "bubble, with the point-to-point transfers)"},
}};

constexpr const PhaseDef& phase_def(Phase p) {
  return kPhases[static_cast<std::size_t>(p)];
}
constexpr std::string_view phase_name(Phase p) {
  return phase_def(p).name;
}
constexpr PhaseKind phase_kind(Phase p) {
  return phase_def(p).kind;
}
constexpr std::string_view phase_kind_name(PhaseKind k) {
  return k == PhaseKind::compute         ? "compute"
         : k == PhaseKind::communication ? "communication"
                                         : "wait";
}
constexpr std::string_view phase_kind_name(Phase p) {
  return phase_kind_name(phase_kind(p));
}
constexpr bool is_communication(Phase p) {
  return phase_kind(p) == PhaseKind::communication;
}
constexpr bool is_compute(Phase p) {
  return phase_kind(p) == PhaseKind::compute;
}

// The names alone, in table order.
constexpr std::array<std::string_view, kPhaseCount> kPhaseNames = [] {
  std::array<std::string_view, kPhaseCount> names{};
  for (std::size_t i = 0; i < kPhaseCount; ++i) names[i] = kPhases[i].name;
  return names;
}();

// The table is in enum order (checked when it is compiled).
static_assert([] {
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    if (static_cast<std::size_t>(kPhases[i].phase) != i) return false;
  }
  return true;
}());

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
