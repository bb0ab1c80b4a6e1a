#include "harness/backends/local/local_communicator.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/core/error.hpp"

namespace moebench {
namespace {

std::vector<float> iota(std::size_t n, float first) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = first + static_cast<float>(i);
  return v;
}

std::vector<float> read(Compute& c, Mat m) {
  std::vector<float> v(static_cast<std::size_t>(m.numel()));
  c.download(m, v.data());
  return v;
}

}  // namespace

TEST_CASE("local communicator: every group is this rank alone") {
  CpuCompute c(1);
  auto comm = make_local_communicator(c);
  for (Group g : {Group::world, Group::expert, Group::expert_data}) {
    CHECK(comm->info(g).rank == 0);
    CHECK(comm->info(g).size == 1);
  }
  const std::vector<std::int64_t> counts = {3, 5};  // n = 2 values for the one rank
  CHECK(comm->alltoall_counts(Group::expert, counts) == counts);
}

TEST_CASE("local communicator: the all-to-all copies the sent rows to the receive offset") {
  CpuCompute c(1);
  auto comm = make_local_communicator(c);
  Tensor send = c.alloc(4, 2), recv = c.alloc(5, 2);
  const std::vector<float> s = iota(8, 1.0f);
  c.upload(s.data(), send);
  const std::vector<float> poison(10, -7.0f);
  c.upload(poison.data(), recv);
  const std::vector<std::int64_t> send_rows = {2}, send_offsets = {1}, recv_rows = {2},
                                  recv_offsets = {3};
  comm->alltoallv(Group::expert, send, send_rows, send_offsets, recv, recv_rows, recv_offsets);
  // Rows 1..2 of send (3,4 and 5,6) land in rows 3..4; rows 0..2 keep the poison.
  CHECK(read(c, recv) == std::vector<float>{-7, -7, -7, -7, -7, -7, 3, 4, 5, 6});
  // Mismatched counts are an internal error, not a silent partial copy.
  const std::vector<std::int64_t> three = {3};
  CHECK_THROWS_AS(
      comm->alltoallv(Group::expert, send, send_rows, send_offsets, recv, three, recv_offsets),
      RuntimeError);
}

TEST_CASE("local communicator: reductions over one rank") {
  CpuCompute c(1);
  auto comm = make_local_communicator(c);
  Tensor buf = c.alloc(6, 1), shard = c.alloc(6, 1);
  const std::vector<float> v = iota(6, 10.0f);
  c.upload(v.data(), buf);
  comm->allreduce_sum(Group::world, buf);  // the sum over one rank is the value itself
  CHECK(read(c, buf) == v);
  comm->reduce_scatter_sum(Group::expert_data, buf, shard);
  CHECK(read(c, shard) == v);
  const std::vector<float> w = iota(6, -3.0f);
  c.upload(w.data(), shard);
  comm->allgather(Group::world, shard, buf);
  CHECK(read(c, buf) == w);
}

// The local communicator keeps Communicator's default started forms: the blocking call, run at
// once and timed on the host.
TEST_CASE("local communicator: started forms complete at once and must still be waited for") {
  CpuCompute c(1);
  auto comm = make_local_communicator(c);
  Tensor send = c.alloc(2, 2), recv = c.alloc(2, 2), buf = c.alloc(4, 1), shard = c.alloc(4, 1);
  const std::vector<float> s = iota(4, 1.0f);
  c.upload(s.data(), send);
  c.upload(s.data(), buf);
  const std::vector<std::int64_t> rows = {2}, offsets = {0};
  const CommRequest a = comm->start_alltoallv(Group::expert, send, rows, offsets, recv, rows,
                                              offsets, CommLane::critical);
  const CommRequest b =
      comm->start_reduce_scatter_sum(Group::world, buf, shard, CommLane::background);
  CHECK(a == 0);
  CHECK(b == 1);
  CHECK(read(c, recv) == s);
  CHECK(read(c, shard) == s);
  CHECK_THROWS_AS(comm->clear_requests(), RuntimeError);  // neither waited for
  comm->wait(b);
  CHECK_THROWS_AS(comm->clear_requests(), RuntimeError);  // a still not waited for
  comm->wait(a);
  for (CommRequest r : {a, b}) {
    CHECK(std::isfinite(comm->busy_time_s(r)));
    CHECK(comm->busy_time_s(r) >= 0);
  }
  CHECK_THROWS_AS(comm->wait(2), RuntimeError);
  comm->clear_requests();
  CHECK_THROWS_AS((void)comm->busy_time_s(a), RuntimeError);  // forgotten
  CHECK(comm->start_allreduce_sum(Group::world, buf, CommLane::background) == 0);
  CHECK(comm->start_allgather(Group::world, shard, buf, CommLane::critical) == 1);
}

}  // namespace moebench
