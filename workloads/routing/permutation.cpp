#include "workloads/routing/permutation.hpp"

#include <limits>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

std::vector<std::int64_t> exclusive_prefix(const std::vector<std::int64_t>& counts) {
  std::vector<std::int64_t> offsets(counts.size(), 0);
  std::int64_t acc = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = acc;
    acc += counts[i];
  }
  return offsets;
}

}  // namespace

DispatchPlan make_dispatch_plan(std::span<const std::int32_t> indices, std::int64_t tokens,
                                int top_k, int experts, int ep) {
  MB_CHECK(tokens >= 0 && top_k >= 1 && experts >= 1 && ep >= 1,
           "dispatch plan: bad shape tokens=" << tokens << " top_k=" << top_k
                                              << " experts=" << experts << " ep=" << ep);
  MB_CHECK(experts % ep == 0,
           "dispatch plan: " << experts << " experts do not split over " << ep << " EP ranks");
  MB_CHECK(static_cast<std::int64_t>(indices.size()) == tokens * top_k,
           "dispatch plan: " << indices.size() << " indices for " << tokens << " tokens x top_k "
                             << top_k);
  // Row ids travel as i32 (the gather/scatter index tensors).
  MB_CHECK(tokens * top_k <= std::numeric_limits<std::int32_t>::max(),
           "dispatch plan: " << tokens * top_k << " rows exceed the i32 row index range");

  DispatchPlan plan;
  plan.expert_rows.assign(experts, 0);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::int32_t e = indices[i];
    MB_CHECK(e >= 0 && e < experts, "dispatch plan: token " << static_cast<std::int64_t>(i) / top_k
                                                            << " slot " << i % top_k
                                                            << " routed to expert " << e
                                                            << ", outside [0, " << experts << ")");
    ++plan.expert_rows[e];
  }

  // Counting sort by expert; the token-then-slot scan keeps each expert's rows in (t, j) order.
  std::vector<std::int64_t> cursor = exclusive_prefix(plan.expert_rows);
  plan.row_token.resize(indices.size());
  plan.row_slot.resize(indices.size());
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (int j = 0; j < top_k; ++j) {
      const std::int64_t slot = t * top_k + j;
      const std::int64_t row = cursor[indices[slot]]++;
      plan.row_token[row] = static_cast<std::int32_t>(t);
      plan.row_slot[row] = static_cast<std::int32_t>(slot);
    }
  }

  // Experts live on EP ranks in contiguous blocks, so expert order is already destination order
  // and the per-destination local-expert counts are expert_rows itself.
  const int local_experts = experts / ep;
  plan.send_rows.assign(ep, 0);
  for (int e = 0; e < experts; ++e) plan.send_rows[e / local_experts] += plan.expert_rows[e];
  plan.send_offsets = exclusive_prefix(plan.send_rows);
  plan.send_expert_rows = plan.expert_rows;
  return plan;
}

ExpertLayout make_expert_layout(std::span<const std::int64_t> recv_expert_rows, int ep,
                                int local_experts) {
  MB_CHECK(ep >= 1 && local_experts >= 1,
           "expert layout: bad shape ep=" << ep << " local_experts=" << local_experts);
  MB_CHECK(static_cast<std::int64_t>(recv_expert_rows.size()) ==
               static_cast<std::int64_t>(ep) * local_experts,
           "expert layout: " << recv_expert_rows.size() << " counts for " << ep << " sources x "
                             << local_experts << " local experts");

  ExpertLayout layout;
  layout.recv_rows.assign(ep, 0);
  layout.expert_rows.assign(local_experts, 0);
  for (int s = 0; s < ep; ++s) {
    for (int l = 0; l < local_experts; ++l) {
      const std::int64_t n = recv_expert_rows[static_cast<std::size_t>(s) * local_experts + l];
      MB_CHECK(n >= 0, "expert layout: negative count " << n << " from source " << s
                                                        << " for local expert " << l);
      layout.recv_rows[s] += n;
      layout.expert_rows[l] += n;
      layout.total_rows += n;
    }
  }
  MB_CHECK(layout.total_rows <= std::numeric_limits<std::int32_t>::max(),
           "expert layout: " << layout.total_rows << " rows exceed the i32 row index range");
  layout.recv_offsets = exclusive_prefix(layout.recv_rows);
  layout.expert_offsets = exclusive_prefix(layout.expert_rows);

  // Within a source's block its rows are by local expert, so expert l's rows from source s
  // start after that source's rows for experts < l.
  std::vector<std::int64_t> start(recv_expert_rows.size());
  for (int s = 0; s < ep; ++s) {
    std::int64_t at = layout.recv_offsets[s];
    for (int l = 0; l < local_experts; ++l) {
      start[static_cast<std::size_t>(s) * local_experts + l] = at;
      at += recv_expert_rows[static_cast<std::size_t>(s) * local_experts + l];
    }
  }
  layout.expert_row_source.reserve(static_cast<std::size_t>(layout.total_rows));
  for (int l = 0; l < local_experts; ++l) {
    for (int s = 0; s < ep; ++s) {
      const std::size_t c = static_cast<std::size_t>(s) * local_experts + l;
      for (std::int64_t r = 0; r < recv_expert_rows[c]; ++r) {
        layout.expert_row_source.push_back(static_cast<std::int32_t>(start[c] + r));
      }
    }
  }
  return layout;
}

}  // namespace moebench
