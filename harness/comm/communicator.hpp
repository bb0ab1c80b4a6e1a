// The communication interface: the collectives and point-to-point transfers the training step
// runs, on buffers owned by the compute backend. `mpi` implements it with MPI on host memory,
// `nccl` with NCCL on device memory, `staged` moves device buffers through a host communicator,
// `local` serves a one-rank job without MPI, `fault` wraps any of them to inject faults. Every
// call names the group it runs in; the groups are the parallel grid's (harness/parallel), built
// once.
//
// The public calls are not virtual: each checks its arguments once, for every backend, then calls
// the protected do_* that a backend implements (the non-virtual-interface pattern), so no backend
// repeats a check. A backend adds only what is its own (MPI's int counts, NCCL's data types).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "harness/comm/comm_backend.hpp"
#include "harness/core/tensor.hpp"
#include "harness/parallel/topology.hpp"

namespace moebench {

// An operation started by one of Communicator's start_* calls; valid until clear_requests().
using CommRequest = int;

// Which queue a started operation runs on. Operations on one lane complete in the order they were
// started; the lanes run concurrently (nccl: a stream each), so gradient buckets in flight on the
// background lane do not hold up the next layer's all-to-all on the critical lane, and pipeline
// transfers have a lane of their own.
enum class CommLane { critical, background, pipeline };
constexpr int kCommLanes = 3;
const char* lane_name(CommLane lane);

// One transfer of a batched point-to-point exchange (Megatron-Core's P2POp for
// batch_isend_irecv): send `buf` to, or receive it from, rank `peer` of the group.
struct P2POp {
  enum class Kind { send, recv };
  Kind kind = Kind::send;
  int peer = 0;
  Mat buf;
};

class Communicator {
 public:
  explicit Communicator(const Topology& topo);
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual std::string name() const = 0;
  // How operations on concurrent lanes are kept in one order on every rank, for the report ("":
  // the backend has nothing to say, e.g. one host progress engine).
  virtual std::string lane_ordering() const { return ""; }
  // This rank's place in the grid the groups come from.
  const Topology& topology() const { return topo_; }
  // Kept from construction: the step asks on every collective.
  GroupInfo info(Group g) const { return infos_[static_cast<std::size_t>(g)]; }

  // Host-side exchange of counts: send.size() is a multiple n of the group size; rank i of the
  // group gets send[i*n, (i+1)*n) and the result holds n values from each rank, in rank order.
  std::vector<std::int64_t> alltoall_counts(Group g, std::span<const std::int64_t> send);

  // Variable-size all-to-all of rows: send rows [send_offsets[i], +send_rows[i]) of `send` to
  // rank i; rows from rank i land at recv_offsets[i]. send and recv are contiguous, disjoint and
  // of one dtype and row width.
  void alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                 std::span<const std::int64_t> send_offsets, Mat recv,
                 std::span<const std::int64_t> recv_rows,
                 std::span<const std::int64_t> recv_offsets);
  // Sum over the group, in place, on a contiguous buffer.
  void allreduce_sum(Group g, Mat buf);
  // Sum over the group of the contiguous `buf` (numel divisible by the group size); this rank's
  // shard (numel / size elements, rank order) is written to `shard`, which does not overlap buf.
  void reduce_scatter_sum(Group g, Mat buf, Mat shard);
  // Every rank's `shard` concatenated in rank order into `buf`. The shard may already sit at this
  // rank's place in buf (ZeRO-1 parameters); it overlaps buf nowhere else.
  void allgather(Group g, Mat shard, Mat buf);
  // The sends and receives of `ops` to and from peers of the group, started together and
  // complete on return. Between one pair of ranks, sends match receives in list order. Receive
  // buffers overlap no other buffer of the batch.
  void batch_p2p(Group g, std::span<const P2POp> ops);

  // Non-blocking forms (the same arguments and checks). The operation starts after the compute
  // work issued so far and proceeds while later compute is issued; wait(r) orders everything
  // issued after it (compute, and the host on host-memory backends) after its completion.
  // Buffers must not be touched between start and wait. Every member of the group starts the
  // same operations in the same order.
  CommRequest start_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                              std::span<const std::int64_t> send_offsets, Mat recv,
                              std::span<const std::int64_t> recv_rows,
                              std::span<const std::int64_t> recv_offsets, CommLane lane);
  CommRequest start_allreduce_sum(Group g, Mat buf, CommLane lane);
  CommRequest start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane lane);
  CommRequest start_allgather(Group g, Mat shard, Mat buf, CommLane lane);
  CommRequest start_batch_p2p(Group g, std::span<const P2POp> ops, CommLane lane);
  void wait(CommRequest r) { do_wait(r); }
  // The operation's own duration in seconds, once it has completed (after wait() and
  // synchronize()): nccl times it with events on its stream; the host backends count the time
  // spent inside the library for it (issue and wait), since the host does the work.
  double busy_time_s(CommRequest r) { return do_busy_time_s(r); }
  // Forgets every request; a new step starts at request 0 (the step calls it first, so it also
  // marks the step boundary). RuntimeError, forgetting nothing, if one was never passed to
  // wait() (synchronize() completes it but orders nothing after it on the device, so that is a
  // missing wait all the same).
  void clear_requests() { do_clear_requests(); }

  // Returns when every member of the group has called it (after this rank's issued work is done).
  void barrier(Group g);
  // Waits until every previously issued operation of this communicator has completed.
  void synchronize() { do_synchronize(); }

  // Whether a shard sits exactly at this rank's place in an all-gather's output.
  bool shard_at_own_place(Group g, const Mat& shard, const Mat& buf) const;

  // NVLink domains: each world rank's domain (harness/parallel/domains.hpp). Once set, every
  // all-to-all of rows counts the bytes this rank sends to peers inside its own domain and to
  // peers outside it (dispatch and combine: traffic that stays on NVLink, and traffic that
  // crosses to the network). RuntimeError unless there is one domain per world rank.
  void set_domains(std::vector<int> world_domains);
  struct DomainTraffic {
    double in_domain_bytes = 0;
    double cross_domain_bytes = 0;
  };
  DomainTraffic domain_traffic() const { return traffic_; }
  void reset_domain_traffic() { traffic_ = {}; }

 protected:
  // The backends' operations, called with checked arguments.
  virtual std::vector<std::int64_t> do_alltoall_counts(Group g,
                                                       std::span<const std::int64_t> send) = 0;
  virtual void do_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                            std::span<const std::int64_t> send_offsets, Mat recv,
                            std::span<const std::int64_t> recv_rows,
                            std::span<const std::int64_t> recv_offsets) = 0;
  virtual void do_allreduce_sum(Group g, Mat buf) = 0;
  virtual void do_reduce_scatter_sum(Group g, Mat buf, Mat shard) = 0;
  virtual void do_allgather(Group g, Mat shard, Mat buf) = 0;
  virtual void do_batch_p2p(Group g, std::span<const P2POp> ops) = 0;
  virtual void do_barrier(Group g) = 0;
  virtual void do_synchronize() = 0;
  // The defaults run the blocking call and keep a completed request of its host time.
  virtual CommRequest do_start_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                                         std::span<const std::int64_t> send_offsets, Mat recv,
                                         std::span<const std::int64_t> recv_rows,
                                         std::span<const std::int64_t> recv_offsets, CommLane lane);
  virtual CommRequest do_start_allreduce_sum(Group g, Mat buf, CommLane lane);
  virtual CommRequest do_start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane lane);
  virtual CommRequest do_start_allgather(Group g, Mat shard, Mat buf, CommLane lane);
  virtual CommRequest do_start_batch_p2p(Group g, std::span<const P2POp> ops, CommLane lane);
  virtual void do_wait(CommRequest r);
  virtual double do_busy_time_s(CommRequest r);
  virtual void do_clear_requests();

  // The default start_* bookkeeping: a completed request that took `seconds`.
  CommRequest completed_request(double seconds);

 private:
  struct DefaultRequest {
    double busy_s = 0;
    bool waited = false;
  };
  void check_alltoall_counts(Group g, std::span<const std::int64_t> send) const;
  void check_alltoallv(Group g, const Mat& send, std::span<const std::int64_t> send_rows,
                       std::span<const std::int64_t> send_offsets, const Mat& recv,
                       std::span<const std::int64_t> recv_rows,
                       std::span<const std::int64_t> recv_offsets) const;
  void check_allreduce(Group g, const Mat& buf) const;
  void check_reduce_scatter(Group g, const Mat& buf, const Mat& shard) const;
  void check_allgather(Group g, const Mat& shard, const Mat& buf) const;
  void check_batch_p2p(Group g, std::span<const P2POp> ops) const;
  GroupInfo member_of(Group g, const char* op) const;

  void count_traffic(Group g, const Mat& send, std::span<const std::int64_t> send_rows);

  Topology topo_;
  std::array<GroupInfo, kGroupCount> infos_;
  std::vector<DefaultRequest> default_requests_;
  // With domains set: per group, whether each group rank shares this rank's domain.
  std::array<std::vector<bool>, kGroupCount> same_domain_;
  DomainTraffic traffic_;
};

}  // namespace moebench
