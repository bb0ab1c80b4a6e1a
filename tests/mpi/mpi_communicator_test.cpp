// Exercises every Communicator method of the mpi backend in every group of the parallel grid,
// blocking and started, collectives and batched point-to-point (tests/mpi/started_collectives.hpp,
// on cpu-backend tensors), with seeded integer-valued data whose sums are exact in f32, so every
// check is ==. (The MpiRuntime's own exchanges: mpi_runtime_test.cpp.)
// Usage: mpirun -n W mpi_communicator_test EP [PP]. Exit 0 only when every rank passed.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/mpi/mpi_communicator.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/core/error.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "tests/mpi/comm_test_support.hpp"
#include "tests/mpi/started_collectives.hpp"

namespace mb = moebench;
using mb::test::Checker;
using mb::test::members;
using mb::test::rows_between;

namespace {

mb::Mat mat(std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  return mb::Mat{v.data(), rows, cols, cols, mb::DType::f32};
}

float payload(int s, int d, std::int64_t r, std::int64_t c) {
  return static_cast<float>(s * 10000 + d * 100 + r * 10 + c);
}

void test_group(mb::Communicator& comm, mb::Group g, const mb::Topology& t, Checker& ck) {
  const std::string gname = mb::group_name(g);
  const std::vector<int> mem = members(g, t);
  const int n = static_cast<int>(mem.size());
  const mb::GroupInfo gi = comm.info(g);
  if (n == 0) {  // in no group of this kind (a middle pipeline stage and the embedding group)
    ck.check(!gi.member(), gname + ": a rank outside every such group is no member");
    std::vector<float> v(2, 0.0f);
    bool refused = false;
    try {
      comm.allreduce_sum(g, mat(v, 1, 2));
    } catch (const mb::RuntimeError&) {
      refused = true;
    }
    ck.check(refused, gname + ": a collective in a group the rank is not in is refused");
    return;
  }
  ck.check(gi.size == n, gname + " size");
  ck.check(gi.rank >= 0 && gi.rank < n && mem[gi.rank] == t.rank, gname + " rank");
  const int me = gi.rank;

  {  // alltoall_counts: 2 values per destination
    std::vector<std::int64_t> send(2 * n);
    for (int d = 0; d < n; ++d) {
      for (int j = 0; j < 2; ++j) send[2 * d + j] = 1000 * me + 10 * d + j;
    }
    const auto recv = comm.alltoall_counts(g, send);
    bool ok = recv.size() == send.size();
    for (int s = 0; ok && s < n; ++s) {
      for (int j = 0; j < 2; ++j) ok = ok && recv[2 * s + j] == 1000 * s + 10 * me + j;
    }
    ck.check(ok, gname + " alltoall_counts");
  }

  {  // alltoallv with gaps between segments, so offsets matter
    const std::int64_t cols = 3;
    std::vector<std::int64_t> sr(n), so(n), rr(n), ro(n);
    std::int64_t srows = 0, rrows = 0;
    for (int i = 0; i < n; ++i) {
      sr[i] = rows_between(me, i);
      so[i] = srows + 1;
      srows += sr[i] + 1;
      rr[i] = rows_between(i, me);
      ro[i] = rrows + 2;
      rrows += rr[i] + 2;
    }
    std::vector<float> sbuf(srows * cols, -5.0f), rbuf(rrows * cols, -1.0f);
    for (int d = 0; d < n; ++d) {
      for (std::int64_t r = 0; r < sr[d]; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) sbuf[(so[d] + r) * cols + c] = payload(me, d, r, c);
      }
    }
    comm.alltoallv(g, mat(sbuf, srows, cols), sr, so, mat(rbuf, rrows, cols), rr, ro);
    std::vector<float> want(rrows * cols, -1.0f);
    for (int s = 0; s < n; ++s) {
      for (std::int64_t r = 0; r < rr[s]; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) want[(ro[s] + r) * cols + c] = payload(s, me, r, c);
      }
    }
    ck.check(rbuf == want, gname + " alltoallv");
  }

  const std::int64_t m = 5;  // elements per rank's shard
  {                          // allreduce_sum
    std::vector<float> buf(n * m);
    for (std::int64_t k = 0; k < n * m; ++k) buf[k] = static_cast<float>((t.rank + 1) * (k + 1));
    comm.allreduce_sum(g, mat(buf, n, m));
    const int rank_sum = std::accumulate(mem.begin(), mem.end(), 0) + n;
    bool ok = true;
    for (std::int64_t k = 0; k < n * m; ++k)
      ok = ok && buf[k] == static_cast<float>(rank_sum * (k + 1));
    ck.check(ok, gname + " allreduce_sum");
  }

  {  // reduce_scatter_sum
    std::vector<float> buf(n * m), shard(m, -1.0f);
    for (std::int64_t k = 0; k < n * m; ++k) buf[k] = static_cast<float>((t.rank + 1) * (k + 1));
    comm.reduce_scatter_sum(g, mat(buf, n * m, 1), mat(shard, m, 1));
    const int rank_sum = std::accumulate(mem.begin(), mem.end(), 0) + n;
    bool ok = true;
    for (std::int64_t k = 0; k < m; ++k) {
      ok = ok && shard[k] == static_cast<float>(rank_sum * (me * m + k + 1));
    }
    ck.check(ok, gname + " reduce_scatter_sum");
  }

  for (bool in_place : {false, true}) {  // allgather, separate shard and shard inside buf
    std::vector<float> shard(m), buf(n * m, -1.0f);
    for (std::int64_t k = 0; k < m; ++k) shard[k] = static_cast<float>(t.rank * 100 + k);
    mb::Mat shard_view = mat(shard, 1, m);
    if (in_place) {
      std::copy(shard.begin(), shard.end(), buf.begin() + me * m);
      shard_view = mat(buf, n, m).row_slice(me, 1);
    }
    comm.allgather(g, shard_view, mat(buf, n, m));
    bool ok = true;
    for (int s = 0; s < n; ++s) {
      for (std::int64_t k = 0; k < m; ++k)
        ok = ok && buf[s * m + k] == static_cast<float>(mem[s] * 100 + k);
    }
    ck.check(ok, gname + (in_place ? " allgather in place" : " allgather"));
  }
  comm.synchronize();
}

template <typename F>
void expect_error(F&& f, const std::string& what, Checker& ck) {
  bool threw = false;
  try {
    f();
  } catch (const mb::RuntimeError&) {
    threw = true;
  }
  ck.check(threw, what + " throws RuntimeError");
}

void test_misuse(mb::Communicator& comm, Checker& ck) {
  const int n = comm.info(mb::Group::world).size;
  std::vector<float> buf(4 * n);
  mb::Mat bf16{buf.data(), 1, 4, 4, mb::DType::bf16};
  expect_error([&] { comm.allreduce_sum(mb::Group::world, bf16); }, "bf16 allreduce", ck);
  mb::Mat strided{buf.data(), 2, 1, 2, mb::DType::f32};
  expect_error([&] { comm.allreduce_sum(mb::Group::world, strided); }, "strided allreduce", ck);
  std::vector<std::int64_t> short_counts(n + 1, 0);
  expect_error(
      [&] {
        comm.alltoallv(mb::Group::world, mat(buf, n, 4), short_counts, short_counts, mat(buf, n, 4),
                       short_counts, short_counts);
      },
      "alltoallv with wrong count arrays", ck);
  std::vector<float> shard(3);
  expect_error([&] { comm.allgather(mb::Group::world, mat(shard, 1, 3), mat(buf, n, 4)); },
               "allgather size mismatch", ck);
}

void test_construction_errors(Checker& ck) {
  const mb::Topology two = mb::make_topology(mb::ParallelGrid(2, {}), 0, 0, 1, 0, 2);
  expect_error([&] { mb::make_mpi_communicator(MPI_COMM_SELF, two); }, "a topology of another size",
               ck);
  // An MPI failure (truncation: more rows sent than the receiver posted) names the call.
  auto solo = mb::make_mpi_communicator(MPI_COMM_SELF, mb::single_process_topology());
  std::vector<float> send(4, 1.0f), recv(4, 0.0f);
  const std::vector<std::int64_t> two_rows = {2}, one_row = {1}, zero = {0};
  std::string message;
  try {
    solo->alltoallv(mb::Group::world, mat(send, 2, 2), two_rows, zero, mat(recv, 2, 2), one_row,
                    zero);
  } catch (const mb::RuntimeError& e) {
    message = e.what();
  }
  // The blocking form is the started one completed within the timeout: its call is named.
  ck.check(message.find("MPI_Ialltoallv failed") != std::string::npos &&
               message.find("rank ") != std::string::npos,
           "MPI error names the call and rank: '" + message + "'");
}

// What only the mpi backend promises about started collectives: a busy time only once waited
// for, synchronize() completing them, MPI errors naming the non-blocking call.
void test_started_mpi(mb::Communicator& comm, Checker& ck) {
  const int n = comm.info(mb::Group::world).size;
  std::vector<float> buf(3 * n, 1.0f);
  comm.clear_requests();
  const mb::CommRequest r =
      comm.start_allreduce_sum(mb::Group::world, mat(buf, n, 3), mb::CommLane::background);
  expect_error([&] { (void)comm.busy_time_s(r); }, "busy_time_s before wait", ck);
  expect_error([&] { comm.wait(r + 1); }, "wait on an unknown request", ck);
  comm.synchronize();  // completes r
  ck.check(buf == std::vector<float>(3 * n, static_cast<float>(n)), "synchronize completes");
  ck.check(mb::test::busy_ok(comm, r), "busy_time_s after synchronize");
  expect_error([&] { comm.clear_requests(); }, "clear_requests without wait, after synchronize",
               ck);
  comm.wait(r);
  comm.wait(r);  // again: harmless
  comm.clear_requests();

  auto solo = mb::make_mpi_communicator(MPI_COMM_SELF, mb::single_process_topology());
  std::vector<float> send(4, 1.0f), recv(4, 0.0f);
  const std::vector<std::int64_t> two_rows = {2}, one_row = {1}, zero = {0};
  std::string message;
  try {
    const mb::CommRequest t =
        solo->start_alltoallv(mb::Group::world, mat(send, 2, 2), two_rows, zero, mat(recv, 2, 2),
                              one_row, zero, mb::CommLane::critical);
    solo->wait(t);
  } catch (const mb::RuntimeError& e) {
    message = e.what();
  }
  ck.check(message.find("MPI_Ialltoallv") != std::string::npos &&
               message.find("failed") != std::string::npos &&
               message.find("rank ") != std::string::npos,
           "a started collective's MPI error names the call and rank: '" + message + "'");
  // A start that fails its checks leaves no request behind.
  mb::Mat bf16{buf.data(), 1, 2, 2, mb::DType::bf16};
  expect_error([&] { comm.start_allreduce_sum(mb::Group::world, bf16, mb::CommLane::critical); },
               "started bf16 allreduce", ck);
  std::vector<std::int64_t> short_counts(n + 1, 0);
  expect_error(
      [&] {
        comm.start_alltoallv(mb::Group::world, mat(buf, n, 3), short_counts, short_counts,
                             mat(send, 1, 4), short_counts, short_counts, mb::CommLane::critical);
      },
      "started alltoallv with wrong count arrays", ck);
  bool cleared = true;
  try {
    comm.clear_requests();
  } catch (const mb::RuntimeError&) {
    cleared = false;
  }
  ck.check(cleared, "failed starts leave no request");
}

// The watchdog: the last rank joins an all-reduce 1.5 s late; with a 0.5 s timeout every other
// rank's wait ends in TimeoutError naming the call and the group, after the timeout and well
// before the late rank comes (the bound leaves 1 s for this loaded 2-core machine). The late rank
// then joins, and the runtime's barrier completes what the others abandoned.
void test_watchdog(const mb::MpiRuntime& rt, const mb::Topology& topo, Checker& ck) {
  if (rt.size() < 2) return;
  auto comm = mb::make_mpi_communicator(rt.world(), topo, 0.5);
  std::vector<float> v(4, 1.0f);
  const bool late = rt.rank() == rt.size() - 1;
  if (late) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    comm->allreduce_sum(mb::Group::world, mat(v, 1, 4));
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    std::string what;
    try {
      comm->allreduce_sum(mb::Group::world, mat(v, 1, 4));
    } catch (const mb::TimeoutError& e) {
      what = e.what();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ck.check(!what.empty(), "a late peer ends the wait with a TimeoutError");
    ck.check(waited >= 0.5 && waited < 1.5, "the wait ends after the timeout, before the peer");
    ck.check(what.find("MPI_Iallreduce on the world group") != std::string::npos &&
                 what.find("rank " + std::to_string(rt.rank())) != std::string::npos &&
                 what.find("did not complete within 0.5 s (--timeout)") != std::string::npos,
             "the timeout names the rank, the call, the group and the limit: " + what);
  }
  rt.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  mb::MpiRuntime rt(&argc, &argv);
  Checker ck;
  ck.rank = rt.rank();
  try {
    const int ep = argc > 1 ? std::atoi(argv[1]) : 1;
    const int pp = argc > 2 ? std::atoi(argv[2]) : 1;
    const mb::Topology topo = rt.topology(mb::ParallelGrid(rt.size(), {1, 1, ep, pp}), 0);
    auto comm = mb::make_mpi_communicator(rt.world(), topo);
    ck.check(comm->name() == "mpi", "name");
    for (mb::Group g : mb::kGroups) test_group(*comm, g, topo, ck);
    test_misuse(*comm, ck);
    mb::CpuCompute cpu(1);
    for (mb::CommLane lane :
         {mb::CommLane::critical, mb::CommLane::background, mb::CommLane::pipeline}) {
      for (mb::Group g : mb::kGroups) {
        if (!comm->info(g).member()) continue;
        mb::test::test_started_forms(*comm, cpu, g, topo, mb::DType::f32, lane, ck);
        mb::test::test_p2p(*comm, cpu, g, mb::DType::f32, lane, ck);
      }
    }
    mb::test::test_in_flight(*comm, cpu, mb::DType::f32, ck);
    test_started_mpi(*comm, ck);
    // The single-process reference's communicator: every group is this rank alone.
    const mb::Topology self = mb::single_process_topology();
    auto solo = mb::make_mpi_communicator(MPI_COMM_SELF, self);
    for (mb::Group g : mb::kGroups) test_group(*solo, g, self, ck);
    mb::test::test_p2p(*solo, cpu, mb::Group::world, mb::DType::f32, mb::CommLane::pipeline, ck);
    test_construction_errors(ck);
    test_watchdog(rt, topo, ck);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rt.rank(), e.what());
    ++ck.failed;
  }
  return mb::test::summarize(rt, ck);
}
