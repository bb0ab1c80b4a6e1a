// The nccl communication backend. Every NCCL communicator is non-blocking, so no NCCL call can
// hang the host: setup, enqueueing and completion are all polled against the timeout, and a
// dead or stuck peer ends in ncclCommAbort and an error naming the operation. There is one NCCL
// communicator per group of the parallel grid, split from the world one with the grid's colours
// and keys.
//
// Ordering: three communication streams, one per CommLane. The critical lane (the dispatch and
// combine all-to-alls, every blocking collective) and the pipeline lane (point-to-point
// transfers between stages) have the device's highest stream priority; the background lane
// (gradient buckets) the lowest, the compute stream's own, so buckets in flight never take the
// GPU from the transfer the next layer or stage waits for. An operation records an event on the
// compute stream that its lane waits for, then a timing event, the NCCL calls and an end event on
// the lane; wait() makes the compute stream wait for the end event (no host wait), and a blocking
// call is a start and a wait in one (without a request number). busy_time_s() is the time between
// the two events. Events come from a pool kept across steps.
//
// Several lanes mean NCCL kernels of different communicators (or of one, on two streams) may be
// in flight at once. NCCL kernels block while waiting for their peers, so two ranks whose GPUs
// launched the same two operations in opposite orders can deadlock (NCCL's guide, "Using multiple
// NCCL communicators concurrently"). Two things rule that out:
//   - every rank issues all of its operations, over all groups and every lane, in the same host
//     order (the training step runs the same schedule everywhere; callers must keep it);
//   - each GPU launches them in that host order. From NCCL 2.26 on, NCCL_LAUNCH_ORDER_IMPLICIT=1
//     makes NCCL do so (set here before the first NCCL call unless the user set it); with an
//     older NCCL, or the variable set to 0, an operation's lane waits for the end of the one
//     issued before it on another lane (cross-lane events), which serialises the lanes' transfers
//     but still overlaps them with compute. lane_ordering() says which, for the report.
//
// Warm-up: NCCL >= 2.22 connects peers at a communicator's first operation, which then stays in
// progress until every peer has enqueued it. At setup every group this rank is in runs a tiny
// all-reduce, reduce-scatter and all-gather, and the expert and pipeline groups a one-row
// all-to-all, all ranks in the same order, so connection happens here and not inside a timed
// step, a barrier, or a test's first collective.
//
// Hang detection: nothing here waits on the host without polling. synchronize() polls every
// lane, barrier() the critical lane and the compute stream (which may be waiting for any lane),
// each with cudaStreamQuery and ncclCommGetAsyncError against the --timeout deadline; a timeout
// aborts the communicators and names the oldest collective still running, from the list each lane
// keeps of what it has in flight. A host wait on the compute stream made elsewhere (a download,
// Compute::synchronize) while a collective is in flight is not polled: callers synchronize() or
// barrier() here first, so that a hung peer is reported rather than waited for.
#include "harness/backends/nccl/nccl_communicator.hpp"

#include "harness/backends/nccl/nccl_communicator_impl.hpp"

namespace moebench {

using nccl_detail::NcclCommunicator;

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm world, const Topology& topo,
                                                     CudaComputeApi& compute, double timeout_s) {
  return std::make_unique<NcclCommunicator>(world, topo, compute, timeout_s);
}

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL_VERSION(): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after.
  const bool wide = v >= 10000;
  const int major = wide ? v / 10000 : v / 1000;
  const int minor = wide ? (v / 100) % 100 : (v / 100) % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

}  // namespace moebench
