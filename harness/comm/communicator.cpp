#include "harness/comm/communicator.hpp"

#include "harness/core/clock.hpp"
#include "harness/core/error.hpp"

namespace moebench {

namespace {

// Runs a blocking operation and returns the seconds it took on the host.
template <typename F>
double timed(F&& f) {
  const Clock::time_point start = Clock::now();
  f();
  return seconds_since(start);
}

void check_contiguous(const Mat& m, const char* op, const char* which) {
  MB_CHECK(m.rows >= 0 && m.cols >= 0 && m.ld >= m.cols,
           op << ": " << which << " has shape " << m.rows << "x" << m.cols << " with ld " << m.ld);
  MB_CHECK(m.data != nullptr || m.numel() == 0, op << ": " << which << " has no data");
  MB_CHECK(m.contiguous(), op << ": " << which << " is strided (ld " << m.ld << ", cols " << m.cols
                              << "); communication needs contiguous rows");
}

void check_same_dtype(const Mat& a, const Mat& b, const char* op, const char* an, const char* bn) {
  MB_CHECK(a.dtype == b.dtype, op << ": " << an << " is " << dtype_name(a.dtype) << ", " << bn
                                  << " " << dtype_name(b.dtype));
}

}  // namespace

Communicator::Communicator(const Topology& topo) : topo_(topo) {
  for (Group g : kGroups) infos_[static_cast<std::size_t>(g)] = topo.group(g);
}

const char* lane_name(CommLane lane) {
  switch (lane) {
    case CommLane::critical:
      return "critical";
    case CommLane::background:
      return "background";
    case CommLane::pipeline:
      return "pipeline";
  }
  return "?";
}

GroupInfo Communicator::member_of(Group g, const char* op) const {
  const GroupInfo gi = info(g);
  MB_CHECK(gi.member(), op << " in the " << group_name(g) << " group: rank " << topo_.rank
                           << " is in no " << group_name(g) << " group");
  return gi;
}

bool Communicator::shard_at_own_place(Group g, const Mat& shard, const Mat& buf) const {
  const char* own_place =
      static_cast<const char*>(buf.data) + static_cast<std::int64_t>(info(g).rank) * shard.numel() *
                                               static_cast<std::int64_t>(dtype_size(shard.dtype));
  return shard.numel() > 0 && static_cast<const char*>(shard.data) == own_place;
}

// ---- the checks, once for every backend

void Communicator::check_alltoall_counts(Group g, std::span<const std::int64_t> send) const {
  const GroupInfo gi = member_of(g, "alltoall_counts");
  MB_CHECK(send.size() % static_cast<std::size_t>(gi.size) == 0,
           "alltoall_counts in " << group_name(g) << ": " << send.size() << " values for "
                                 << gi.size << " ranks");
}

void Communicator::check_alltoallv(Group g, const Mat& send,
                                   std::span<const std::int64_t> send_rows,
                                   std::span<const std::int64_t> send_offsets, const Mat& recv,
                                   std::span<const std::int64_t> recv_rows,
                                   std::span<const std::int64_t> recv_offsets) const {
  const GroupInfo gi = member_of(g, "alltoallv");
  check_contiguous(send, "alltoallv", "send");
  check_contiguous(recv, "alltoallv", "recv");
  check_same_dtype(send, recv, "alltoallv", "send", "recv");
  MB_CHECK(send.cols == recv.cols,
           "alltoallv: send rows have " << send.cols << " columns, recv rows " << recv.cols);
  MB_CHECK(!spans_overlap(send, recv), "alltoallv: send and recv buffers overlap");
  const auto n_ranks = static_cast<std::size_t>(gi.size);
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

void Communicator::check_allreduce(Group g, const Mat& buf) const {
  member_of(g, "allreduce_sum");
  check_contiguous(buf, "allreduce_sum", "buf");
}

void Communicator::check_reduce_scatter(Group g, const Mat& buf, const Mat& shard) const {
  const GroupInfo gi = member_of(g, "reduce_scatter_sum");
  check_contiguous(buf, "reduce_scatter_sum", "buf");
  check_contiguous(shard, "reduce_scatter_sum", "shard");
  check_same_dtype(buf, shard, "reduce_scatter_sum", "buf", "shard");
  MB_CHECK(buf.numel() % gi.size == 0 && shard.numel() == buf.numel() / gi.size,
           "reduce_scatter_sum in " << group_name(g) << ": buffer of " << buf.numel()
                                    << " elements, shard of " << shard.numel() << ", " << gi.size
                                    << " ranks");
  MB_CHECK(!spans_overlap(buf, shard), "reduce_scatter_sum: shard overlaps the input buffer");
}

void Communicator::check_allgather(Group g, const Mat& shard, const Mat& buf) const {
  const GroupInfo gi = member_of(g, "allgather");
  check_contiguous(buf, "allgather", "buf");
  check_contiguous(shard, "allgather", "shard");
  check_same_dtype(buf, shard, "allgather", "buf", "shard");
  MB_CHECK(shard.numel() * gi.size == buf.numel(),
           "allgather in " << group_name(g) << ": shard of " << shard.numel()
                           << " elements, buffer of " << buf.numel() << ", " << gi.size
                           << " ranks");
  MB_CHECK(shard_at_own_place(g, shard, buf) || !spans_overlap(shard, buf),
           "allgather: shard overlaps the output buffer away from this rank's place");
}

void Communicator::check_batch_p2p(Group g, std::span<const P2POp> ops) const {
  const GroupInfo gi = member_of(g, "batch_p2p");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    MB_CHECK(op.peer >= 0 && op.peer < gi.size,
             "batch_p2p in " << group_name(g) << ": transfer " << i << " names peer " << op.peer
                             << " of a " << gi.size << "-rank group");
    check_contiguous(op.buf, "batch_p2p", op.kind == P2POp::Kind::send ? "a send" : "a recv");
    if (op.kind != P2POp::Kind::recv) continue;
    for (std::size_t j = 0; j < ops.size(); ++j) {
      MB_CHECK(j == i || !spans_overlap(op.buf, ops[j].buf),
               "batch_p2p: the buffer of receive " << i << " overlaps that of transfer " << j);
    }
  }
}

// ---- the public calls: check, then the backend's do_*

std::vector<std::int64_t> Communicator::alltoall_counts(Group g,
                                                        std::span<const std::int64_t> send) {
  check_alltoall_counts(g, send);
  return do_alltoall_counts(g, send);
}

void Communicator::alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                             std::span<const std::int64_t> send_offsets, Mat recv,
                             std::span<const std::int64_t> recv_rows,
                             std::span<const std::int64_t> recv_offsets) {
  check_alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets);
  count_traffic(g, send, send_rows);
  do_alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets);
}

void Communicator::set_domains(std::vector<int> world_domains) {
  MB_CHECK(static_cast<int>(world_domains.size()) == topo_.world(),
           "set_domains: " << world_domains.size() << " domains for " << topo_.world() << " ranks");
  const int mine = world_domains[static_cast<std::size_t>(topo_.rank)];
  for (Group g : kGroups) {
    std::vector<bool>& same = same_domain_[static_cast<std::size_t>(g)];
    same.clear();
    for (int r : topo_.grid.members(g, topo_.rank)) {
      same.push_back(world_domains[static_cast<std::size_t>(r)] == mine);
    }
  }
}

void Communicator::count_traffic(Group g, const Mat& send,
                                 std::span<const std::int64_t> send_rows) {
  const std::vector<bool>& same = same_domain_[static_cast<std::size_t>(g)];
  if (same.empty()) return;
  const double row_bytes =
      static_cast<double>(send.cols) * static_cast<double>(dtype_size(send.dtype));
  for (std::size_t i = 0; i < send_rows.size() && i < same.size(); ++i) {
    if (static_cast<int>(i) == info(g).rank) continue;  // to itself: no link at all
    (same[i] ? traffic_.in_domain_bytes : traffic_.cross_domain_bytes) +=
        static_cast<double>(send_rows[i]) * row_bytes;
  }
}

void Communicator::allreduce_sum(Group g, Mat buf) {
  check_allreduce(g, buf);
  do_allreduce_sum(g, buf);
}

void Communicator::reduce_scatter_sum(Group g, Mat buf, Mat shard) {
  check_reduce_scatter(g, buf, shard);
  do_reduce_scatter_sum(g, buf, shard);
}

void Communicator::allgather(Group g, Mat shard, Mat buf) {
  check_allgather(g, shard, buf);
  do_allgather(g, shard, buf);
}

void Communicator::batch_p2p(Group g, std::span<const P2POp> ops) {
  check_batch_p2p(g, ops);
  do_batch_p2p(g, ops);
}

CommRequest Communicator::start_alltoallv(Group g, Mat send,
                                          std::span<const std::int64_t> send_rows,
                                          std::span<const std::int64_t> send_offsets, Mat recv,
                                          std::span<const std::int64_t> recv_rows,
                                          std::span<const std::int64_t> recv_offsets,
                                          CommLane lane) {
  check_alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets);
  count_traffic(g, send, send_rows);
  return do_start_alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets, lane);
}

CommRequest Communicator::start_allreduce_sum(Group g, Mat buf, CommLane lane) {
  check_allreduce(g, buf);
  return do_start_allreduce_sum(g, buf, lane);
}

CommRequest Communicator::start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane lane) {
  check_reduce_scatter(g, buf, shard);
  return do_start_reduce_scatter_sum(g, buf, shard, lane);
}

CommRequest Communicator::start_allgather(Group g, Mat shard, Mat buf, CommLane lane) {
  check_allgather(g, shard, buf);
  return do_start_allgather(g, shard, buf, lane);
}

CommRequest Communicator::start_batch_p2p(Group g, std::span<const P2POp> ops, CommLane lane) {
  check_batch_p2p(g, ops);
  return do_start_batch_p2p(g, ops, lane);
}

void Communicator::barrier(Group g) {
  member_of(g, "barrier");
  do_barrier(g);
}

// ---- the defaults: blocking calls with completed requests

CommRequest Communicator::completed_request(double seconds) {
  default_requests_.push_back(DefaultRequest{seconds, false});
  return static_cast<CommRequest>(default_requests_.size()) - 1;
}

CommRequest Communicator::do_start_alltoallv(Group g, Mat send,
                                             std::span<const std::int64_t> send_rows,
                                             std::span<const std::int64_t> send_offsets, Mat recv,
                                             std::span<const std::int64_t> recv_rows,
                                             std::span<const std::int64_t> recv_offsets, CommLane) {
  return completed_request(timed(
      [&] { do_alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets); }));
}

CommRequest Communicator::do_start_allreduce_sum(Group g, Mat buf, CommLane) {
  return completed_request(timed([&] { do_allreduce_sum(g, buf); }));
}

CommRequest Communicator::do_start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane) {
  return completed_request(timed([&] { do_reduce_scatter_sum(g, buf, shard); }));
}

CommRequest Communicator::do_start_allgather(Group g, Mat shard, Mat buf, CommLane) {
  return completed_request(timed([&] { do_allgather(g, shard, buf); }));
}

CommRequest Communicator::do_start_batch_p2p(Group g, std::span<const P2POp> ops, CommLane) {
  return completed_request(timed([&] { do_batch_p2p(g, ops); }));
}

void Communicator::do_wait(CommRequest r) {
  MB_CHECK(r >= 0 && r < static_cast<CommRequest>(default_requests_.size()),
           "wait on unknown communication request " << r);
  default_requests_[static_cast<std::size_t>(r)].waited = true;
}

double Communicator::do_busy_time_s(CommRequest r) {
  MB_CHECK(r >= 0 && r < static_cast<CommRequest>(default_requests_.size()),
           "busy_time_s of unknown communication request " << r);
  return default_requests_[static_cast<std::size_t>(r)].busy_s;
}

void Communicator::do_clear_requests() {
  for (std::size_t i = 0; i < default_requests_.size(); ++i) {
    MB_CHECK(default_requests_[i].waited,
             "clear_requests with communication request " << i << " not waited for");
  }
  default_requests_.clear();
}

}  // namespace moebench
