#include "harness/cli/link_pairs.hpp"

#include <algorithm>
#include <chrono>

namespace moebench {

namespace {

using Clock = std::chrono::steady_clock;

// The best of the timed transfers: a link that is slow is slow every time, while what this
// machine's scheduler adds to a transfer (a peer not running yet) comes and goes, so the fastest
// transfer is the link's own time.
double best_of(const std::vector<double>& t) {
  return *std::min_element(t.begin(), t.end());
}

// The best of `iterations` timed one-way transfers of `buf` (after one untimed), sent to or
// received from `peer`: the receiver's figure is the link's bandwidth.
double one_way(Communicator& comm, int iterations, bool send, int peer, const Mat& buf) {
  const P2POp op{send ? P2POp::Kind::send : P2POp::Kind::recv, peer, buf};
  std::vector<double> t;
  for (int i = 0; i <= iterations; ++i) {
    const auto start = Clock::now();
    comm.batch_p2p(Group::world, std::span<const P2POp>(&op, 1));
    if (i > 0) t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best_of(t);
}

// The best of kPingPongsPerIteration x `iterations` ping-pongs of `buf` with `peer` (after one
// untimed), halved: the initiator's figure is the latency of the link towards the peer
// (osu_latency's convention). Small messages are cheap, and a ping-pong needs both ranks running
// at once, which ranks sharing cores rarely are: more tries find the link's own time.
constexpr int kPingPongsPerIteration = 5;
double ping_pong(Communicator& comm, int iterations, bool initiator, int peer, const Mat& buf) {
  const P2POp send{P2POp::Kind::send, peer, buf}, recv{P2POp::Kind::recv, peer, buf};
  std::vector<double> t;
  for (int i = 0; i <= kPingPongsPerIteration * iterations; ++i) {
    const auto start = Clock::now();
    comm.batch_p2p(Group::world, std::span<const P2POp>(initiator ? &send : &recv, 1));
    comm.batch_p2p(Group::world, std::span<const P2POp>(initiator ? &recv : &send, 1));
    if (i > 0) t.push_back(0.5 * std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best_of(t);
}

}  // namespace

PairMeasurement measure_pairs(Communicator& comm, Compute& compute, const MpiRuntime& rt,
                              const std::vector<PairRound>& rounds, std::int64_t large,
                              std::int64_t small, int iterations) {
  Tensor large_buf = compute.alloc(1, std::max<std::int64_t>(1, large / 4), DType::f32);
  Tensor small_buf = compute.alloc(1, std::max<std::int64_t>(1, small / 4), DType::f32);
  compute.zero(large_buf.view());
  compute.zero(small_buf.view());
  compute.synchronize();
  // What this rank measured (-1: not measured): the bandwidth from each source rank (it
  // received), then the latency towards each destination rank (it started the ping-pong).
  const int n = rt.size();
  std::vector<double> mine(2 * static_cast<std::size_t>(n), -1.0);
  comm.barrier(Group::world);
  const auto begin = Clock::now();
  for (const PairRound& round : rounds) {
    const int peer = round[static_cast<std::size_t>(rt.rank())];
    for (int way = 0; way < 2; ++way) {  // the lower rank sends first, then the higher
      if (peer >= 0) {
        const bool send = (way == 0) == (rt.rank() < peer);
        const double t_large = one_way(comm, iterations, send, peer, large_buf.view());
        const double t_small = ping_pong(comm, iterations, send, peer, small_buf.view());
        if (!send) {
          mine[static_cast<std::size_t>(peer)] =
              t_large > 0 ? static_cast<double>(large) / t_large : 0;
        } else {
          mine[static_cast<std::size_t>(n + peer)] = t_small;
        }
      }
      comm.barrier(Group::world);  // one direction of one round at a time
    }
  }
  PairMeasurement out;
  out.wall_time_s = std::chrono::duration<double>(Clock::now() - begin).count();
  const std::vector<double> all = rt.gather_to_root(mine);
  if (rt.rank() != 0) return out;
  const auto row = [&](int rank) {
    return all.data() + static_cast<std::size_t>(rank) * mine.size();
  };
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      const double bandwidth = row(dst)[src], latency = row(src)[n + dst];
      if (bandwidth < 0 || latency < 0) continue;
      out.samples.push_back({src, dst, bandwidth, latency});
    }
  }
  return out;
}

}  // namespace moebench
