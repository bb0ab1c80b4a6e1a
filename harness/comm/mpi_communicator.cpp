// The mpi communication backend: blocking MPI collectives on host buffers. Rows travel as one
// contiguous MPI datatype per row so that element counts of large buffers still fit MPI's int.
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <mpi.h>

#include "harness/comm/communicator.hpp"
#include "harness/core/error.hpp"
#include "harness/runtime/mpi_check.hpp"
#include "harness/runtime/mpi_runtime.hpp"

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
    check_f32_contiguous(send, "alltoallv", "send");
    check_f32_contiguous(recv, "alltoallv", "recv");
    check_alltoallv_layout(g, info(g).size, send, send_rows, send_offsets, recv, recv_rows,
                           recv_offsets);
    const auto n_ranks = static_cast<std::size_t>(info(g).size);
    std::vector<int> sc(n_ranks), sd(n_ranks), rc(n_ranks), rd(n_ranks);
    for (std::size_t i = 0; i < n_ranks; ++i) {
      sc[i] = to_int(send_rows[i], "alltoallv send row count");
      sd[i] = to_int(send_offsets[i], "alltoallv send row offset");
      rc[i] = to_int(recv_rows[i], "alltoallv recv row count");
      rd[i] = to_int(recv_offsets[i], "alltoallv recv row offset");
    }
    const MPI_Datatype row = row_type(send.cols);
    check_mpi(MPI_Alltoallv(send.data, sc.data(), sd.data(), row, recv.data, rc.data(), rd.data(),
                            row, comm(g)),
              "MPI_Alltoallv");
  }

  void allreduce_sum(Group g, Mat buf) override {
    check_f32_contiguous(buf, "allreduce_sum", "buf");
    const int n = to_int(buf.numel(), "allreduce_sum element count");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf.data, n, MPI_FLOAT, MPI_SUM, comm(g)),
              "MPI_Allreduce");
  }

  void reduce_scatter_sum(Group g, Mat buf, Mat shard) override {
    check_f32_contiguous(buf, "reduce_scatter_sum", "buf");
    check_f32_contiguous(shard, "reduce_scatter_sum", "shard");
    const std::int64_t n_ranks = info(g).size;
    MB_CHECK(buf.numel() % n_ranks == 0 && shard.numel() == buf.numel() / n_ranks,
             "reduce_scatter_sum in " << group_name(g) << ": buffer of " << buf.numel()
                                      << " elements, shard of " << shard.numel() << ", " << n_ranks
                                      << " ranks");
    MB_CHECK(!spans_overlap(buf, shard), "reduce_scatter_sum: shard overlaps the input buffer");
    const int n = to_int(shard.numel(), "reduce_scatter_sum shard element count");
    check_mpi(MPI_Reduce_scatter_block(buf.data, shard.data, n, MPI_FLOAT, MPI_SUM, comm(g)),
              "MPI_Reduce_scatter_block");
  }

  void allgather(Group g, Mat shard, Mat buf) override {
    check_f32_contiguous(buf, "allgather", "buf");
    check_f32_contiguous(shard, "allgather", "shard");
    const GroupInfo gi = info(g);
    MB_CHECK(shard.numel() * gi.size == buf.numel(),
             "allgather in " << group_name(g) << ": shard of " << shard.numel()
                             << " elements, buffer of " << buf.numel() << ", " << gi.size
                             << " ranks");
    const int n = to_int(shard.numel(), "allgather shard element count");
    // A shard that already sits at this rank's place in buf (ZeRO-1 parameters) goes in place.
    const char* own_place = bytes_of(buf) + static_cast<std::int64_t>(gi.rank) * n * 4;
    const bool in_place = n > 0 && bytes_of(shard) == own_place;
    MB_CHECK(in_place || !spans_overlap(shard, buf),
             "allgather: shard overlaps the output buffer away from this rank's place");
    check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : shard.data, n, MPI_FLOAT, buf.data, n,
                            MPI_FLOAT, comm(g)),
              "MPI_Allgather");
  }

  void barrier(Group g) override { check_mpi(MPI_Barrier(comm(g)), "MPI_Barrier"); }
  void synchronize() override {}  // every call above is blocking

 private:
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
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm world, const Topology& topo) {
  return std::make_unique<MpiCommunicator>(world, topo);
}

}  // namespace moebench
