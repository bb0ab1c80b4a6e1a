// The mpi communication backend: MPI collectives and point-to-point transfers on host buffers,
// one MPI communicator per group of the parallel grid. Rows travel as one contiguous MPI datatype
// per row so that element counts of large buffers still fit MPI's int.
//
// Every operation is MPI's non-blocking form, completed by polling against --timeout
// (mpi_wait.hpp): the blocking forms are a start and a wait. The start_* forms are issued at once:
// MPI matches the collectives of a communicator, blocking and non-blocking alike, in the order each
// rank issues them, so a started collective keeps its place among the blocking calls on its group
// exactly as if it were one of them. The lanes need nothing of their own: each group is its own MPI
// communicator, and operations on different communicators progress independently. Point-to-point
// transfers use one tag, so between two ranks of a group they match in the order they were
// started. OpenMPI has no progress thread by default, so most of a started operation's work
// happens inside wait() (or inside any other MPI call made meanwhile); its busy time is the host
// time spent in MPI for it.
#include "harness/backends/mpi/mpi_communicator.hpp"

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
#include "harness/backends/mpi/mpi_wait.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/error.hpp"
#include "harness/core/host.hpp"

namespace moebench {

namespace {

constexpr int kP2PTag = 17;

int to_int(std::int64_t v, const char* what) {
  MB_CHECK(v >= 0 && v <= INT_MAX,
           what << " " << v << " does not fit MPI's int count (0.." << INT_MAX << ")");
  return static_cast<int>(v);
}

// The interface checked shapes and contiguity; the mpi backend moves FP32 only.
void check_f32(const Mat& m, const char* op, const char* which) {
  MB_CHECK(m.dtype == DType::f32,
           op << ": " << which << " is " << dtype_name(m.dtype) << "; the mpi backend moves f32");
}

// A started operation until clear_requests().
struct PendingOp {
  std::vector<MPI_Request> requests;  // one for a collective, one per transfer for a batch
  const char* wait_call = "";         // "MPI_Wait (MPI_Iallreduce)", for the error message
  Group group = Group::world;         // for the timeout's message
  double busy_s = 0;                  // host seconds inside MPI for it: the start and the wait
  bool done = false;                  // MPI_Waitall returned
  bool waited = false;                // passed to wait()
  // MPI_Ialltoallv reads its count and displacement arrays until the operation completes.
  std::vector<int> counts;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm world, const Topology& topo, double timeout_s)
      : Communicator(topo), timeout_s_(timeout_s) {
    MB_CHECK(timeout_s > 0, "mpi communicator timeout " << timeout_s << " s");
    for (MPI_Comm& c : comms_) c = MPI_COMM_NULL;  // not 0 in every MPI
    try {
      build_groups(world, topo);
    } catch (...) {
      release();  // a throwing constructor runs no destructor
      throw;
    }
  }

  ~MpiCommunicator() override { release(); }

  std::string name() const override { return "mpi"; }
  std::string lane_ordering() const override {
    return "mpi: non-blocking operations, matched per group in issue order; lanes need no ordering";
  }

 protected:
  std::vector<std::int64_t> do_alltoall_counts(Group g,
                                               std::span<const std::int64_t> send) override {
    const int per_rank = to_int(static_cast<std::int64_t>(send.size() / info(g).size), "count");
    std::vector<std::int64_t> recv(send.size());
    blocking(g, "MPI_Ialltoall", [&](MPI_Request* r) {
      return MPI_Ialltoall(send.data(), per_rank, MPI_INT64_T, recv.data(), per_rank, MPI_INT64_T,
                           comm(g), r);
    });
    return recv;
  }

  void do_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                    std::span<const std::int64_t> send_offsets, Mat recv,
                    std::span<const std::int64_t> recv_rows,
                    std::span<const std::int64_t> recv_offsets) override {
    const std::vector<int> c =
        alltoallv_counts(send, send_rows, send_offsets, recv_rows, recv_offsets);
    const int* sc = c.data();
    const std::size_t n = c.size() / 4;
    const MPI_Datatype row = row_type(send.cols);
    blocking(g, "MPI_Ialltoallv", [&](MPI_Request* r) {
      return MPI_Ialltoallv(send.data, sc, sc + n, row, recv.data, sc + 2 * n, sc + 3 * n, row,
                            comm(g), r);
    });
  }

  void do_allreduce_sum(Group g, Mat buf) override {
    const int n = allreduce_count(buf);
    blocking(g, "MPI_Iallreduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, buf.data, n, MPI_FLOAT, MPI_SUM, comm(g), r);
    });
  }

  void do_reduce_scatter_sum(Group g, Mat buf, Mat shard) override {
    const int n = reduce_scatter_count(buf, shard);
    blocking(g, "MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(buf.data, shard.data, n, MPI_FLOAT, MPI_SUM, comm(g), r);
    });
  }

  void do_allgather(Group g, Mat shard, Mat buf) override {
    const int n = allgather_count(shard, buf);
    const bool in_place = shard_at_own_place(g, shard, buf);
    blocking(g, "MPI_Iallgather", [&](MPI_Request* r) {
      return MPI_Iallgather(in_place ? MPI_IN_PLACE : shard.data, n, MPI_FLOAT, buf.data, n,
                            MPI_FLOAT, comm(g), r);
    });
  }

  void do_batch_p2p(Group g, std::span<const P2POp> ops) override {
    // Started and completed at once: the blocking form of the same transfers.
    PendingOp op;
    op.wait_call = "MPI_Waitall (batch_p2p)";
    op.group = g;
    issue_p2p(op, g, ops);
    complete(op);
  }

  CommRequest do_start_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                                 std::span<const std::int64_t> send_offsets, Mat recv,
                                 std::span<const std::int64_t> recv_rows,
                                 std::span<const std::int64_t> recv_offsets, CommLane) override {
    std::vector<int> counts =
        alltoallv_counts(send, send_rows, send_offsets, recv_rows, recv_offsets);
    PendingOp& op = new_request("MPI_Wait (MPI_Ialltoallv)", g);
    op.counts = std::move(counts);
    const int* sc = op.counts.data();
    const std::size_t n = op.counts.size() / 4;
    const MPI_Datatype row = row_type(send.cols);
    return issue(op, "MPI_Ialltoallv", [&](MPI_Request* r) {
      return MPI_Ialltoallv(send.data, sc, sc + n, row, recv.data, sc + 2 * n, sc + 3 * n, row,
                            comm(g), r);
    });
  }

  CommRequest do_start_allreduce_sum(Group g, Mat buf, CommLane) override {
    const int n = allreduce_count(buf);
    PendingOp& op = new_request("MPI_Wait (MPI_Iallreduce)", g);
    return issue(op, "MPI_Iallreduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, buf.data, n, MPI_FLOAT, MPI_SUM, comm(g), r);
    });
  }

  CommRequest do_start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane) override {
    const int n = reduce_scatter_count(buf, shard);
    PendingOp& op = new_request("MPI_Wait (MPI_Ireduce_scatter_block)", g);
    return issue(op, "MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(buf.data, shard.data, n, MPI_FLOAT, MPI_SUM, comm(g), r);
    });
  }

  CommRequest do_start_allgather(Group g, Mat shard, Mat buf, CommLane) override {
    const int n = allgather_count(shard, buf);
    const bool in_place = shard_at_own_place(g, shard, buf);
    PendingOp& op = new_request("MPI_Wait (MPI_Iallgather)", g);
    return issue(op, "MPI_Iallgather", [&](MPI_Request* r) {
      return MPI_Iallgather(in_place ? MPI_IN_PLACE : shard.data, n, MPI_FLOAT, buf.data, n,
                            MPI_FLOAT, comm(g), r);
    });
  }

  CommRequest do_start_batch_p2p(Group g, std::span<const P2POp> ops, CommLane) override {
    PendingOp& op = new_request("MPI_Waitall (batch_p2p)", g);
    try {
      issue_p2p(op, g, ops);
    } catch (...) {
      requests_.pop_back();
      throw;
    }
    return static_cast<CommRequest>(requests_.size()) - 1;
  }

  void do_wait(CommRequest r) override {
    PendingOp& op = request(r, "wait");
    op.waited = true;
    complete(op);
  }

  double do_busy_time_s(CommRequest r) override {
    const PendingOp& op = request(r, "busy_time_s");
    MB_CHECK(op.done, "busy_time_s of communication request "
                          << r << " before it completed: wait() or synchronize() first");
    return op.busy_s;
  }

  void do_clear_requests() override {
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      MB_CHECK(requests_[i].waited, "clear_requests with communication request "
                                        << i << " (" << requests_[i].wait_call
                                        << ") not waited for: its buffers are still in use");
    }
    requests_.clear();
  }

  void do_barrier(Group g) override {
    blocking(g, "MPI_Ibarrier", [&](MPI_Request* r) { return MPI_Ibarrier(comm(g), r); });
  }
  // Completes every started operation: the host is then ordered after all of them.
  void do_synchronize() override {
    for (PendingOp& op : requests_) complete(op);
  }

 private:
  // MPI's int counts of an all-to-all: send counts, send displacements, receive counts, receive
  // displacements, in rows, one per rank each (the interface checked the ranges).
  std::vector<int> alltoallv_counts(const Mat& send, std::span<const std::int64_t> send_rows,
                                    std::span<const std::int64_t> send_offsets,
                                    std::span<const std::int64_t> recv_rows,
                                    std::span<const std::int64_t> recv_offsets) {
    check_f32(send, "alltoallv", "send");
    const std::size_t n_ranks = send_rows.size();
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
    check_f32(buf, "allreduce_sum", "buf");
    return to_int(buf.numel(), "allreduce_sum element count");
  }

  static int reduce_scatter_count(const Mat& buf, const Mat& shard) {
    check_f32(buf, "reduce_scatter_sum", "buf");
    return to_int(shard.numel(), "reduce_scatter_sum shard element count");
  }

  static int allgather_count(const Mat& shard, const Mat& buf) {
    check_f32(buf, "allgather", "buf");
    return to_int(shard.numel(), "allgather shard element count");
  }

  // MPI_Isend / MPI_Irecv of every transfer, as whole rows; on failure the ones issued are
  // cancelled by the caller's error path (the job ends).
  void issue_p2p(PendingOp& op, Group g, std::span<const P2POp> ops) {
    const Clock::time_point t0 = Clock::now();
    for (const P2POp& p : ops) {
      check_f32(p.buf, "batch_p2p", "a buffer");
      const int rows = to_int(p.buf.rows, "batch_p2p row count");
      const MPI_Datatype row = row_type(p.buf.cols);
      MPI_Request r = MPI_REQUEST_NULL;
      const int rc = p.kind == P2POp::Kind::send
                         ? MPI_Isend(p.buf.data, rows, row, p.peer, kP2PTag, comm(g), &r)
                         : MPI_Irecv(p.buf.data, rows, row, p.peer, kP2PTag, comm(g), &r);
      check_mpi(rc, p.kind == P2POp::Kind::send ? "MPI_Isend" : "MPI_Irecv");
      op.requests.push_back(r);
    }
    op.busy_s += seconds_since(t0);
  }

  PendingOp& new_request(const char* wait_call, Group g) {
    PendingOp& op = requests_.emplace_back();
    op.wait_call = wait_call;
    op.group = g;
    return op;
  }

  // A blocking operation: its non-blocking form, started and completed within the timeout.
  template <typename F>
  void blocking(Group g, const char* call, F&& start) {
    start_and_wait(call, start, timeout_s_, [&] { return waiting_for(call, g); });
  }

  // What a wait that timed out was for, for its message.
  std::string waiting_for(const char* call, Group g) const {
    return "mpi on rank " + std::to_string(topology().rank) + " (host " + host_name() +
           "): " + call + " on the " + group_name(g) + " group (" + std::to_string(info(g).size) +
           " ranks: world " + world_ranks_of(comm(g)) + ")";
  }

  // Runs the MPI_I* call of the newest request, timing it. A call that fails leaves no request.
  template <typename F>
  CommRequest issue(PendingOp& op, const char* call, F&& start) {
    op.requests.assign(1, MPI_REQUEST_NULL);
    const Clock::time_point t0 = Clock::now();
    const int rc = start(&op.requests[0]);
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

  // Completes the operation within the timeout, once: waiting again for a completed request is
  // harmless. A timeout leaves it not done (its buffers are MPI's until the job ends).
  void complete(PendingOp& op) {
    if (op.done) return;
    const Clock::time_point t0 = Clock::now();
    wait_within(op.requests, timeout_s_, op.wait_call,
                [&] { return waiting_for(op.wait_call, op.group); });
    op.busy_s += seconds_since(t0);
    op.done = true;
  }

  // One MPI communicator per group of the grid: the colour is the index of this rank's group,
  // the key its place there, so MPI's ranks are the grid's. A rank in no group of a kind (a
  // middle pipeline stage and the embedding group) has none.
  void build_groups(MPI_Comm world, const Topology& topo) {
    int size = 0;
    int rank = 0;
    check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
    check_mpi(MPI_Comm_rank(world, &rank), "MPI_Comm_rank");
    MB_CHECK(size == topo.world() && rank == topo.rank,
             "topology says rank " << topo.rank << " of " << topo.world() << ", communicator has "
                                   << rank << " of " << size);
    MPI_Comm base = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(world, &base), "MPI_Comm_dup");
    comms_[index(Group::world)] = base;
    check_mpi(MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    for (Group g : kGroups) {
      if (g == Group::world) continue;
      const int color = topo.grid.group_index(g, rank);
      const GroupInfo want = topo.group(g);
      MPI_Comm& c = comms_[index(g)];
      check_mpi(MPI_Comm_split(base, color < 0 ? MPI_UNDEFINED : color, want.rank, &c),
                "MPI_Comm_split");
      if (c == MPI_COMM_NULL) {
        MB_CHECK(!want.member(), "no MPI communicator for the " << group_name(g) << " group");
        continue;
      }
      check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      GroupInfo got;
      check_mpi(MPI_Comm_rank(c, &got.rank), "MPI_Comm_rank");
      check_mpi(MPI_Comm_size(c, &got.size), "MPI_Comm_size");
      MB_CHECK(got.rank == want.rank && got.size == want.size,
               group_name(g) << " group: MPI says rank " << got.rank << " of " << got.size
                             << ", the grid " << want.rank << " of " << want.size);
    }
  }

  void release() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    // MPI writes the buffers of a started operation until it completes, and they may be freed
    // next. Unwinding from an error, a peer may never join it, so it is left alone then.
    if (std::uncaught_exceptions() <= uncaught_) {
      for (PendingOp& op : requests_) {
        if (!op.done) {
          (void)MPI_Waitall(static_cast<int>(op.requests.size()), op.requests.data(),
                            MPI_STATUSES_IGNORE);
        }
      }
    }
    requests_.clear();
    for (auto& [cols, type] : row_types_) MPI_Type_free(&type);
    row_types_.clear();
    for (MPI_Comm& c : comms_) {
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
      c = MPI_COMM_NULL;
    }
  }

  static std::size_t index(Group g) { return static_cast<std::size_t>(g); }
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

  double timeout_s_;
  MPI_Comm comms_[kGroupCount];  // indexed by Group; MPI_COMM_NULL where not a member
  std::map<std::int64_t, MPI_Datatype> row_types_;
  std::deque<PendingOp> requests_;  // a deque: a request's counts stay where MPI was told
  int uncaught_ = std::uncaught_exceptions();
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm world, const Topology& topo,
                                                    double timeout_s) {
  return std::make_unique<MpiCommunicator>(world, topo, timeout_s);
}

}  // namespace moebench
