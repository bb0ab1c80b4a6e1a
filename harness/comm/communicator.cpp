#include "harness/comm/communicator.hpp"

#include "harness/core/clock.hpp"
#include "harness/core/error.hpp"

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

namespace {
// Runs a blocking collective and returns the seconds it took on the host.
template <typename F>
double timed(F&& f) {
  const Clock::time_point start = Clock::now();
  f();
  return seconds_since(start);
}
}  // namespace

CommRequest Communicator::completed_request(double seconds) {
  default_requests_.push_back(DefaultRequest{seconds, false});
  return static_cast<CommRequest>(default_requests_.size()) - 1;
}

CommRequest Communicator::start_alltoallv(Group g, Mat send,
                                          std::span<const std::int64_t> send_rows,
                                          std::span<const std::int64_t> send_offsets, Mat recv,
                                          std::span<const std::int64_t> recv_rows,
                                          std::span<const std::int64_t> recv_offsets, CommLane) {
  return completed_request(
      timed([&] { alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets); }));
}

CommRequest Communicator::start_allreduce_sum(Group g, Mat buf, CommLane) {
  return completed_request(timed([&] { allreduce_sum(g, buf); }));
}

CommRequest Communicator::start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane) {
  return completed_request(timed([&] { reduce_scatter_sum(g, buf, shard); }));
}

CommRequest Communicator::start_allgather(Group g, Mat shard, Mat buf, CommLane) {
  return completed_request(timed([&] { allgather(g, shard, buf); }));
}

void Communicator::wait(CommRequest r) {
  MB_CHECK(r >= 0 && r < static_cast<CommRequest>(default_requests_.size()),
           "wait on unknown communication request " << r);
  default_requests_[static_cast<std::size_t>(r)].waited = true;
}

double Communicator::busy_time_s(CommRequest r) {
  MB_CHECK(r >= 0 && r < static_cast<CommRequest>(default_requests_.size()),
           "busy_time_s of unknown communication request " << r);
  return default_requests_[static_cast<std::size_t>(r)].busy_s;
}

void Communicator::clear_requests() {
  for (std::size_t i = 0; i < default_requests_.size(); ++i) {
    MB_CHECK(default_requests_[i].waited,
             "clear_requests with communication request " << i << " not waited for");
  }
  default_requests_.clear();
}

}  // namespace moebench
