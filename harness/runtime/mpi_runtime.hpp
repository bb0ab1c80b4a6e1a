// MPI for the harness itself: start-up, node identity, and the small host-side exchanges the
// driver needs (timings, host names, agreement on errors). The training step's data path goes
// through a Communicator instead.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <mpi.h>

#include "harness/parallel/topology.hpp"

namespace moebench {

class MpiRuntime {
 public:
  // MPI_Init_thread (FUNNELED). Throws RuntimeError if MPI cannot start.
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();  // MPI_Finalize unless aborted
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }
  MPI_Comm world() const { return MPI_COMM_WORLD; }

  // This rank's place in `grid` (of this world's size), with the node layout from
  // MPI_Comm_split_type(SHARED), or emulated with K ranks per node.
  Topology topology(const ParallelGrid& grid, int ranks_per_node_override) const;

  // Host names of every rank, in rank order (on every rank).
  std::vector<std::string> all_hosts() const;
  // Every rank's `mine` (up to 255 characters), in rank order (on every rank).
  std::vector<std::string> all_gather(const std::string& mine) const;
  // The MPI library's version string.
  static std::string library_version();

  double allreduce_max(double v) const;
  // Element-wise maximum over the ranks, in place (several values, one collective).
  void allreduce_max(std::span<double> v) const;
  double allreduce_min(double v) const;
  double allreduce_sum(double v) const;
  long long allreduce_sum(long long v) const;
  bool all_true(bool v) const;  // logical and over ranks
  // Every rank's values concatenated in rank order, on rank 0 only (empty elsewhere).
  std::vector<double> gather_to_root(const std::vector<double>& v) const;
  // Every rank's string (any length), in rank order, on rank 0 only (empty elsewhere).
  std::vector<std::string> gather_strings_to_root(const std::string& mine) const;
  void broadcast(std::vector<float>& v, int root) const;  // resizes on non-roots
  void broadcast(std::string& s, int root) const;
  // Each rank's `wanted` ranges of rank 0's `source` (read on rank 0 only), concatenated in the
  // order given: a scatter of what each rank asked for, so that no rank holds more than its own
  // share of a large vector. Collective; a range outside `source` is an error on rank 0.
  struct Range {
    std::int64_t offset = 0;
    std::int64_t count = 0;
  };
  std::vector<float> scatter_ranges(const std::vector<float>& source,
                                    const std::vector<Range>& wanted) const;

  // Every broadcast, gather, scatter and all-reduce above sends in pieces of at most this many
  // elements (MPI counts are ints; 2^30 keeps a piece of doubles at 8 GiB); a scatter's or
  // gather's round holds at most kMaxStagingElements of them for all ranks together, which
  // bounds rank 0's staging buffer. Tests lower it to check that pieces reassemble exactly.
  static constexpr std::int64_t kMaxPieceElements = std::int64_t{1} << 30;
  static constexpr std::int64_t kMaxStagingElements = std::int64_t{1} << 26;
  void set_piece_elements(std::int64_t n);
  std::int64_t piece_elements() const { return piece_; }
  void barrier() const;
  // Every collective above completes within this many seconds (--timeout) or throws
  // TimeoutError naming the call (default 600 s).
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  // After a wait past the timeout, on every rank that can still call it: each rank tells rank 0
  // it is alive (a point-to-point message on MPI_COMM_WORLD, beside whatever collective is
  // stuck), and rank 0 returns the ranks it did not hear from within `grace_s` (a hung
  // process); the others return nothing.
  std::vector<int> silent_ranks(double grace_s) const;
  // Ends every rank (MPI_Abort) with the exit code, after flushing stderr.
  [[noreturn]] void abort(int code) const;

 private:
  // Starts a non-blocking collective over the world and completes it within the timeout.
  template <typename F>
  void polled(const char* call, F&& start) const;

  // The pieces (mpi_runtime.cpp): element types and a round's elements per rank.
  template <typename T>
  void broadcast_pieces(T* data, std::int64_t n, int root) const;
  template <typename T>
  std::vector<T> gather_pieces(const T* mine, std::int64_t n,
                               std::vector<std::int64_t>* counts) const;
  std::int64_t round_per_rank() const;

  double timeout_s_ = 600.0;
  std::int64_t piece_ = kMaxPieceElements;
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
};

}  // namespace moebench
