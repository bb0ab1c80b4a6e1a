#include "harness/verify/verify_cost.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "harness/parallel/topology.hpp"
#include "workloads/accounting/memory_model.hpp"
#include "workloads/params/parameters.hpp"

namespace moebench {

VerifyCost estimate_verify_cost(const RunConfig& c, std::size_t bytes_per_element) {
  constexpr double kFloat = 4.0;  // the results are downloaded and sent as FP32
  VerifyCost v;
  v.reference_step_bytes = estimate_reference_memory(c, bytes_per_element).total();
  // The rows compared: every token's output (its hidden state, or with --head on its loss per
  // head) and, with --head off, its input gradient.
  const double tokens = static_cast<double>(global_batch(c) * c.workload.seq_len);
  const double width =
      c.workload.head ? 1.0 + c.workload.mtp : static_cast<double>(c.model.hidden_size);
  const double input_width = c.workload.head ? 0.0 : static_cast<double>(c.model.hidden_size);
  const ParamLayout ref = make_param_layout(single_process_reference(c), single_process_topology());
  v.reference_results_bytes =
      kFloat * (tokens * (width + input_width) + static_cast<double>(ref.numel[0] + ref.numel[1]));

  // Each rank: its own parameters' gradients (the whole group buffer; a ZeRO-1 shard is less) and
  // its micro-batches' rows where it holds the first or last stage. Ranks at the same pipeline
  // and expert place hold the same, so each place is laid out once.
  const ParallelGrid grid = c.layout.grid();
  const double rows_per_rank = tokens / static_cast<double>(c.layout.dp());
  std::map<std::pair<int, int>, double> by_place;
  for (int r = 0; r < c.layout.world; ++r) {
    const Topology t = make_topology_emulated(grid, r, c.layout.world);
    const int stage = t.group(Group::pipeline).rank;
    const auto [it, fresh] = by_place.try_emplace({stage, t.group(Group::expert).rank}, 0.0);
    if (fresh) {
      const ParamLayout mine = make_param_layout(c, t);
      double rows = 0;
      if (stage == c.layout.pp - 1) rows += rows_per_rank * width;
      if (stage == 0) rows += rows_per_rank * input_width;
      it->second = kFloat * (static_cast<double>(mine.numel[0] + mine.numel[1]) + rows);
    }
    v.max_rank_received_bytes = std::max(v.max_rank_received_bytes, it->second);
    v.sent_bytes += it->second;
  }
  return v;
}

}  // namespace moebench
