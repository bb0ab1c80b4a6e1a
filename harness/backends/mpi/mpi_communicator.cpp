// The mpi communication backend: MPI collectives on host buffers. Rows travel as one contiguous
// MPI datatype per row so that element counts of large buffers still fit MPI's int.
//
// The start_* forms are MPI's non-blocking collectives, issued at once: MPI matches the
// collectives of a communicator, blocking and non-blocking alike, in the order each rank issues
// them, so a started collective keeps its place among the blocking calls on its group exactly as
// if it were one of them. The two lanes need nothing of their own: each group is its own MPI
// communicator, and operations on different communicators progress independently. OpenMPI has no
// progress thread by default, so most of a started collective's work happens inside wait() (or
// inside any other MPI call made meanwhile); its busy time is the host time spent in MPI for it.
#include <climits>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "harness/backends/mpi/mpi_check.hpp"
#include "harness/backends/mpi/mpi_communicator.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/error.hpp"

namespace moebench {

namespace {

int to_int(std::int64_t v, const char* what) {
  MB_CHECK(v >= 0 && v <= INT_MAX,
           what << " " << v << " does not fit MPI's int count (0.." << INT_MAX << ")");
  return static_cast<int>(v);
}

void check_f32_contiguous(const Mat& m, const char* op, const char* which) {
  MB_CHECK(m.dtype == DType::f32,
           op << ": " << which << " is " << dtype_name(m.dtype) << "; the mpi backend moves f32");
  MB_CHECK(m.contiguous(), op << ": " << which << " is strided (ld " << m.ld << ", cols " << m.cols
                              << "); the mpi backend needs contiguous rows");
}

const char* bytes_of(const Mat& m) {
  return static_cast<const char*>(m.data);
}

// A started collective until clear_requests().
struct PendingOp {
  MPI_Request request = MPI_REQUEST_NULL;
  const char* wait_call = "";  // "MPI_Wait (MPI_Iallreduce)", for the error message
  double busy_s = 0;           // host seconds inside MPI for it: the start and the wait
  bool done = false;           // MPI_Wait returned
  bool waited = false;         // passed to wait()
  // MPI_Ialltoallv reads its count and displacement arrays until the operation completes.
  std::vector<int> counts;
};

// The int arguments of an all-gather: elements per rank, and whether the shard already sits at
// this rank's place in the output (ZeRO-1 parameters), which MPI takes as MPI_IN_PLACE.
struct AllgatherArgs {
  int n = 0;
  bool in_place = false;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm world, const Topology& topo) {
    try {
      build_groups(world, topo);
    } catch (...) {
      release();  // a throwing constructor runs no destructor
      throw;
    }
  }

  ~MpiCommunicator() override { release(); }

  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string name() const override { return "mpi"; }
  GroupInfo info(Group g) const override { return infos_[index(g)]; }

  std::vector<std::int64_t> alltoall_counts(Group g, std::span<const std::int64_t> send) override {
    const int n_ranks = info(g).size;
    MB_CHECK(send.size() % n_ranks == 0, "alltoall_counts in " << group_name(g) << ": "
                                                               << send.size() << " values for "
                                                               << n_ranks << " ranks");
    const int per_rank = to_int(static_cast<std::int64_t>(send.size() / n_ranks), "count");
    std::vector<std::int64_t> recv(send.size());
    check_mpi(MPI_Alltoall(send.data(), per_rank, MPI_INT64_T, recv.data(), per_rank, MPI_INT64_T,
                           comm(g)),
              "MPI_Alltoall");
    return recv;
  }

  void alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                 std::span<const std::int64_t> send_offsets, Mat recv,
                 std::span<const std::int64_t> recv_rows,
                 std::span<const std::int64_t> recv_offsets) override {
    const std::vector<int> c =
        alltoallv_counts(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets);
    const int* sc = c.data();
    const std::size_t n = c.size() / 4;
    const MPI_Datatype row = row_type(send.cols);
    check_mpi(
        MPI_Alltoallv(send.data, sc, sc + n, row, recv.data, sc + 2 * n, sc + 3 * n, row, comm(g)),
        "MPI_Alltoallv");
  }

  void allreduce_sum(Group g, Mat buf) override {
    const int n = allreduce_count(buf);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf.data, n, MPI_FLOAT, MPI_SUM, comm(g)),
              "MPI_Allreduce");
  }

  void reduce_scatter_sum(Group g, Mat buf, Mat shard) override {
    const int n = reduce_scatter_count(g, buf, shard);
    check_mpi(MPI_Reduce_scatter_block(buf.data, shard.data, n, MPI_FLOAT, MPI_SUM, comm(g)),
              "MPI_Reduce_scatter_block");
  }

  void allgather(Group g, Mat shard, Mat buf) override {
    const AllgatherArgs a = allgather_args(g, shard, buf);
    check_mpi(MPI_Allgather(a.in_place ? MPI_IN_PLACE : shard.data, a.n, MPI_FLOAT, buf.data, a.n,
                            MPI_FLOAT, comm(g)),
              "MPI_Allgather");
  }

  CommRequest start_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                              std::span<const std::int64_t> send_offsets, Mat recv,
                              std::span<const std::int64_t> recv_rows,
                              std::span<const std::int64_t> recv_offsets, CommLane) override {
    std::vector<int> counts =
        alltoallv_counts(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets);
    PendingOp& op = new_request("MPI_Wait (MPI_Ialltoallv)");
    op.counts = std::move(counts);
    const int* sc = op.counts.data();
    const std::size_t n = op.counts.size() / 4;
    const MPI_Datatype row = row_type(send.cols);
    return issue(op, "MPI_Ialltoallv", [&] {
      return MPI_Ialltoallv(send.data, sc, sc + n, row, recv.data, sc + 2 * n, sc + 3 * n, row,
                            comm(g), &op.request);
    });
  }

  CommRequest start_allreduce_sum(Group g, Mat buf, CommLane) override {
    const int n = allreduce_count(buf);
    PendingOp& op = new_request("MPI_Wait (MPI_Iallreduce)");
    return issue(op, "MPI_Iallreduce", [&] {
      return MPI_Iallreduce(MPI_IN_PLACE, buf.data, n, MPI_FLOAT, MPI_SUM, comm(g), &op.request);
    });
  }

  CommRequest start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane) override {
    const int n = reduce_scatter_count(g, buf, shard);
    PendingOp& op = new_request("MPI_Wait (MPI_Ireduce_scatter_block)");
    return issue(op, "MPI_Ireduce_scatter_block", [&] {
      return MPI_Ireduce_scatter_block(buf.data, shard.data, n, MPI_FLOAT, MPI_SUM, comm(g),
                                       &op.request);
    });
  }

  CommRequest start_allgather(Group g, Mat shard, Mat buf, CommLane) override {
    const AllgatherArgs a = allgather_args(g, shard, buf);
    PendingOp& op = new_request("MPI_Wait (MPI_Iallgather)");
    return issue(op, "MPI_Iallgather", [&] {
      return MPI_Iallgather(a.in_place ? MPI_IN_PLACE : shard.data, a.n, MPI_FLOAT, buf.data, a.n,
                            MPI_FLOAT, comm(g), &op.request);
    });
  }

  void wait(CommRequest r) override {
    PendingOp& op = request(r, "wait");
    op.waited = true;
    complete(op);
  }

  double busy_time_s(CommRequest r) override {
    const PendingOp& op = request(r, "busy_time_s");
    MB_CHECK(op.done, "busy_time_s of communication request "
                          << r << " before it completed: wait() or synchronize() first");
    return op.busy_s;
  }

  void clear_requests() override {
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      MB_CHECK(requests_[i].waited, "clear_requests with communication request "
                                        << i << " (" << requests_[i].wait_call
                                        << ") not waited for: its buffers are still in use");
    }
    requests_.clear();
  }

  void barrier(Group g) override { check_mpi(MPI_Barrier(comm(g)), "MPI_Barrier"); }
  // Completes every started collective: the host is then ordered after all of them.
  void synchronize() override {
    for (PendingOp& op : requests_) complete(op);
  }

 private:
  // The checks of an all-to-all and its int counts: send counts, send displacements, receive
  // counts, receive displacements, in rows, one per rank each.
  std::vector<int> alltoallv_counts(Group g, const Mat& send,
                                    std::span<const std::int64_t> send_rows,
                                    std::span<const std::int64_t> send_offsets, const Mat& recv,
                                    std::span<const std::int64_t> recv_rows,
                                    std::span<const std::int64_t> recv_offsets) {
    check_f32_contiguous(send, "alltoallv", "send");
    check_f32_contiguous(recv, "alltoallv", "recv");
    check_alltoallv_layout(g, info(g).size, send, send_rows, send_offsets, recv, recv_rows,
                           recv_offsets);
    const auto n_ranks = static_cast<std::size_t>(info(g).size);
    std::vector<int> c(4 * n_ranks);
    for (std::size_t i = 0; i < n_ranks; ++i) {
      c[i] = to_int(send_rows[i], "alltoallv send row count");
      c[n_ranks + i] = to_int(send_offsets[i], "alltoallv send row offset");
      c[2 * n_ranks + i] = to_int(recv_rows[i], "alltoallv recv row count");
      c[3 * n_ranks + i] = to_int(recv_offsets[i], "alltoallv recv row offset");
    }
    return c;
  }

  static int allreduce_count(const Mat& buf) {
    check_f32_contiguous(buf, "allreduce_sum", "buf");
    return to_int(buf.numel(), "allreduce_sum element count");
  }

  int reduce_scatter_count(Group g, const Mat& buf, const Mat& shard) const {
    check_f32_contiguous(buf, "reduce_scatter_sum", "buf");
    check_f32_contiguous(shard, "reduce_scatter_sum", "shard");
    const std::int64_t n_ranks = info(g).size;
    MB_CHECK(buf.numel() % n_ranks == 0 && shard.numel() == buf.numel() / n_ranks,
             "reduce_scatter_sum in " << group_name(g) << ": buffer of " << buf.numel()
                                      << " elements, shard of " << shard.numel() << ", " << n_ranks
                                      << " ranks");
    MB_CHECK(!spans_overlap(buf, shard), "reduce_scatter_sum: shard overlaps the input buffer");
    return to_int(shard.numel(), "reduce_scatter_sum shard element count");
  }

  AllgatherArgs allgather_args(Group g, const Mat& shard, const Mat& buf) const {
    check_f32_contiguous(buf, "allgather", "buf");
    check_f32_contiguous(shard, "allgather", "shard");
    const GroupInfo gi = info(g);
    MB_CHECK(shard.numel() * gi.size == buf.numel(),
             "allgather in " << group_name(g) << ": shard of " << shard.numel()
                             << " elements, buffer of " << buf.numel() << ", " << gi.size
                             << " ranks");
    AllgatherArgs a;
    a.n = to_int(shard.numel(), "allgather shard element count");
    // A shard that already sits at this rank's place in buf (ZeRO-1 parameters) goes in place.
    const char* own_place = bytes_of(buf) + static_cast<std::int64_t>(gi.rank) * a.n * 4;
    a.in_place = a.n > 0 && bytes_of(shard) == own_place;
    MB_CHECK(a.in_place || !spans_overlap(shard, buf),
             "allgather: shard overlaps the output buffer away from this rank's place");
    return a;
  }

  PendingOp& new_request(const char* wait_call) {
    PendingOp& op = requests_.emplace_back();
    op.wait_call = wait_call;
    return op;
  }

  // Runs the MPI_I* call of the newest request, timing it. A call that fails leaves no request.
  template <typename F>
  CommRequest issue(PendingOp& op, const char* call, F&& start) {
    const Clock::time_point t0 = Clock::now();
    const int rc = start();
    op.busy_s += seconds_since(t0);
    if (rc != MPI_SUCCESS) requests_.pop_back();
    check_mpi(rc, call);
    return static_cast<CommRequest>(requests_.size()) - 1;
  }

  PendingOp& request(CommRequest r, const char* what) {
    MB_CHECK(r >= 0 && r < static_cast<CommRequest>(requests_.size()),
             what << " of unknown communication request " << r << " (" << requests_.size()
                  << " since clear_requests)");
    return requests_[static_cast<std::size_t>(r)];
  }

  // MPI_Wait, once: waiting again for a completed request is harmless.
  void complete(PendingOp& op) {
    if (op.done) return;
    const Clock::time_point t0 = Clock::now();
    const int rc = MPI_Wait(&op.request, MPI_STATUS_IGNORE);
    op.busy_s += seconds_since(t0);
    op.done = true;
    check_mpi(rc, op.wait_call);
  }

  void build_groups(MPI_Comm world, const Topology& topo) {
    int size = 0;
    int rank = 0;
    check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
    check_mpi(MPI_Comm_rank(world, &rank), "MPI_Comm_rank");
    MB_CHECK(size == topo.world && rank == topo.rank,
             "topology says rank " << topo.rank << " of " << topo.world << ", communicator has "
                                   << rank << " of " << size);
    check_mpi(MPI_Comm_dup(world, &comms_[0]), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(comms_[0], MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    // expert: consecutive ranks sharing ep_group; expert_data: ranks with the same ep_rank.
    check_mpi(MPI_Comm_split(comms_[0], topo.ep_group, rank, &comms_[1]), "MPI_Comm_split");
    check_mpi(MPI_Comm_split(comms_[0], topo.ep_rank, rank, &comms_[2]), "MPI_Comm_split");
    for (int i = 0; i < 3; ++i) {
      check_mpi(MPI_Comm_set_errhandler(comms_[i], MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      check_mpi(MPI_Comm_rank(comms_[i], &infos_[i].rank), "MPI_Comm_rank");
      check_mpi(MPI_Comm_size(comms_[i], &infos_[i].size), "MPI_Comm_size");
    }
    MB_CHECK(infos_[1].size == topo.ep && infos_[1].rank == topo.ep_rank,
             "expert group " << infos_[1].rank << "/" << infos_[1].size << " vs topology "
                             << topo.ep_rank << "/" << topo.ep);
    MB_CHECK(infos_[2].size == topo.edp && infos_[2].rank == topo.edp_rank,
             "expert-data group " << infos_[2].rank << "/" << infos_[2].size << " vs topology "
                                  << topo.edp_rank << "/" << topo.edp);
  }

  void release() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    // MPI writes the buffers of a started collective until it completes, and they may be freed
    // next. Unwinding from an error, a peer may never join it, so it is left alone then.
    if (std::uncaught_exceptions() <= uncaught_) {
      for (PendingOp& op : requests_) {
        if (!op.done) (void)MPI_Wait(&op.request, MPI_STATUS_IGNORE);
      }
    }
    requests_.clear();
    for (auto& [cols, type] : row_types_) MPI_Type_free(&type);
    row_types_.clear();
    for (MPI_Comm& c : comms_) {
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    }
  }

  static int index(Group g) { return static_cast<int>(g); }
  MPI_Comm comm(Group g) const { return comms_[index(g)]; }

  MPI_Datatype row_type(std::int64_t cols) {
    auto it = row_types_.find(cols);
    if (it != row_types_.end()) return it->second;
    MPI_Datatype t = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_contiguous(to_int(cols, "row width"), MPI_FLOAT, &t), "MPI_Type_contiguous");
    check_mpi(MPI_Type_commit(&t), "MPI_Type_commit");
    row_types_.emplace(cols, t);
    return t;
  }

  MPI_Comm comms_[3] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};  // indexed by Group
  GroupInfo infos_[3];
  std::map<std::int64_t, MPI_Datatype> row_types_;
  std::deque<PendingOp> requests_;  // a deque: a request's counts stay where MPI was told
  int uncaught_ = std::uncaught_exceptions();
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm world, const Topology& topo) {
  return std::make_unique<MpiCommunicator>(world, topo);
}

}  // namespace moebench
