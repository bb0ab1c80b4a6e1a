// The non-blocking collectives (Communicator::start_*) and the batched point-to-point transfers,
// checked the same way on every backend: the mpi test runs them on cpu-backend (host) tensors,
// the nccl test on cuda-backend tensors.
// Buffers go through the compute backend's alloc/upload/download, so one body serves both.
// Values are integers below 256 whose sums stay below 256 for up to 8 ranks, exact in BF16 and
// FP32, so every check is ==.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/core/error.hpp"
#include "harness/parallel/topology.hpp"
#include "tests/mpi/comm_test_support.hpp"

namespace moebench::test {

// Rows and values of one all-to-all in group g, seen from group rank `me` of n: send blocks
// packed from row 0, receive blocks each after a gap row that must stay untouched.
struct AlltoallvCase {
  static constexpr std::int64_t kCols = 3;
  std::vector<std::int64_t> send_rows, send_offsets, recv_rows, recv_offsets;
  std::vector<float> send, sentinel, want;
  std::int64_t send_total = 0, recv_total = 0;

  static float payload(int s, int d, std::int64_t r, std::int64_t c) {
    return static_cast<float>((s * 37 + d * 11 + r * 5 + c) % 251);
  }

  AlltoallvCase(int me, int n) : send_rows(n), send_offsets(n), recv_rows(n), recv_offsets(n) {
    for (int d = 0; d < n; ++d) {
      send_rows[d] = rows_between(me, d);
      send_offsets[d] = send_total;
      send_total += send_rows[d];
      recv_rows[d] = rows_between(d, me);
      recv_offsets[d] = recv_total + 1;
      recv_total += recv_rows[d] + 1;
    }
    send.resize(static_cast<std::size_t>(send_total * kCols));
    for (int d = 0; d < n; ++d) {
      for (std::int64_t r = 0; r < send_rows[d]; ++r) {
        for (std::int64_t c = 0; c < kCols; ++c) {
          send[(send_offsets[d] + r) * kCols + c] = payload(me, d, r, c);
        }
      }
    }
    sentinel.assign(static_cast<std::size_t>(recv_total * kCols), -1.0f);
    want = sentinel;
    for (int s = 0; s < n; ++s) {
      for (std::int64_t r = 0; r < recv_rows[s]; ++r) {
        for (std::int64_t c = 0; c < kCols; ++c) {
          want[(recv_offsets[s] + r) * kCols + c] = payload(s, me, r, c);
        }
      }
    }
  }
};

// Group rank `me`'s all-reduce input (element i is me + 1 + i % 7) and the sum over n ranks.
inline std::vector<float> reduce_input(int me, std::int64_t len) {
  std::vector<float> v(static_cast<std::size_t>(len));
  for (std::int64_t i = 0; i < len; ++i) v[i] = static_cast<float>(me + 1 + i % 7);
  return v;
}
inline std::vector<float> reduce_sum(int n, std::int64_t first, std::int64_t len) {
  std::vector<float> v(static_cast<std::size_t>(len));
  for (std::int64_t i = 0; i < len; ++i) {
    v[i] = static_cast<float>(n * (n + 1) / 2 + n * ((first + i) % 7));
  }
  return v;
}

class Buffers {
 public:
  Buffers(Compute& c, DType type) : c_(c), type_(type) {}
  Tensor put(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
    Tensor x = c_.alloc(rows, cols, type_);
    if (!v.empty()) c_.upload(v.data(), x);
    return x;
  }
  std::vector<float> get(const Mat& m) {
    std::vector<float> v(static_cast<std::size_t>(m.numel()));
    if (!v.empty()) c_.download(m, v.data());
    return v;
  }

 private:
  Compute& c_;
  DType type_;
};

inline bool busy_ok(Communicator& comm, CommRequest r) {
  const double s = comm.busy_time_s(r);
  return std::isfinite(s) && s >= 0;
}

// Every start_* form in group g on `lane`: the same result as the blocking form (and as the
// values computed here), a finite non-negative busy time, and requests numbered from 0.
inline void test_started_forms(Communicator& comm, Compute& compute, Group g, const Topology& t,
                               DType type, CommLane lane, Checker& ck) {
  const std::string name = std::string("started ") + group_name(g) + " " + dtype_name(type) + " " +
                           lane_name(lane) + ": ";
  const int n = static_cast<int>(members(g, t).size());
  const int me = comm.info(g).rank;
  Buffers dev(compute, type);
  comm.clear_requests();

  const AlltoallvCase a(me, n);
  const std::int64_t cols = AlltoallvCase::kCols;
  Tensor send = dev.put(a.send, a.send_total, cols);
  Tensor blocking_recv = dev.put(a.sentinel, a.recv_total, cols);
  Tensor started_recv = dev.put(a.sentinel, a.recv_total, cols);
  comm.alltoallv(g, send, a.send_rows, a.send_offsets, blocking_recv, a.recv_rows, a.recv_offsets);
  const CommRequest r0 = comm.start_alltoallv(g, send, a.send_rows, a.send_offsets, started_recv,
                                              a.recv_rows, a.recv_offsets, lane);
  comm.wait(r0);
  ck.check(r0 == 0, name + "the first request after clear_requests is 0");

  const std::int64_t len = 5 * n;
  Tensor blocking_sum = dev.put(reduce_input(me, len), len, 1);
  Tensor started_sum = dev.put(reduce_input(me, len), len, 1);
  comm.allreduce_sum(g, blocking_sum);
  const CommRequest r1 = comm.start_allreduce_sum(g, started_sum, lane);
  comm.wait(r1);

  Tensor rs_in = dev.put(reduce_input(me, len), len, 1);
  Tensor blocking_shard = dev.put(std::vector<float>(5, -1.0f), 5, 1);
  Tensor started_shard = dev.put(std::vector<float>(5, -1.0f), 5, 1);
  comm.reduce_scatter_sum(g, rs_in, blocking_shard);
  const CommRequest r2 = comm.start_reduce_scatter_sum(g, rs_in, started_shard, lane);
  comm.wait(r2);

  // All-gather out of place, then in place (the shard at this rank's place in the output).
  Tensor blocking_all = dev.put(std::vector<float>(len, -1.0f), len, 1);
  Tensor started_all = dev.put(std::vector<float>(len, -1.0f), len, 1);
  comm.allgather(g, started_shard, blocking_all);
  const CommRequest r3 = comm.start_allgather(g, started_shard, started_all, lane);
  comm.wait(r3);
  Tensor in_place = dev.put(std::vector<float>(len, -1.0f), len, 1);
  const Mat own = in_place.view().row_slice(me * 5, 5);
  compute.copy(started_shard, own);
  const CommRequest r4 = comm.start_allgather(g, own, in_place, lane);
  comm.wait(r4);
  comm.synchronize();

  ck.check(dev.get(started_recv) == a.want && dev.get(blocking_recv) == a.want, name + "alltoallv");
  const std::vector<float> sum = reduce_sum(n, 0, len);
  ck.check(dev.get(started_sum) == sum && dev.get(blocking_sum) == sum, name + "allreduce_sum");
  const std::vector<float> shard = reduce_sum(n, me * 5, 5);
  ck.check(dev.get(started_shard) == shard && dev.get(blocking_shard) == shard,
           name + "reduce_scatter_sum");
  ck.check(dev.get(started_all) == sum && dev.get(blocking_all) == sum, name + "allgather");
  ck.check(dev.get(in_place) == sum, name + "allgather in place");
  bool busy = true;
  for (CommRequest r : {r0, r1, r2, r3, r4}) busy = busy && busy_ok(comm, r);
  ck.check(busy, name + "busy_time_s finite and >= 0");
  ck.check(r1 == 1 && r2 == 2 && r3 == 3 && r4 == 4, name + "requests numbered in start order");
  comm.clear_requests();
}

template <typename F>
bool throws_runtime_error(F&& f) {
  try {
    f();
  } catch (const RuntimeError&) {
    return true;
  }
  return false;
}

// Several requests in flight at once on different groups and lanes, with blocking calls on the
// same groups between them, waited for in the reverse order; clear_requests refuses while any
// is not waited for, and leaves them usable.
inline void test_in_flight(Communicator& comm, Compute& compute, DType type, Checker& ck) {
  const std::string name = std::string("in flight ") + dtype_name(type) + ": ";
  Buffers dev(compute, type);
  comm.clear_requests();
  const int wn = comm.info(Group::world).size;
  const int wme = comm.info(Group::world).rank;
  const int en = comm.info(Group::expert).size;
  const int eme = comm.info(Group::expert).rank;
  const int dn = comm.info(Group::expert_data).size;
  const int dme = comm.info(Group::expert_data).rank;

  const std::int64_t len = 7 * wn;
  Tensor grads = dev.put(reduce_input(wme, len), len, 1);
  const CommRequest world_sum = comm.start_allreduce_sum(Group::world, grads, CommLane::background);

  const AlltoallvCase a(eme, en);
  const std::int64_t cols = AlltoallvCase::kCols;
  Tensor send = dev.put(a.send, a.send_total, cols);
  Tensor recv = dev.put(a.sentinel, a.recv_total, cols);
  const CommRequest dispatch =
      comm.start_alltoallv(Group::expert, send, a.send_rows, a.send_offsets, recv, a.recv_rows,
                           a.recv_offsets, CommLane::critical);

  Tensor rs_in = dev.put(reduce_input(dme, 4 * dn), 4 * dn, 1);
  Tensor shard = dev.put(std::vector<float>(4, -1.0f), 4, 1);
  const CommRequest edp_scatter =
      comm.start_reduce_scatter_sum(Group::expert_data, rs_in, shard, CommLane::background);

  // Blocking calls on groups with started operations in flight keep their place in the order.
  std::vector<std::int64_t> counts(wn);
  for (int d = 0; d < wn; ++d) counts[d] = 100 * wme + d;
  const std::vector<std::int64_t> got_counts = comm.alltoall_counts(Group::world, counts);
  bool counts_ok = static_cast<int>(got_counts.size()) == wn;
  for (int s = 0; counts_ok && s < wn; ++s) counts_ok = got_counts[s] == 100 * s + wme;
  ck.check(counts_ok, name + "blocking alltoall_counts while world operations are in flight");
  Tensor loss = dev.put(reduce_input(wme, wn), wn, 1);
  comm.allreduce_sum(Group::world, loss);

  Tensor gathered = dev.put(std::vector<float>(en * 2, -1.0f), en * 2, 1);
  Tensor piece = dev.put(std::vector<float>(2, static_cast<float>(eme + 1)), 2, 1);
  const CommRequest expert_gather =
      comm.start_allgather(Group::expert, piece, gathered, CommLane::critical);

  ck.check(throws_runtime_error([&] { comm.clear_requests(); }),
           name + "clear_requests refuses requests not waited for");
  comm.wait(expert_gather);
  comm.wait(edp_scatter);
  comm.wait(dispatch);
  ck.check(throws_runtime_error([&] { comm.clear_requests(); }),
           name + "clear_requests refuses while one request is not waited for");
  comm.wait(world_sum);
  comm.synchronize();

  ck.check(dev.get(grads) == reduce_sum(wn, 0, len), name + "world allreduce on background");
  ck.check(dev.get(recv) == a.want, name + "expert alltoallv on critical");
  ck.check(dev.get(shard) == reduce_sum(dn, dme * 4, 4), name + "expert_data reduce_scatter");
  ck.check(dev.get(loss) == reduce_sum(wn, 0, wn), name + "blocking allreduce among them");
  std::vector<float> want_gather(static_cast<std::size_t>(en * 2));
  for (int s = 0; s < en * 2; ++s) want_gather[s] = static_cast<float>(s / 2 + 1);
  ck.check(dev.get(gathered) == want_gather, name + "expert allgather on critical");
  bool busy = true;
  for (CommRequest r : {world_sum, dispatch, edp_scatter, expert_gather}) {
    busy = busy && busy_ok(comm, r);
  }
  ck.check(busy, name + "busy_time_s finite and >= 0");
  comm.clear_requests();
  ck.check(throws_runtime_error([&] { (void)comm.busy_time_s(world_sum); }),
           name + "a request is forgotten by clear_requests");
  comm.clear_requests();  // nothing to forget: harmless
}

// Batched point-to-point in group g, blocking and started on `lane`: each rank sends two blocks
// of different sizes to the next group rank and receives two from the previous one (with two
// ranks, both to and from the same peer), so the transfers must match in list order.
inline void test_p2p(Communicator& comm, Compute& compute, Group g, DType type, CommLane lane,
                     Checker& ck) {
  const std::string name = std::string("batch_p2p ") + group_name(g) + " " + dtype_name(type) +
                           " " + lane_name(lane) + ": ";
  const GroupInfo gi = comm.info(g);
  const int n = gi.size, me = gi.rank;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  Buffers dev(compute, type);
  // Block b (rows b + 1... of 3 columns) from group rank s, in round k.
  auto block = [](int s, int b, int k) {
    std::vector<float> v(static_cast<std::size_t>((2 - b) * 3));
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>((s * 31 + b * 17 + k * 7 + static_cast<int>(i)) % 251);
    }
    return v;
  };
  comm.clear_requests();
  CommRequest started = -1;
  for (int k = 0; k < 2; ++k) {
    Tensor a = dev.put(block(me, 0, k), 2, 3);
    Tensor b = dev.put(block(me, 1, k), 1, 3);
    Tensor x = dev.put(std::vector<float>(6, -1.0f), 2, 3);
    Tensor y = dev.put(std::vector<float>(3, -1.0f), 1, 3);
    const std::vector<P2POp> ops = {{P2POp::Kind::send, next, a},
                                    {P2POp::Kind::recv, prev, x},
                                    {P2POp::Kind::send, next, b},
                                    {P2POp::Kind::recv, prev, y}};
    if (k == 0) {
      comm.batch_p2p(g, ops);
    } else {
      started = comm.start_batch_p2p(g, ops, lane);
      comm.wait(started);
      comm.synchronize();
    }
    const char* form = k == 0 ? "blocking" : "started";
    ck.check(dev.get(x) == block(prev, 0, k) && dev.get(y) == block(prev, 1, k),
             name + form + " transfers land, matched in list order");
  }
  ck.check(started == 0 && busy_ok(comm, started), name + "busy_time_s finite and >= 0");
  comm.clear_requests();
  Tensor t = dev.put(std::vector<float>(3, 0.0f), 1, 3);
  const std::vector<P2POp> bad = {{P2POp::Kind::send, n, t}};
  ck.check(throws_runtime_error([&] { comm.batch_p2p(g, bad); }),
           name + "a peer outside the group is refused");
  const std::vector<P2POp> overlap = {{P2POp::Kind::recv, prev, t}, {P2POp::Kind::send, next, t}};
  ck.check(throws_runtime_error([&] { comm.batch_p2p(g, overlap); }),
           name + "a receive overlapping another buffer is refused");
}

}  // namespace moebench::test
