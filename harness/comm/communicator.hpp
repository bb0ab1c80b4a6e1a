// The communication interface: the collectives the training step runs, on buffers owned by the
// compute backend. `mpi` implements it with MPI collectives on host memory; `nccl` (later) with
// NCCL on device memory. Every call names the group it runs in; groups are built once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "harness/core/tensor.hpp"

namespace moebench {

enum class Group {
  world,        // every rank
  expert,       // the EP ranks that split the experts between them (consecutive ranks)
  expert_data,  // the world/EP ranks that hold the same experts (stride EP)
};
const char* group_name(Group g);

// Where this rank sits in each group. Built by the runtime from the world rank and EP.
struct GroupInfo {
  int rank = 0;
  int size = 1;
};

// The argument checks every backend's alltoallv makes: equal row widths, disjoint buffers, one
// count and offset per rank, every row range inside its buffer. RuntimeError otherwise.
void check_alltoallv_layout(Group g, int group_size, Mat send,
                            std::span<const std::int64_t> send_rows,
                            std::span<const std::int64_t> send_offsets, Mat recv,
                            std::span<const std::int64_t> recv_rows,
                            std::span<const std::int64_t> recv_offsets);

// An operation started by one of Communicator's start_* calls; valid until clear_requests().
using CommRequest = int;

// Which queue a started operation runs on. Operations on one lane complete in the order they were
// started; the two lanes run concurrently (nccl: two streams), so gradient buckets in flight on
// the background lane do not hold up the next layer's all-to-all on the critical lane.
enum class CommLane { critical, background };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;
  virtual GroupInfo info(Group g) const = 0;

  // Host-side exchange of counts: send.size() is a multiple n of the group size; rank i of the
  // group gets send[i*n, (i+1)*n) and the result holds n values from each rank, in rank order.
  virtual std::vector<std::int64_t> alltoall_counts(Group g,
                                                    std::span<const std::int64_t> send) = 0;

  // Variable-size all-to-all of rows: send rows [send_offsets[i], +send_rows[i]) of `send` to
  // rank i; rows from rank i land at recv_offsets[i]. Row widths of send and recv are equal.
  virtual void alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                         std::span<const std::int64_t> send_offsets, Mat recv,
                         std::span<const std::int64_t> recv_rows,
                         std::span<const std::int64_t> recv_offsets) = 0;

  // Sum over the group, in place, on a contiguous buffer.
  virtual void allreduce_sum(Group g, Mat buf) = 0;
  // Sum over the group of the contiguous `buf` (numel divisible by the group size); this rank's
  // shard (numel / size elements, rank order) is written to `shard`.
  virtual void reduce_scatter_sum(Group g, Mat buf, Mat shard) = 0;
  // Every rank's `shard` concatenated in rank order into `buf`.
  virtual void allgather(Group g, Mat shard, Mat buf) = 0;
  // Non-blocking forms of the four collectives (the same arguments and checks). The operation
  // starts after the compute work issued so far and proceeds while later compute is issued;
  // wait(r) orders everything issued after it (compute, and the host on host-memory backends)
  // after its completion. Buffers must not be touched between start and wait. Every member of
  // the group starts the same operations in the same order. The defaults run the blocking call.
  virtual CommRequest start_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                                      std::span<const std::int64_t> send_offsets, Mat recv,
                                      std::span<const std::int64_t> recv_rows,
                                      std::span<const std::int64_t> recv_offsets, CommLane lane);
  virtual CommRequest start_allreduce_sum(Group g, Mat buf, CommLane lane);
  virtual CommRequest start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane lane);
  virtual CommRequest start_allgather(Group g, Mat shard, Mat buf, CommLane lane);
  virtual void wait(CommRequest r);
  // The operation's own duration in seconds, once it has completed (after wait() and
  // synchronize()): nccl times it with events on its stream; the host backends count the time
  // spent inside the library for it (issue and wait), since the host does the work.
  virtual double busy_time_s(CommRequest r);
  // Forgets every request; a new step starts at request 0. RuntimeError, forgetting nothing, if
  // one was never passed to wait() (synchronize() completes it but orders nothing after it on
  // the device, so that is a missing wait all the same).
  virtual void clear_requests();

  // Returns when every member of the group has called it (after this rank's issued work is done).
  virtual void barrier(Group g) = 0;
  // Waits until every previously issued operation of this communicator has completed.
  virtual void synchronize() = 0;

 protected:
  // The default start_* bookkeeping: a completed request that took `seconds`.
  CommRequest completed_request(double seconds);

 private:
  struct DefaultRequest {
    double busy_s = 0;
    bool waited = false;
  };
  std::vector<DefaultRequest> default_requests_;
};

}  // namespace moebench
