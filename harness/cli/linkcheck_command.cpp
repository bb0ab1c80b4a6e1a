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
#include "harness/cli/link_pairs.hpp"
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
  const std::vector<DeviceRecord> devices = gather_device_records(rt, compute);
  const PairMeasurement measured =
      measure_pairs(*comm, compute, rt, s.rounds, large, l.small_bytes, l.iterations);
  const std::vector<std::string> places =
      rt.all_gather(std::to_string(s.topo.node) + " " + std::to_string(s.topo.local_rank));
  const std::vector<std::string> hosts = rt.all_hosts();
  const NvlinkDomains domains = find_nvlink_domains(rt, compute, l.nvlink_domain_size, s.topo.node);
  if (rt.rank() != 0) return 0;

  const int n = rt.size();
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
  r.samples = measured.samples;
  r.rounds = static_cast<int>(s.rounds.size());
  r.wall_time_s = measured.wall_time_s;
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
