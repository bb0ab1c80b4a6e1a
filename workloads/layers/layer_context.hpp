// What a layer needs to run: the backends, the parameters, where to account its time, bytes and
// FLOPs, and which tokens it holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/measure/phase_timer.hpp"
#include "harness/parallel/topology.hpp"
#include "workloads/config/run_config.hpp"
#include "workloads/params/parameters.hpp"

namespace moebench {

// Buffers the layers of a rank share, by name: what a pass needs only while it runs (forward
// intermediates nobody keeps, backward temporaries) and the activations --recompute drops from the
// forward and recomputes in the backward. One buffer per name, grown (with headroom, as
// ensure_rows) to the largest request; a view stays valid until the next larger request of the
// same name, so a pass takes its views when it starts and never keeps them for a later pass.
// Every pass of a rank runs in order on one stream, so no two passes share a buffer at once.
class Scratch {
 public:
  explicit Scratch(Compute& compute) : compute_(compute) {}
  // A contiguous rows x cols view of the buffer `name`.
  Mat get(std::string_view name, std::int64_t rows, std::int64_t cols, DType dtype);
  Mat get(std::string_view name, std::int64_t rows, std::int64_t cols) {
    return get(name, rows, cols, compute_.activation_dtype());
  }
  // 0, 1, ..., rows - 1 (rows x 1, i32), uploaded only when a larger one is asked for: the index
  // of a row-wise scale or dot product (Compute::gather_rows_scaled, gathered_row_dot).
  Mat iota(std::int64_t rows);
  std::int64_t bytes() const;  // held now, all buffers

 private:
  Compute& compute_;
  std::map<std::string, Tensor, std::less<>> buffers_;
  std::int64_t iota_rows_ = 0;  // valid rows of the buffer "iota"
};

struct LayerContext {
  Compute& compute;
  Communicator& comm;
  PhaseTimer& timer;
  StepSample& sample;
  const RunConfig& config;
  const Topology& topo;
  ParamStore& params;
  Scratch& scratch;
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
