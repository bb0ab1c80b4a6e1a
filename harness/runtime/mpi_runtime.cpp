#include "harness/runtime/mpi_runtime.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness/backends/mpi/mpi_check.hpp"
#include "harness/backends/mpi/mpi_wait.hpp"
#include "harness/core/error.hpp"
#include "harness/core/host.hpp"

namespace moebench {

namespace {

// Names are exchanged in fixed-size slots so one MPI_Allgather suffices.
constexpr int kHostSlot = 256;

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
  MB_CHECK(v.size() <= static_cast<std::size_t>(INT_MAX), "allreduce of " << v.size() << " values");
  polled("MPI_Iallreduce", [&](MPI_Request* req) {
    return MPI_Iallreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX,
                          MPI_COMM_WORLD, req);
  });
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

std::vector<double> MpiRuntime::gather_to_root(const std::vector<double>& v) const {
  MB_CHECK(v.size() <= static_cast<std::size_t>(INT_MAX), "gather of " << v.size() << " values");
  const int n = static_cast<int>(v.size());
  std::vector<int> counts(rank_ == 0 ? size_ : 0);
  polled("MPI_Igather", [&](MPI_Request* req) {
    return MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, req);
  });
  std::vector<int> displs(counts.size());
  long long total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    MB_CHECK(total <= INT_MAX, "gather of more than INT_MAX values");
    displs[r] = static_cast<int>(total);
    total += counts[r];
  }
  MB_CHECK(total <= INT_MAX, "gather of " << total << " values exceeds INT_MAX");
  std::vector<double> out(static_cast<std::size_t>(total));
  polled("MPI_Igatherv", [&](MPI_Request* req) {
    return MPI_Igatherv(v.data(), n, MPI_DOUBLE, out.data(), counts.data(), displs.data(),
                        MPI_DOUBLE, 0, MPI_COMM_WORLD, req);
  });
  return out;
}

std::vector<std::string> MpiRuntime::gather_strings_to_root(const std::string& mine) const {
  MB_CHECK(mine.size() <= static_cast<std::size_t>(INT_MAX),
           "gather of a " << mine.size() << "-byte string");
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rank_ == 0 ? size_ : 0);
  polled("MPI_Igather", [&](MPI_Request* req) {
    return MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, req);
  });
  std::vector<int> offsets(lengths.size());
  long long total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    MB_CHECK(total + lengths[r] <= INT_MAX, "gather of more than INT_MAX bytes");
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
  }
  std::vector<char> all(static_cast<std::size_t>(total));
  polled("MPI_Igatherv", [&](MPI_Request* req) {
    return MPI_Igatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                        MPI_CHAR, 0, MPI_COMM_WORLD, req);
  });
  std::vector<std::string> out;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    out.emplace_back(all.data() + offsets[r], static_cast<std::size_t>(lengths[r]));
  }
  return out;
}

void MpiRuntime::broadcast(std::vector<float>& v, int root) const {
  long long n = static_cast<long long>(v.size());
  polled("MPI_Ibcast", [&](MPI_Request* req) {
    return MPI_Ibcast(&n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD, req);
  });
  MB_CHECK(n <= INT_MAX, "broadcast of " << n << " floats exceeds INT_MAX");
  if (rank_ != root) v.resize(static_cast<std::size_t>(n));
  polled("MPI_Ibcast", [&](MPI_Request* req) {
    return MPI_Ibcast(v.data(), static_cast<int>(n), MPI_FLOAT, root, MPI_COMM_WORLD, req);
  });
}

void MpiRuntime::broadcast(std::string& s, int root) const {
  long long n = static_cast<long long>(s.size());
  polled("MPI_Ibcast", [&](MPI_Request* req) {
    return MPI_Ibcast(&n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD, req);
  });
  MB_CHECK(n <= INT_MAX, "broadcast of a " << n << "-byte string exceeds INT_MAX");
  if (rank_ != root) s.resize(static_cast<std::size_t>(n));
  polled("MPI_Ibcast", [&](MPI_Request* req) {
    return MPI_Ibcast(s.data(), static_cast<int>(n), MPI_CHAR, root, MPI_COMM_WORLD, req);
  });
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
