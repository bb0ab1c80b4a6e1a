// The nccl communicator's class (nccl_communicator.cpp has the design: lanes, ordering, warm-up,
// hang detection), shared by its two files: nccl_communicator.cpp, the operations and the waits;
// nccl_setup.cpp, the communicators' creation, warm-up and end.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/backends/cuda/cuda_compute.hpp"
#include "harness/backends/in_flight/in_flight_log.hpp"
#include "harness/backends/mpi/mpi_check.hpp"
#include "harness/backends/mpi/mpi_communicator.hpp"
#include "harness/core/error.hpp"
#include "harness/core/host.hpp"
#include "harness/core/stop_request.hpp"

#include "harness/backends/nccl/nccl_communicator.hpp"

namespace moebench::nccl_detail {

using Clock = std::chrono::steady_clock;

inline const char* bytes_of(const Mat& m) {
  return static_cast<const char*>(m.data);
}

inline ncclDataType_t nccl_type(const Mat& m, const char* op, const char* which) {
  MB_CHECK(m.contiguous(), op << ": " << which << " is strided (ld " << m.ld << ", cols " << m.cols
                              << "); the nccl backend needs contiguous rows");
  switch (m.dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      break;
  }
  MB_CHECK(false, op << ": " << which << " is " << dtype_name(m.dtype)
                     << "; the nccl backend moves f32 and bf16");
  return ncclFloat32;
}

inline std::size_t count(std::int64_t n) {
  return static_cast<std::size_t>(n);
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm world, const Topology& topo, CudaComputeApi& compute, double timeout_s)
      : Communicator(topo), timeout_s_(timeout_s), uncaught_(std::uncaught_exceptions()) {
    try {
      setup(world, topo, compute);
    } catch (...) {
      abort_all();  // a throwing constructor runs no destructor
      release_cuda();
      throw;
    }
  }

  ~NcclCommunicator() override {
    (void)cudaSetDevice(device_);
    // Unwinding from an error: peers may be stuck in a collective, so never wait for them.
    if (std::uncaught_exceptions() > uncaught_ || !finalize_all()) abort_all();
    release_cuda();
  }

  std::string name() const override { return "nccl"; }
  std::string lane_ordering() const override { return ordering_; }

 protected:
  // Counts are host values: they travel over the matching MPI groups, not through the device.
  std::vector<std::int64_t> do_alltoall_counts(Group g,
                                               std::span<const std::int64_t> send) override {
    return host_->alltoall_counts(g, send);
  }

  void do_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                    std::span<const std::int64_t> send_offsets, Mat recv,
                    std::span<const std::int64_t> recv_rows,
                    std::span<const std::int64_t> recv_offsets) override {
    enqueue_alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets,
                      CommLane::critical, false);
  }
  void do_allreduce_sum(Group g, Mat buf) override {
    enqueue_allreduce_sum(g, buf, CommLane::critical, false);
  }
  void do_reduce_scatter_sum(Group g, Mat buf, Mat shard) override {
    enqueue_reduce_scatter_sum(g, buf, shard, CommLane::critical, false);
  }
  void do_allgather(Group g, Mat shard, Mat buf) override {
    enqueue_allgather(g, shard, buf, CommLane::critical, false);
  }
  void do_batch_p2p(Group g, std::span<const P2POp> ops) override {
    enqueue_batch_p2p(g, ops, CommLane::pipeline, false);
  }

  CommRequest do_start_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                                 std::span<const std::int64_t> send_offsets, Mat recv,
                                 std::span<const std::int64_t> recv_rows,
                                 std::span<const std::int64_t> recv_offsets,
                                 CommLane lane) override {
    return enqueue_alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets, lane,
                             true);
  }
  CommRequest do_start_allreduce_sum(Group g, Mat buf, CommLane lane) override {
    return enqueue_allreduce_sum(g, buf, lane, true);
  }
  CommRequest do_start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane lane) override {
    return enqueue_reduce_scatter_sum(g, buf, shard, lane, true);
  }
  CommRequest do_start_allgather(Group g, Mat shard, Mat buf, CommLane lane) override {
    return enqueue_allgather(g, shard, buf, lane, true);
  }
  CommRequest do_start_batch_p2p(Group g, std::span<const P2POp> ops, CommLane lane) override {
    return enqueue_batch_p2p(g, ops, lane, true);
  }

  void do_wait(CommRequest r) override {
    const auto end = static_cast<cudaEvent_t>(log_.end_event(r, "wait"));
    usable();
    if (!log_.mark_waited(r)) return;
    check_cuda(cudaStreamWaitEvent(compute_stream_, end, 0), "cudaStreamWaitEvent");
  }

  double do_busy_time_s(CommRequest r) override {
    const auto start = static_cast<cudaEvent_t>(log_.start_event(r, "busy_time_s"));
    const auto end = static_cast<cudaEvent_t>(log_.end_event(r, "busy_time_s"));
    float ms = 0;
    const cudaError_t e = cudaEventElapsedTime(&ms, start, end);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      const std::string& what = log_.description(r, "busy_time_s");
      MB_CHECK(e != cudaErrorNotReady, "busy_time_s of communication request "
                                           << r << " (" << what
                                           << ") before it completed: synchronize() first");
      MB_CHECK(false, "busy_time_s of communication request "
                          << r << " (" << what
                          << "): cudaEventElapsedTime failed: " << cudaGetErrorString(e));
    }
    return ms * 1e-3;
  }

  void do_clear_requests() override { log_.clear_requests(); }

  // Waits for the critical lane and the compute stream (which may wait for either lane), not
  // for gradient buckets still flowing on the background lane, then for the group's members.
  void do_barrier(Group g) override {
    poll_until_idle(
        {streams_[0], compute_stream_},
        std::string("the compute work before the barrier in the ") + group_name(g) + " group");
    prune(0);
    host_->barrier(g);
  }

  void do_synchronize() override {
    for (int i = 0; i < kLanes; ++i) prune(i);
    if (log_.idle()) {
      if (!aborted_) poll_async_errors();
      return;
    }
    poll_until_idle({streams_[0], streams_[1], streams_[2]}, "communication");
    for (int i = 0; i < kLanes; ++i) prune(i);
  }

 private:
  static bool ok(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

  void setup(MPI_Comm world, const Topology& topo, CudaComputeApi& compute);

  // Before the first NCCL call: NCCL reads its parameters once.
  void choose_lane_ordering();

  // See the top of the file. A failure or a peer that never arrives ends in fail() as anywhere.
  void warm_up();

  void split(Group g, int color, int key);

  // NCCL hangs or fails when two ranks of a communicator drive one GPU: refuse it up front,
  // with the same verdict on every rank, said once.
  void check_one_gpu_per_rank(MPI_Comm world, const std::string& bus_id);

  // The operations: the interface checked shapes, sizes and overlaps; the data types are checked
  // here first (nothing may throw between ncclGroupStart and ncclGroupEnd), then run() orders
  // them on their lane. `keep` makes a request of it (start_*); otherwise the compute stream
  // waits for it at once (the blocking forms).
  CommRequest enqueue_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                                std::span<const std::int64_t> send_offsets, Mat recv,
                                std::span<const std::int64_t> recv_rows,
                                std::span<const std::int64_t> recv_offsets, CommLane lane,
                                bool keep) {
    const ncclDataType_t type = nccl_type(send, "alltoallv", "send");
    const auto n_ranks = static_cast<std::size_t>(info(g).size);
    const std::int64_t row_bytes = send.cols * static_cast<std::int64_t>(dtype_size(send.dtype));
    return run("alltoallv", g, lane, keep, [&](ncclComm_t c, cudaStream_t stream) {
      // A peer with no rows is skipped on both sides (the counts exchange made them agree).
      ncclResult_t first_error = ncclGroupStart();
      for (std::size_t i = 0; i < n_ranks && first_error == ncclSuccess; ++i) {
        const int peer = static_cast<int>(i);
        ncclResult_t r = ncclSuccess;
        if (send_rows[i] > 0) {
          r = ncclSend(bytes_of(send) + send_offsets[i] * row_bytes,
                       count(send_rows[i] * send.cols), type, peer, c, stream);
        }
        if (ok(r) && recv_rows[i] > 0) {
          r = ncclRecv(static_cast<char*>(recv.data) + recv_offsets[i] * row_bytes,
                       count(recv_rows[i] * recv.cols), type, peer, c, stream);
        }
        if (!ok(r)) first_error = r;
      }
      const ncclResult_t end = ncclGroupEnd();
      check(ok(first_error) ? end : first_error, "ncclSend/ncclRecv group", c);
    });
  }

  CommRequest enqueue_allreduce_sum(Group g, Mat buf, CommLane lane, bool keep) {
    const ncclDataType_t type = nccl_type(buf, "allreduce_sum", "buf");
    return run("allreduce_sum", g, lane, keep, [&](ncclComm_t c, cudaStream_t stream) {
      check(ncclAllReduce(buf.data, buf.data, count(buf.numel()), type, ncclSum, c, stream),
            "ncclAllReduce", c);
    });
  }

  CommRequest enqueue_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane lane, bool keep) {
    const ncclDataType_t type = nccl_type(buf, "reduce_scatter_sum", "buf");
    return run("reduce_scatter_sum", g, lane, keep, [&](ncclComm_t c, cudaStream_t stream) {
      check(ncclReduceScatter(buf.data, shard.data, count(shard.numel()), type, ncclSum, c, stream),
            "ncclReduceScatter", c);
    });
  }

  CommRequest enqueue_allgather(Group g, Mat shard, Mat buf, CommLane lane, bool keep) {
    const ncclDataType_t type = nccl_type(buf, "allgather", "buf");
    return run("allgather", g, lane, keep, [&](ncclComm_t c, cudaStream_t stream) {
      check(ncclAllGather(shard.data, buf.data, count(shard.numel()), type, c, stream),
            "ncclAllGather", c);
    });
  }

  // Megatron's batch_isend_irecv: every ncclSend and ncclRecv inside one group call.
  CommRequest enqueue_batch_p2p(Group g, std::span<const P2POp> ops, CommLane lane, bool keep) {
    std::vector<ncclDataType_t> types;
    for (const P2POp& op : ops) types.push_back(nccl_type(op.buf, "batch_p2p", "a buffer"));
    return run("batch_p2p", g, lane, keep, [&](ncclComm_t c, cudaStream_t stream) {
      ncclResult_t first_error = ncclGroupStart();
      for (std::size_t i = 0; i < ops.size() && first_error == ncclSuccess; ++i) {
        const P2POp& op = ops[i];
        if (op.buf.numel() == 0) continue;  // both sides skip an empty transfer
        const ncclResult_t r =
            op.kind == P2POp::Kind::send
                ? ncclSend(op.buf.data, count(op.buf.numel()), types[i], op.peer, c, stream)
                : ncclRecv(op.buf.data, count(op.buf.numel()), types[i], op.peer, c, stream);
        if (!ok(r)) first_error = r;
      }
      const ncclResult_t end = ncclGroupEnd();
      check(ok(first_error) ? end : first_error, "ncclSend/ncclRecv group", c);
    });
  }

  // Orders `nccl_calls` on the lane after the compute stream's work so far, between a timing
  // event and an end event, and logs it as in flight for hang reports.
  template <typename F>
  CommRequest run(const char* op, Group g, CommLane which, bool keep, F&& nccl_calls) {
    usable();
    const int lane = InFlightLog::lane_index(which);
    cudaStream_t stream = streams_[lane];
    prune(lane);  // keeps the log short on a lane nobody synchronizes
    // The lane is named before anything can wait, so a timeout in wait_ready says it too.
    last_op_ = std::string(op) + " in the " + group_name(g) + " group (" +
               InFlightLog::lane_name(lane) + " lane)";
    check_cuda(cudaEventRecord(compute_done_, compute_stream_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream, compute_done_, 0), "cudaStreamWaitEvent");
    // Without NCCL's implicit launch order: after the operation issued before it on another lane
    // (cudaStreamWaitEvent takes the event's latest record now, so its reuse later is harmless).
    if (serialise_lanes_ && last_end_ != nullptr && last_lane_ != lane) {
      check_cuda(cudaStreamWaitEvent(stream, last_end_, 0), "cudaStreamWaitEvent");
    }
    cudaEvent_t start = keep ? take_event() : nullptr;
    cudaEvent_t end = take_event();
    if (keep) check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    nccl_calls(comm(g), stream);
    wait_ready(comm(g));  // non-blocking: the operation may still be being enqueued
    check_cuda(cudaEventRecord(end, stream), "cudaEventRecord");
    last_end_ = end;
    last_lane_ = lane;
    if (!keep) check_cuda(cudaStreamWaitEvent(compute_stream_, end, 0), "cudaStreamWaitEvent");
    return log_.add(lane, last_op_, start, end, keep);
  }

  // Drops the lane's completed collectives from the log; a device error fails.
  void prune(int lane) {
    log_.prune(lane, [this](InFlightLog::Event e) {
      const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
      if (r == cudaSuccess) return true;
      (void)cudaGetLastError();
      if (r != cudaErrorNotReady) {
        fail(culprit(last_op_) + " failed on the device: " + cudaGetErrorName(r) + " (" +
             cudaGetErrorString(r) + ")");
      }
      return false;
    });
  }

  // The collective a timeout or device error is blamed on: the oldest one still in flight,
  // else `otherwise`.
  std::string culprit(const std::string& otherwise) const {
    const std::string oldest = log_.oldest_running([](InFlightLog::Event e) {
      const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
      if (r != cudaSuccess) (void)cudaGetLastError();
      return r == cudaSuccess;
    });
    return oldest.empty() ? otherwise : oldest;
  }

  // Polls until every stream has drained, each poll also checking NCCL's asynchronous errors,
  // against the timeout.
  void poll_until_idle(std::initializer_list<cudaStream_t> streams, const std::string& what) {
    usable();
    const Clock::time_point deadline = deadline_from_now();
    for (;;) {
      bool idle = true;
      for (cudaStream_t s : streams) {
        const cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess) continue;
        (void)cudaGetLastError();
        if (e != cudaErrorNotReady) {
          fail(culprit(what) + " failed on the device: " + cudaGetErrorName(e) + " (" +
               cudaGetErrorString(e) + ")");
        }
        idle = false;
      }
      if (idle) break;
      poll_async_errors();
      notice_stop_while_waiting([&] { return culprit(what); });
      if (Clock::now() > deadline) fail(culprit(what) + " " + timed_out(), true);
      std::this_thread::yield();
    }
    poll_async_errors();
  }

  cudaEvent_t take_event() {
    if (auto e = static_cast<cudaEvent_t>(log_.take_free())) return e;
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreate(&e), "cudaEventCreate");
    all_events_.push_back(e);
    return e;
  }

  // Polls a communicator until its pending setup or enqueue has finished.
  void wait_ready(ncclComm_t c) {
    const Clock::time_point deadline = deadline_from_now();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      check(ncclCommGetAsyncError(c, &state), "ncclCommGetAsyncError", c);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(last_op_ + " failed: " + describe(state, c));
      notice_stop_while_waiting([&] { return last_op_; });
      if (Clock::now() > deadline) fail(last_op_ + " " + timed_out(), true);
      std::this_thread::yield();
    }
  }

  void poll_async_errors() {
    for (ncclComm_t c : comms_) {
      if (c == nullptr) continue;
      ncclResult_t state = ncclSuccess;
      check(ncclCommGetAsyncError(c, &state), "ncclCommGetAsyncError", c);
      if (!ok(state)) fail(culprit(last_op_) + " failed: " + describe(state, c));
    }
  }

  void check(ncclResult_t r, const char* call, ncclComm_t c) {
    if (!ok(r)) fail(last_op_ + ": " + call + " failed: " + describe(r, c));
  }

  void check_cuda(cudaError_t e, const char* call) {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    fail(last_op_ + ": " + call + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
         ")");
  }

  static std::string describe(ncclResult_t r, ncclComm_t c) {
    std::string s = ncclGetErrorString(r);
    const char* last = ncclGetLastError(c);
    if (last != nullptr && *last != '\0') s += std::string(" (") + last + ")";
    return s;
  }

  std::string timed_out() const {
    std::ostringstream os;
    os << "did not complete within " << timeout_s_
       << " s (--timeout): a peer may have died or hung; the NCCL communicators were aborted";
    return os.str();
  }

  // A timeout is exit 6 (TimeoutError), as on the mpi backend; any other failure exit 1.
  [[noreturn]] void fail(const std::string& what, bool timeout = false) {
    abort_all();
    const std::string line =
        "nccl on rank " + std::to_string(rank_) + " (host " + host_name_ + "): " + what;
    if (timeout) throw TimeoutError(line);
    throw RuntimeError(line);
  }

  void usable() const {
    if (aborted_) {
      throw RuntimeError("nccl on rank " + std::to_string(rank_) + " (host " + host_name_ +
                         "): the communicators were aborted after " + last_op_ + " failed");
    }
  }

  Clock::time_point deadline_from_now() const {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  }

  // Children before the parent. Abort also ends NCCL kernels still waiting for peers, so the
  // streams drain.
  void abort_all();

  // The orderly end: wait for the stream, then finalize (a collective step with the peers) and
  // destroy, each bounded by the timeout. False when any of it fails; the caller then aborts.
  bool finalize_all();

  void release_cuda();

  static std::size_t index(Group g) { return static_cast<std::size_t>(g); }
  ncclComm_t comm(Group g) const { return comms_[index(g)]; }

  double timeout_s_;
  int uncaught_;
  std::unique_ptr<Communicator> host_;  // the MPI groups: counts, and the topology's checks
  std::string host_name_;
  int rank_ = 0;
  int device_ = 0;
  cudaStream_t compute_stream_ = nullptr;
  static constexpr int kLanes = InFlightLog::kLanes;
  cudaStream_t streams_[kLanes] = {};           // indexed by InFlightLog::lane_index()
  cudaEvent_t compute_done_ = nullptr;          // recorded and waited for at once: one serves all
  std::vector<cudaEvent_t> all_events_;         // the pool, reused across steps
  InFlightLog log_;                             // what runs on each lane, the requests, free events
  ncclComm_t comms_[kGroupCount] = {};          // indexed by Group; null where not a member
  std::string names_[kGroupCount];              // their commName strings
  std::string last_op_ = "communicator setup";  // the one being set up or enqueued
  bool aborted_ = false;
  bool serialise_lanes_ = true;     // false when NCCL orders the launches itself
  std::string ordering_;            // lane_ordering()
  cudaEvent_t last_end_ = nullptr;  // the end of the operation issued last, on any lane
  int last_lane_ = -1;              // its lane
};

}  // namespace moebench::nccl_detail
