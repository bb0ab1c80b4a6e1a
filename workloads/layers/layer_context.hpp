// What a layer needs to run: the backends, the parameters, where to account its time, bytes and
// FLOPs, and which tokens it holds.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/measure/phase_timer.hpp"
#include "harness/parallel/topology.hpp"
#include "workloads/config/run_config.hpp"
#include "workloads/params/parameters.hpp"

namespace moebench {

struct LayerContext {
  Compute& compute;
  Communicator& comm;
  PhaseTimer& timer;
  StepSample& sample;
  const RunConfig& config;
  const Topology& topo;
  ParamStore& params;
  std::int64_t tokens = 0;       // rows this rank holds (micro_batch * seq_len)
  std::int64_t first_token = 0;  // global index of row 0
  // Every collective started in the step and the phase it belongs to: their busy times are read
  // once the step has synchronised (Communicator::busy_time_s).
  std::vector<std::pair<Phase, CommRequest>> requests{};

  // With --comm-barrier on, waits for the group's slowest member, timed as comm_wait, so that
  // the collective that follows is timed from a common start (as nccl-tests does).
  void wait_for_group(Group g) {
    if (!config.comm_barrier) return;
    auto scope = timer.scope(Phase::comm_wait);
    comm.barrier(g);
  }
  // --overlap on: independent compute runs while a collective is in flight.
  bool overlap() const { return config.overlap; }
  // Records a started collective under its phase.
  CommRequest track(Phase p, CommRequest r) {
    requests.emplace_back(p, r);
    return r;
  }
  // Waits for a started collective; the compute stream's wait is the phase's (exposed) time.
  void wait(Phase p, CommRequest r) {
    auto scope = timer.scope(p);
    comm.wait(r);
  }
  void add_flops(Phase p, double f) { sample.flops[static_cast<std::size_t>(p)] += f; }
  void add_bytes(Phase p, double bytes, double bus_factor, int group) {
    const auto i = static_cast<std::size_t>(p);
    sample.bytes[i] += bytes;
    sample.bus_bytes[i] += bytes * bus_factor;
    if (group > sample.group_size[i]) sample.group_size[i] = group;
  }
};

// A reusable buffer: reallocated only when a step needs more rows than it has.
Mat ensure_rows(Compute& compute, Tensor& t, std::int64_t rows, std::int64_t cols, DType dtype);
inline Mat ensure_rows(Compute& compute, Tensor& t, std::int64_t rows, std::int64_t cols) {
  return ensure_rows(compute, t, rows, cols, compute.activation_dtype());
}

}  // namespace moebench
