// The permutation of a rank's token-to-expert assignments into per-destination, per-expert
// contiguous rows (host side; the cuda backend downloads the indices once per layer, which is the
// synchronisation the all-to-all counts need anyway).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace moebench {

// Sender side. Assignments (token t, slot j) are ordered by expert, then token, then slot.
struct DispatchPlan {
  std::vector<std::int32_t> row_token;    // send row i carries token row_token[i]
  std::vector<std::int32_t> row_slot;     // and its weight is weights[row_slot[i]] (t * k + j)
  std::vector<std::int64_t> expert_rows;  // per global expert
  std::vector<std::int64_t> send_rows;    // per EP rank
  std::vector<std::int64_t> send_offsets;
  // per EP rank, the counts of each of its local experts (ep * local_experts values): what the
  // counts all-to-all sends.
  std::vector<std::int64_t> send_expert_rows;
};

DispatchPlan make_dispatch_plan(std::span<const std::int32_t> indices, std::int64_t tokens,
                                int top_k, int experts, int ep);

// Receiver side: rows arrive grouped by source rank, then by local expert. The experts run on
// rows grouped by local expert, then by source rank.
struct ExpertLayout {
  std::vector<std::int64_t> recv_rows;  // per source rank
  std::vector<std::int64_t> recv_offsets;
  std::vector<std::int64_t> expert_rows;        // per local expert
  std::vector<std::int64_t> expert_offsets;     // per local expert
  std::vector<std::int32_t> expert_row_source;  // expert-order row i is received row [i]
  std::int64_t total_rows = 0;
};

// recv_expert_rows: ep * local_experts counts, source-rank major (what the counts all-to-all
// returned).
ExpertLayout make_expert_layout(std::span<const std::int64_t> recv_expert_rows, int ep,
                                int local_experts);

}  // namespace moebench
