// The communication interface's checks, once for every backend: a bad call is refused before the
// backend sees it (the counting communicator below, rank 0 of a 2-rank grid, never runs), a good
// one reaches it; the default started forms keep completed requests.
#include "harness/comm/communicator.hpp"

#include <doctest/doctest.h>

#include <vector>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

class Counting final : public Communicator {
 public:
  // Rank 0 of world 4 in 2 pipeline stages: in the embedding group, its data group of 2.
  Counting() : Communicator(make_topology(ParallelGrid(4, GridShape{1, 1, 1, 2}), 0, 0, 1, 0, 4)) {}
  std::string name() const override { return "counting"; }
  int calls = 0;

 protected:
  std::vector<std::int64_t> do_alltoall_counts(Group, std::span<const std::int64_t> s) override {
    ++calls;
    return {s.begin(), s.end()};
  }
  void do_alltoallv(Group, Mat, std::span<const std::int64_t>, std::span<const std::int64_t>, Mat,
                    std::span<const std::int64_t>, std::span<const std::int64_t>) override {
    ++calls;
  }
  void do_allreduce_sum(Group, Mat) override { ++calls; }
  void do_reduce_scatter_sum(Group, Mat, Mat) override { ++calls; }
  void do_allgather(Group, Mat, Mat) override { ++calls; }
  void do_batch_p2p(Group, std::span<const P2POp>) override { ++calls; }
  void do_barrier(Group) override { ++calls; }
  void do_synchronize() override {}
};

Mat f32(std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  v.assign(static_cast<std::size_t>(rows * cols), 0.0f);
  return Mat{v.data(), rows, cols, cols, DType::f32};
}

TEST_CASE("communicator: arguments are checked before the backend runs") {
  Counting c;
  REQUIRE(c.info(Group::data).size == 2);
  std::vector<float> a, b;
  CHECK_THROWS_AS(c.alltoall_counts(Group::data, std::vector<std::int64_t>{1, 2, 3}), RuntimeError);
  const std::vector<std::int64_t> one = {1, 1}, zero = {0, 1}, too_far = {0, 4};
  CHECK_THROWS_AS(c.alltoallv(Group::data, f32(a, 2, 3), one, zero, f32(b, 2, 3), one, too_far),
                  RuntimeError);
  const Mat strided{a.data(), 2, 1, 3, DType::f32};
  CHECK_THROWS_WITH_AS(c.allreduce_sum(Group::data, strided), doctest::Contains("is strided"),
                       RuntimeError);
  CHECK_THROWS_AS(c.reduce_scatter_sum(Group::data, f32(a, 5, 1), f32(b, 2, 1)), RuntimeError);
  CHECK_THROWS_AS(c.allgather(Group::data, f32(a, 3, 1), f32(b, 4, 1)), RuntimeError);
  std::vector<P2POp> bad = {{P2POp::Kind::send, 2, f32(a, 1, 1)}};  // the group has ranks 0, 1
  CHECK_THROWS_AS(c.batch_p2p(Group::pipeline, bad), RuntimeError);
  CHECK(c.calls == 0);

  c.alltoall_counts(Group::data, std::vector<std::int64_t>{1, 2});
  c.allreduce_sum(Group::data, f32(a, 2, 2));
  c.reduce_scatter_sum(Group::data, f32(a, 4, 1), f32(b, 2, 1));
  std::vector<float> buf(4);
  const Mat whole{buf.data(), 4, 1, 1, DType::f32};
  c.allgather(Group::data, whole.row_slice(0, 2), whole);  // the shard at its own place
  std::vector<P2POp> good = {{P2POp::Kind::send, 1, f32(a, 1, 1)}};
  c.batch_p2p(Group::pipeline, good);
  c.barrier(Group::embedding);
  CHECK(c.calls == 6);
}

TEST_CASE("communicator: the default started forms are completed requests, waited for once") {
  Counting c;
  std::vector<float> a;
  c.clear_requests();
  const CommRequest r = c.start_allreduce_sum(Group::data, f32(a, 2, 1), CommLane::background);
  CHECK(r == 0);
  CHECK(c.calls == 1);                                // the blocking call ran
  CHECK_THROWS_AS(c.clear_requests(), RuntimeError);  // not waited for
  c.wait(r);
  CHECK(c.busy_time_s(r) >= 0);
  c.clear_requests();
  CHECK_THROWS_AS(c.wait(0), RuntimeError);  // forgotten
  CHECK(std::string(lane_name(CommLane::pipeline)) == "pipeline");
}

}  // namespace
}  // namespace moebench

namespace moebench {
namespace {

TEST_CASE("communicator: all-to-all bytes are counted inside and across NVLink domains") {
  Counting c;
  const std::vector<int> members = c.topology().grid.members(Group::data, 0);
  REQUIRE(members.size() == 2);
  REQUIRE(members[0] == 0);
  const int peer = members[1];
  std::vector<float> s, r;
  const Mat send = f32(s, 5, 4), recv = f32(r, 5, 4);
  const std::vector<std::int64_t> rows = {2, 3}, offsets = {0, 2};
  c.alltoallv(Group::data, send, rows, offsets, recv, rows, offsets);
  CHECK(c.domain_traffic().cross_domain_bytes == 0);  // nothing counted before domains are set
  std::vector<int> domains(4, 0);
  domains[static_cast<std::size_t>(peer)] = 1;
  c.set_domains(domains);
  c.alltoallv(Group::data, send, rows, offsets, recv, rows, offsets);
  // The 2 rows to itself cross no link; the 3 rows of 4 floats to the peer cross domains.
  CHECK(c.domain_traffic().cross_domain_bytes == 3 * 4 * 4);
  CHECK(c.domain_traffic().in_domain_bytes == 0);
  c.set_domains(std::vector<int>(4, 0));
  c.reset_domain_traffic();
  c.wait(
      c.start_alltoallv(Group::data, send, rows, offsets, recv, rows, offsets, CommLane::critical));
  CHECK(c.domain_traffic().in_domain_bytes == 3 * 4 * 4);
  CHECK(c.domain_traffic().cross_domain_bytes == 0);
  CHECK_THROWS_AS(c.set_domains({0, 1}), RuntimeError);
}

}  // namespace
}  // namespace moebench
