#include "harness/runtime/mpi_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "harness/backends/mpi/mpi_check.hpp"
#include "harness/backends/mpi/mpi_wait.hpp"
#include "harness/core/error.hpp"
#include "harness/core/host.hpp"

namespace moebench {

namespace {

// Names are exchanged in fixed-size slots so one MPI_Allgather suffices.
constexpr int kHostSlot = 256;

template <typename T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  if constexpr (std::is_same_v<T, char>) return MPI_CHAR;
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      throw RuntimeError("MPI_Init_thread failed: MPI could not start");
    }
  }
  // Failures come back as codes so they turn into exceptions with the rank and host.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  host_ = host_name();
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Topology MpiRuntime::topology(const ParallelGrid& grid, int ranks_per_node_override) const {
  MB_CHECK(grid.world() == size_,
           "a parallel grid of " << grid.world() << " ranks in a world of " << size_);
  if (ranks_per_node_override > 0) {
    return make_topology_emulated(grid, rank_, ranks_per_node_override);
  }
  MPI_Comm node_comm = MPI_COMM_NULL;
  check_mpi(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm),
      "MPI_Comm_split_type");
  int local_rank = 0;
  int local_size = 1;
  MPI_Comm_rank(node_comm, &local_rank);
  MPI_Comm_size(node_comm, &local_size);
  // Node leaders (local rank 0, i.e. each node's lowest world rank) are numbered in world-rank
  // order; the leader's index is the node index, broadcast inside the node.
  MPI_Comm leaders = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, local_rank == 0 ? 0 : MPI_UNDEFINED, rank_, &leaders),
            "MPI_Comm_split");
  int node_info[2] = {0, 1};  // node index, node count
  if (leaders != MPI_COMM_NULL) {
    MPI_Comm_rank(leaders, &node_info[0]);
    MPI_Comm_size(leaders, &node_info[1]);
    MPI_Comm_free(&leaders);
  }
  const int rc = MPI_Bcast(node_info, 2, MPI_INT, 0, node_comm);
  MPI_Comm_free(&node_comm);
  check_mpi(rc, "MPI_Bcast");
  return make_topology(grid, rank_, node_info[0], node_info[1], local_rank, local_size);
}

template <typename F>
void MpiRuntime::polled(const char* call, F&& start) const {
  start_and_wait(call, start, timeout_s_, [&] {
    return "the runtime on rank " + std::to_string(rank_) + " (host " + host_ + "): " + call +
           " over all " + std::to_string(size_) + " ranks";
  });
}

std::vector<int> MpiRuntime::silent_ranks(double grace_s) const {
  constexpr int kAliveTag = 0x6d62;  // "mb": no other message on MPI_COMM_WORLD uses it
  static int alive = 0;              // the send's buffer outlives a send left pending
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, grace_s));
  const auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  if (rank_ != 0) {
    MPI_Request req = MPI_REQUEST_NULL;
    alive = rank_;
    MPI_Isend(&alive, 1, MPI_INT, 0, kAliveTag, MPI_COMM_WORLD, &req);
    for (int done = 0; !done && std::chrono::steady_clock::now() < deadline; pause()) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    return {};
  }
  static std::vector<int> heard_from;  // the receives' buffers, likewise
  heard_from.assign(static_cast<std::size_t>(size_), 0);
  std::vector<MPI_Request> reqs(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  for (int r = 1; r < size_; ++r) {
    MPI_Irecv(&heard_from[static_cast<std::size_t>(r)], 1, MPI_INT, r, kAliveTag, MPI_COMM_WORLD,
              &reqs[static_cast<std::size_t>(r)]);
  }
  std::vector<bool> heard(static_cast<std::size_t>(size_), false);
  heard[0] = true;
  for (int left = size_ - 1; left > 0 && std::chrono::steady_clock::now() < deadline; pause()) {
    for (int r = 1; r < size_; ++r) {
      const std::size_t i = static_cast<std::size_t>(r);
      if (heard[i]) continue;
      int done = 0;
      MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
      if (done) {
        heard[i] = true;
        --left;
      }
    }
  }
  std::vector<int> silent;
  for (int r = 1; r < size_; ++r) {
    const std::size_t i = static_cast<std::size_t>(r);
    if (heard[i]) continue;
    silent.push_back(r);
    MPI_Cancel(&reqs[i]);
    MPI_Request_free(&reqs[i]);
  }
  return silent;
}

std::vector<std::string> MpiRuntime::all_hosts() const {
  return all_gather(host_);
}

std::vector<std::string> MpiRuntime::all_gather(const std::string& text) const {
  std::vector<char> mine(kHostSlot, '\0');
  std::copy_n(text.data(), std::min<std::size_t>(text.size(), kHostSlot - 1), mine.data());
  std::vector<char> all(static_cast<std::size_t>(kHostSlot) * size_, '\0');
  polled("MPI_Iallgather", [&](MPI_Request* req) {
    return MPI_Iallgather(mine.data(), kHostSlot, MPI_CHAR, all.data(), kHostSlot, MPI_CHAR,
                          MPI_COMM_WORLD, req);
  });
  std::vector<std::string> hosts;
  hosts.reserve(size_);
  for (int r = 0; r < size_; ++r)
    hosts.emplace_back(all.data() + static_cast<std::size_t>(r) * kHostSlot);
  return hosts;
}

std::string MpiRuntime::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string s(text, std::strlen(text));
  const auto end = s.find_first_of("\r\n");
  if (end != std::string::npos) s.resize(end);
  while (!s.empty() && (s.back() == ',' || s.back() == ' ')) s.pop_back();
  return s;
}

double MpiRuntime::allreduce_max(double v) const {
  allreduce_max(std::span<double>(&v, 1));
  return v;
}

void MpiRuntime::allreduce_max(std::span<double> v) const {
  for (std::size_t at = 0; at < v.size(); at += static_cast<std::size_t>(piece_)) {
    const int n = static_cast<int>(std::min<std::size_t>(v.size() - at, piece_));
    polled("MPI_Iallreduce", [&](MPI_Request* req) {
      return MPI_Iallreduce(MPI_IN_PLACE, v.data() + at, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                            req);
    });
  }
}

double MpiRuntime::allreduce_min(double v) const {
  double out = 0;
  polled("MPI_Iallreduce", [&](MPI_Request* req) {
    return MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD, req);
  });
  return out;
}

double MpiRuntime::allreduce_sum(double v) const {
  double out = 0;
  polled("MPI_Iallreduce", [&](MPI_Request* req) {
    return MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, req);
  });
  return out;
}

long long MpiRuntime::allreduce_sum(long long v) const {
  long long out = 0;
  polled("MPI_Iallreduce", [&](MPI_Request* req) {
    return MPI_Iallreduce(&v, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD, req);
  });
  return out;
}

bool MpiRuntime::all_true(bool v) const {
  int in = v ? 1 : 0;
  int out = 0;
  polled("MPI_Iallreduce", [&](MPI_Request* req) {
    return MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD, req);
  });
  return out != 0;
}

void MpiRuntime::set_piece_elements(std::int64_t n) {
  MB_CHECK(n >= 1 && n <= kMaxPieceElements,
           "a piece of " << n << " elements; expected 1 to " << kMaxPieceElements);
  piece_ = n;
}

// A scatter's or gather's round: at most a piece, and at most the staging bound, for all ranks
// together, so each rank's share of it, its count and its displacement all fit an int.
std::int64_t MpiRuntime::round_per_rank() const {
  return std::max<std::int64_t>(1, std::min(piece_, kMaxStagingElements) / size_);
}

template <typename T>
void MpiRuntime::broadcast_pieces(T* data, std::int64_t n, int root) const {
  for (std::int64_t at = 0; at < n; at += piece_) {
    const int count = static_cast<int>(std::min(n - at, piece_));
    polled("MPI_Ibcast", [&](MPI_Request* req) {
      return MPI_Ibcast(data + at, count, mpi_type<T>(), root, MPI_COMM_WORLD, req);
    });
  }
}

// Every rank's n values concatenated in rank order on rank 0 (with each rank's count), in rounds
// of round_per_rank() values a rank.
template <typename T>
std::vector<T> MpiRuntime::gather_pieces(const T* mine, std::int64_t n,
                                         std::vector<std::int64_t>* counts_out) const {
  long long mine_n = n;
  std::vector<long long> counts(rank_ == 0 ? size_ : 0);
  polled("MPI_Igather", [&](MPI_Request* req) {
    return MPI_Igather(&mine_n, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, 0,
                       MPI_COMM_WORLD, req);
  });
  const std::int64_t per_rank = round_per_rank();
  const auto longest = static_cast<std::int64_t>(allreduce_max(static_cast<double>(n)));
  std::vector<std::int64_t> starts(counts.size());
  std::int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    starts[r] = total;
    total += counts[r];
  }
  std::vector<T> out(static_cast<std::size_t>(total));
  std::vector<T> round(rank_ == 0 ? static_cast<std::size_t>(per_rank * size_) : 0);
  std::vector<int> round_counts(counts.size()), displs(counts.size());
  const auto share = [&](std::int64_t count, std::int64_t at) {
    return static_cast<int>(std::clamp<std::int64_t>(count - at, 0, per_rank));
  };
  for (std::int64_t at = 0; at < longest; at += per_rank) {
    int offset = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      round_counts[r] = share(counts[r], at);
      displs[r] = offset;
      offset += round_counts[r];
    }
    const int sending = share(n, at);
    polled("MPI_Igatherv", [&](MPI_Request* req) {
      return MPI_Igatherv(mine + std::min(at, n), sending, mpi_type<T>(), round.data(),
                          round_counts.data(), displs.data(), mpi_type<T>(), 0, MPI_COMM_WORLD,
                          req);
    });
    for (std::size_t r = 0; r < counts.size(); ++r) {
      std::copy_n(round.begin() + displs[r], round_counts[r], out.begin() + starts[r] + at);
    }
  }
  if (counts_out != nullptr) counts_out->assign(counts.begin(), counts.end());
  return out;
}

std::vector<double> MpiRuntime::gather_to_root(const std::vector<double>& v) const {
  return gather_pieces(v.data(), static_cast<std::int64_t>(v.size()), nullptr);
}

std::vector<std::string> MpiRuntime::gather_strings_to_root(const std::string& mine) const {
  std::vector<std::int64_t> lengths;
  const std::vector<char> all =
      gather_pieces(mine.data(), static_cast<std::int64_t>(mine.size()), &lengths);
  std::vector<std::string> out;
  std::size_t at = 0;
  for (const std::int64_t length : lengths) {
    out.emplace_back(all.data() + at, static_cast<std::size_t>(length));
    at += static_cast<std::size_t>(length);
  }
  return out;
}

void MpiRuntime::broadcast(std::vector<float>& v, int root) const {
  long long n = static_cast<long long>(v.size());
  polled("MPI_Ibcast", [&](MPI_Request* req) {
    return MPI_Ibcast(&n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD, req);
  });
  if (rank_ != root) v.resize(static_cast<std::size_t>(n));
  broadcast_pieces(v.data(), n, root);
}

void MpiRuntime::broadcast(std::string& s, int root) const {
  long long n = static_cast<long long>(s.size());
  polled("MPI_Ibcast", [&](MPI_Request* req) {
    return MPI_Ibcast(&n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD, req);
  });
  if (rank_ != root) s.resize(static_cast<std::size_t>(n));
  broadcast_pieces(s.data(), n, root);
}

std::vector<float> MpiRuntime::scatter_ranges(const std::vector<float>& source,
                                              const std::vector<Range>& wanted) const {
  // Rank 0 learns every rank's ranges (as pairs of doubles: offsets stay below 2^53).
  std::vector<double> mine;
  std::int64_t total = 0;
  for (const Range& w : wanted) {
    MB_CHECK(w.offset >= 0 && w.count >= 0, "a range at " << w.offset << " of " << w.count);
    mine.push_back(static_cast<double>(w.offset));
    mine.push_back(static_cast<double>(w.count));
    total += w.count;
  }
  std::vector<std::int64_t> pairs;
  const std::vector<double> all =
      gather_pieces(mine.data(), static_cast<std::int64_t>(mine.size()), &pairs);
  // Rank 0: each rank's ranges, checked against the source, and a cursor through them.
  struct Cursor {
    std::vector<Range> ranges;
    std::size_t index = 0;
    std::int64_t within = 0;
    std::int64_t total = 0;
  };
  std::vector<Cursor> cursors(pairs.size());
  std::size_t at = 0;
  for (std::size_t r = 0; r < pairs.size(); ++r) {
    for (std::int64_t i = 0; i < pairs[r]; i += 2, at += 2) {
      const Range range{static_cast<std::int64_t>(all[at]), static_cast<std::int64_t>(all[at + 1])};
      MB_CHECK(range.offset + range.count <= static_cast<std::int64_t>(source.size()),
               "rank " << r << " asked for [" << range.offset << ", " << range.offset + range.count
                       << ") of " << source.size() << " values");
      cursors[r].ranges.push_back(range);
      cursors[r].total += range.count;
    }
  }
  const std::int64_t per_rank = round_per_rank();
  const auto longest = static_cast<std::int64_t>(allreduce_max(static_cast<double>(total)));
  std::vector<float> out(static_cast<std::size_t>(total));
  std::vector<float> round(rank_ == 0 ? static_cast<std::size_t>(per_rank * size_) : 0);
  std::vector<int> counts(cursors.size()), displs(cursors.size());
  for (std::int64_t done = 0; done < longest; done += per_rank) {
    int offset = 0;
    for (std::size_t r = 0; r < cursors.size(); ++r) {  // rank 0 packs each rank's next values
      Cursor& c = cursors[r];
      displs[r] = offset;
      std::int64_t room = std::min(per_rank, c.total - done);
      while (room > 0) {
        const Range& range = c.ranges[c.index];
        const std::int64_t n = std::min(room, range.count - c.within);
        std::copy_n(source.begin() + range.offset + c.within, n, round.begin() + offset);
        offset += static_cast<int>(n);
        room -= n;
        c.within += n;
        if (c.within == range.count) {
          ++c.index;
          c.within = 0;
        }
      }
      counts[r] = offset - displs[r];
    }
    const int receiving = static_cast<int>(std::clamp<std::int64_t>(total - done, 0, per_rank));
    polled("MPI_Iscatterv", [&](MPI_Request* req) {
      return MPI_Iscatterv(round.data(), counts.data(), displs.data(), MPI_FLOAT,
                           out.data() + std::min(done, total), receiving, MPI_FLOAT, 0,
                           MPI_COMM_WORLD, req);
    });
  }
  return out;
}

void MpiRuntime::barrier() const {
  polled("MPI_Ibarrier", [&](MPI_Request* req) { return MPI_Ibarrier(MPI_COMM_WORLD, req); });
}

void MpiRuntime::abort(int code) const {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

}  // namespace moebench
