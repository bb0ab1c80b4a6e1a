#include "harness/comm/communicator.hpp"

namespace moebench {

const char* group_name(Group g) {
  switch (g) {
    case Group::world:
      return "world";
    case Group::expert:
      return "expert";
    case Group::expert_data:
      return "expert_data";
  }
  return "?";
}

void check_alltoallv_layout(Group g, int group_size, Mat send,
                            std::span<const std::int64_t> send_rows,
                            std::span<const std::int64_t> send_offsets, Mat recv,
                            std::span<const std::int64_t> recv_rows,
                            std::span<const std::int64_t> recv_offsets) {
  MB_CHECK(send.cols == recv.cols,
           "alltoallv: send rows have " << send.cols << " columns, recv rows " << recv.cols);
  MB_CHECK(!spans_overlap(send, recv), "alltoallv: send and recv buffers overlap");
  const auto n_ranks = static_cast<std::size_t>(group_size);
  MB_CHECK(
      send_rows.size() == n_ranks && send_offsets.size() == n_ranks &&
          recv_rows.size() == n_ranks && recv_offsets.size() == n_ranks,
      "alltoallv in " << group_name(g) << ": count arrays must have " << n_ranks << " entries");
  for (std::size_t i = 0; i < n_ranks; ++i) {
    MB_CHECK(
        send_offsets[i] >= 0 && send_rows[i] >= 0 && send_offsets[i] + send_rows[i] <= send.rows,
        "alltoallv: send rows [" << send_offsets[i] << ", +" << send_rows[i] << ") outside a "
                                 << send.rows << "-row buffer");
    MB_CHECK(
        recv_offsets[i] >= 0 && recv_rows[i] >= 0 && recv_offsets[i] + recv_rows[i] <= recv.rows,
        "alltoallv: recv rows [" << recv_offsets[i] << ", +" << recv_rows[i] << ") outside a "
                                 << recv.rows << "-row buffer");
  }
}

}  // namespace moebench
