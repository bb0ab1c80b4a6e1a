// `moebench linkcheck`: every pair of ranks (or of nodes) exchanges a large and a small message,
// one way and then the other, in rounds where every rank is busy; the receiver times each. Rank 0
// gathers the matrix, judges each link against its class (harness/measure/links.hpp) and writes
// the report and the heat map.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include "harness/backends/fault/fault_communicator.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/cli/commands.hpp"
#include "harness/cli/plot.hpp"
#include "harness/core/human.hpp"
#include "harness/core/version.hpp"
#include "harness/device/device_records.hpp"
#include "harness/device/nvlink_domains.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/linkcheck_report.hpp"
#include "harness/parallel/pair_schedule.hpp"

namespace moebench {

namespace {

using Clock = std::chrono::steady_clock;

// Defaults of the bandwidth message: large enough to reach a GPU link's bandwidth, small enough
// that host ranks sharing 2 cores finish quickly.
constexpr std::int64_t kDeviceLargeBytes = std::int64_t{64} << 20;
constexpr std::int64_t kHostLargeBytes = std::int64_t{4} << 20;

struct Setup {
  Topology topo;
  std::unique_ptr<Compute> compute;
  std::vector<PairRound> rounds;
};

Setup prepare(const CliOptions& o, const MpiRuntime& rt) {
  const LinkcheckOptions& l = o.linkcheck;
  if (rt.size() < 2) throw UsageError("linkcheck needs 2 or more ranks (mpirun -np N, N >= 2)");
  if (o.inject && std::max(o.inject->rank, o.inject->peer) >= rt.size()) {
    throw UsageError("--inject " + to_string(*o.inject) + ": no rank " +
                     std::to_string(std::max(o.inject->rank, o.inject->peer)) + " in a world of " +
                     std::to_string(rt.size()) + "; valid: a and b from 0 to " +
                     std::to_string(rt.size() - 1));
  }
  if (l.nvlink_domain_size > 0 && rt.size() % l.nvlink_domain_size != 0) {
    throw UsageError("--nvlink-domain-size " + std::to_string(l.nvlink_domain_size) +
                     " does not divide the " + std::to_string(rt.size()) + " ranks");
  }
  Setup s;
  s.topo = rt.topology(ParallelGrid(rt.size(), GridShape{}), l.ranks_per_node);
  if (l.level == "node") {
    // Node-major placement with equal nodes, as the node-level schedule assumes.
    const bool node_major = s.topo.rank == s.topo.node * s.topo.ranks_per_node + s.topo.local_rank;
    if (!rt.all_true(node_major && s.topo.ranks_per_node * s.topo.nodes == rt.size())) {
      throw UsageError(
          "--level node needs the same number of ranks on every node, placed node by node (rank = "
          "node x ranks per node + local rank, as mpirun --map-by core and srun place them)");
    }
    s.rounds = node_level_rounds(s.topo.nodes, s.topo.ranks_per_node);
  } else {
    s.rounds = all_pairs_rounds(rt.size());
  }
  s.compute = make_compute(l.backend, s.topo.local_rank, 1);
  return s;
}

// The best of the timed transfers: a link that is slow is slow every time, while what this
// machine's scheduler adds to a transfer (a peer not running yet) comes and goes, so the fastest
// transfer is the link's own time.
double best_of(const std::vector<double>& t) {
  return *std::min_element(t.begin(), t.end());
}

// The best of `iterations` timed one-way transfers of `buf` (after one untimed), sent to or
// received from `peer`: the receiver's figure is the link's bandwidth.
double one_way(Communicator& comm, const LinkcheckOptions& l, bool send, int peer, const Mat& buf) {
  const P2POp op{send ? P2POp::Kind::send : P2POp::Kind::recv, peer, buf};
  std::vector<double> t;
  for (int i = 0; i <= l.iterations; ++i) {
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
double ping_pong(Communicator& comm, const LinkcheckOptions& l, bool initiator, int peer,
                 const Mat& buf) {
  const P2POp send{P2POp::Kind::send, peer, buf}, recv{P2POp::Kind::recv, peer, buf};
  std::vector<double> t;
  for (int i = 0; i <= kPingPongsPerIteration * l.iterations; ++i) {
    const auto start = Clock::now();
    comm.batch_p2p(Group::world, std::span<const P2POp>(initiator ? &send : &recv, 1));
    comm.batch_p2p(Group::world, std::span<const P2POp>(initiator ? &recv : &send, 1));
    if (i > 0) t.push_back(0.5 * std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best_of(t);
}

}  // namespace

int linkcheck_command(const CliOptions& o, MpiRuntime& rt) {
  const LinkcheckOptions& l = o.linkcheck;
  const std::string start = iso_time_utc();
  Setup s;
  std::string problem;
  try {
    s = prepare(o, rt);
    if (rt.rank() == 0 && !l.out.empty()) ensure_writable_destination(l.out);
    if (rt.rank() == 0 && !l.plot.empty()) ensure_writable_destination(l.plot, "--plot");
  } catch (const UsageError& e) {
    problem = e.what();
  }
  const int first_bad = static_cast<int>(rt.allreduce_min(problem.empty() ? rt.size() : rt.rank()));
  if (first_bad < rt.size()) {
    if (rt.rank() == first_bad) throw UsageError(problem);
    throw Error(ExitCode::usage, "");
  }
  rt.set_timeout(l.timeout_s);
  Compute& compute = *s.compute;
  std::unique_ptr<Communicator> comm =
      make_communicator(l.comm, rt.world(), s.topo, compute, l.timeout_s);
  if (o.inject) comm = make_fault_communicator(std::move(comm), compute, *o.inject);
  const std::int64_t large =
      l.large_bytes.value_or(compute.memory_is_host() ? kHostLargeBytes : kDeviceLargeBytes);
  Tensor large_buf = compute.alloc(1, std::max<std::int64_t>(1, large / 4), DType::f32);
  Tensor small_buf = compute.alloc(1, std::max<std::int64_t>(1, l.small_bytes / 4), DType::f32);
  compute.zero(large_buf.view());
  compute.zero(small_buf.view());
  compute.synchronize();
  const std::vector<DeviceRecord> devices = gather_device_records(rt, compute);

  // What this rank measured (-1: not measured): the bandwidth from each source rank (it received),
  // then the latency towards each destination rank (it started the ping-pong).
  const int n = rt.size();
  std::vector<double> mine(2 * static_cast<std::size_t>(n), -1.0);
  comm->barrier(Group::world);
  const auto begin = Clock::now();
  for (const PairRound& round : s.rounds) {
    const int peer = round[static_cast<std::size_t>(rt.rank())];
    for (int way = 0; way < 2; ++way) {  // the lower rank sends first, then the higher
      if (peer >= 0) {
        const bool send = (way == 0) == (rt.rank() < peer);
        const double t_large = one_way(*comm, l, send, peer, large_buf.view());
        const double t_small = ping_pong(*comm, l, send, peer, small_buf.view());
        if (!send) {
          mine[static_cast<std::size_t>(peer)] =
              t_large > 0 ? static_cast<double>(large) / t_large : 0;
        } else {
          mine[static_cast<std::size_t>(n + peer)] = t_small;
        }
      }
      comm->barrier(Group::world);  // one direction of one round at a time
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - begin).count();
  const std::vector<double> all = rt.gather_to_root(mine);
  const std::vector<std::string> places =
      rt.all_gather(std::to_string(s.topo.node) + " " + std::to_string(s.topo.local_rank));
  const std::vector<std::string> hosts = rt.all_hosts();
  const NvlinkDomains domains = find_nvlink_domains(rt, compute, l.nvlink_domain_size, s.topo.node);
  if (rt.rank() != 0) return 0;

  LinkcheckRecord r;
  r.tool_version = kToolVersion;
  r.git_sha = git_sha();
  r.argv = o.argv;
  r.start_time = start;
  r.backend = to_string(l.backend);
  r.comm = to_string(l.comm);
  r.mpi_library = MpiRuntime::library_version();
  r.devices = devices;
  r.level = l.level;
  r.large_bytes = large;
  r.small_bytes = l.small_bytes;
  r.iterations = l.iterations;
  r.inject = o.inject ? to_string(*o.inject) : "";
  r.thresholds = {l.mad_k, l.min_slowdown.value_or(compute.memory_is_host() ? kHostLinkMinSlowdown
                                                                            : kDeviceMinSlowdown)};
  LinkPlacement placement;
  for (int rank = 0; rank < n; ++rank) {
    LinkRank x;
    x.rank = rank;
    x.host = hosts[static_cast<std::size_t>(rank)];
    std::sscanf(places[static_cast<std::size_t>(rank)].c_str(), "%d %d", &x.node, &x.local_rank);
    placement.node.push_back(x.node);
    r.ranks.push_back(x);
  }
  placement.domain = domains.of_rank;
  r.domain_source = domains.source;
  for (int rank = 0; rank < n; ++rank)
    r.ranks[static_cast<std::size_t>(rank)].domain =
        placement.domain[static_cast<std::size_t>(rank)];
  const auto row = [&](int rank) {
    return all.data() + static_cast<std::size_t>(rank) * mine.size();
  };
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      const double bandwidth = row(dst)[src], latency = row(src)[n + dst];
      if (bandwidth < 0 || latency < 0) continue;
      r.samples.push_back({src, dst, bandwidth, latency});
    }
  }
  r.rounds = static_cast<int>(s.rounds.size());
  r.wall_time_s = wall;
  r.analysis = analyse_links(r.samples, placement, r.thresholds);

  if (!l.quiet) std::cout << format_linkcheck(r) << std::flush;
  const std::string text = make_linkcheck_report(r).dump(2) + "\n";
  if (!l.out.empty()) {
    write_file_atomically(l.out, text);
    if (!l.quiet) std::cout << "# report: " << l.out << "\n";
  }
  if (!l.plot.empty()) {
    std::string json_path = l.out;
    const bool temporary = json_path.empty();
    if (temporary) json_path = write_temporary_file(l.plot, text);
    const bool drawn = draw_plot("plot_linkcheck.py", json_path, l.plot, temporary);
    if (temporary) std::remove(json_path.c_str());
    if (drawn && !l.quiet) std::cout << "# plot: " << l.plot << "\n";
  }
  std::cout << std::flush;
  if (l.gate && !r.analysis.outliers.empty()) {
    std::cerr << "moebench: --health-gate: " << r.analysis.outliers.size()
              << " slow link(s); the report's outliers name them\n";
    for (const std::string& line : outlier_lines(r)) {
      std::cerr << "moebench: --health-gate: " << line << "\n";
    }
    return static_cast<int>(ExitCode::health);
  }
  return 0;
}

}  // namespace moebench
