#include "harness/output/linkcheck_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "harness/parallel/pair_schedule.hpp"

namespace moebench {

namespace {

using ojson = nlohmann::ordered_json;

// The GPU of `rank`, or none.
const DeviceRecord* device_of(const LinkcheckRecord& r, int rank) {
  for (const DeviceRecord& d : r.devices) {
    if (d.rank == rank) return &d;
  }
  return nullptr;
}

ojson rank_json(const LinkcheckRecord& r, const LinkRank& x) {
  const DeviceRecord* d = device_of(r, x.rank);
  return ojson{{"rank", x.rank},
               {"host", x.host},
               {"node", x.node},
               {"local_rank", x.local_rank},
               {"domain", x.domain},
               {"gpu_index", d ? ojson(d->info.ordinal) : ojson()},
               {"uuid", d ? ojson(d->info.uuid) : ojson()},
               {"pci_bus_id", d ? ojson(d->info.pci_bus_id) : ojson()}};
}

// "rank 3 (host h, GPU 3 0000:19:00.0)".
std::string who(const LinkcheckRecord& r, int rank) {
  std::string s = "rank " + std::to_string(rank);
  if (static_cast<std::size_t>(rank) < r.ranks.size()) {
    s += " (host " + r.ranks[static_cast<std::size_t>(rank)].host;
    if (const DeviceRecord* d = device_of(r, rank)) {
      s += ", GPU " + std::to_string(d->info.ordinal) + " " + d->info.pci_bus_id;
    }
    s += ")";
  }
  return s;
}

std::string gbps(double bytes_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g GB/s", bytes_per_s / 1e9);
  return buf;
}

std::string usec(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g us", s * 1e6);
  return buf;
}

std::string value_text(const LinkOutlier& o, double v) {
  return o.metric == "bandwidth" ? gbps(v) : usec(v);
}

std::string reason(const LinkcheckRecord& r, const LinkOutlier& o) {
  char ratio[32];
  std::snprintf(ratio, sizeof(ratio), "%.2fx", o.slowdown);
  return o.metric + " " + who(r, o.a) + " -> " + who(r, o.b) + " " + value_text(o, o.a_to_b) +
         ", back " + value_text(o, o.b_to_a) + ": " + ratio + " worse than the median " +
         to_string(o.cls) + " link (" + value_text(o, o.median) + ")";
}

}  // namespace

LinkcheckEstimate estimate_linkcheck(const LinkcheckRecord& r, int ranks) {
  const int nodes = r.ranks.empty() ? 1 : r.ranks.back().node + 1;
  const int here = std::max(1, static_cast<int>(r.ranks.size()) / nodes);
  const int ranks_per_node = here > 1 ? here : 8;
  LinkcheckEstimate e;
  e.ranks = ranks;
  e.ranks_per_node = ranks_per_node;
  e.all_pairs_rounds = static_cast<int>(all_pairs_rounds(ranks).size());
  e.node_level_rounds =
      static_cast<int>(node_level_rounds(ranks / ranks_per_node, ranks_per_node).size());
  e.round_time_s = r.rounds > 0 ? r.wall_time_s / r.rounds : 0;
  return e;
}

nlohmann::ordered_json make_linkcheck_report(const LinkcheckRecord& r) {
  const int n = static_cast<int>(r.ranks.size());
  ojson bw = ojson::array(), lat = ojson::array();
  std::map<std::pair<int, int>, const LinkSample*> at;
  for (const LinkSample& s : r.samples) at[{s.src, s.dst}] = &s;
  for (int a = 0; a < n; ++a) {
    ojson brow = ojson::array(), lrow = ojson::array();
    for (int b = 0; b < n; ++b) {
      const auto it = at.find({a, b});
      brow.push_back(it == at.end() ? ojson() : ojson(it->second->bandwidth));
      lrow.push_back(it == at.end() ? ojson() : ojson(it->second->latency_s));
    }
    bw.push_back(brow);
    lat.push_back(lrow);
  }
  ojson ranks = ojson::array();
  for (const LinkRank& x : r.ranks) ranks.push_back(rank_json(r, x));
  ojson classes = ojson::array();
  for (const LinkClassSummary& c : r.analysis.classes) {
    classes.push_back(ojson{{"class", to_string(c.cls)},
                            {"directed_pairs", c.directed_pairs},
                            {"median_bandwidth", c.median_bandwidth},
                            {"median_latency_s", c.median_latency_s}});
  }
  ojson outliers = ojson::array();
  for (const LinkOutlier& o : r.analysis.outliers) {
    outliers.push_back(ojson{{"a", rank_json(r, r.ranks[static_cast<std::size_t>(o.a)])},
                             {"b", rank_json(r, r.ranks[static_cast<std::size_t>(o.b)])},
                             {"class", to_string(o.cls)},
                             {"metric", o.metric},
                             {"a_to_b", o.a_to_b},
                             {"b_to_a", o.b_to_a},
                             {"median", o.median},
                             {"slowdown", o.slowdown},
                             {"directions", o.directions},
                             {"reason", reason(r, o)}});
  }
  ojson devices = ojson::array();
  for (const DeviceRecord& d : r.devices) devices.push_back(to_json(d));
  const LinkcheckEstimate e = estimate_linkcheck(r, 1024);
  return ojson{
      {"schema_version", kLinkcheckSchemaVersion},
      {"kind", kLinkcheckReportKind},
      {"meta", ojson{{"tool_version", r.tool_version},
                     {"git_sha", r.git_sha},
                     {"argv", r.argv},
                     {"start_time", r.start_time},
                     {"backend", r.backend},
                     {"comm", r.comm},
                     {"mpi_library", r.mpi_library},
                     {"devices", devices},
                     {"domain_source", r.domain_source}}},
      {"config", ojson{{"level", r.level},
                       {"large_bytes", r.large_bytes},
                       {"small_bytes", r.small_bytes},
                       {"iterations", r.iterations},
                       {"inject", r.inject.empty() ? ojson() : ojson(r.inject)},
                       {"mad_k", r.thresholds.mad_k},
                       {"min_slowdown", r.thresholds.min_slowdown}}},
      {"ranks", ranks},
      {"method",
       "rounds of pairs (every rank busy in each); in a round each pair sends the large message "
       "one way `iterations` times and ping-pongs the small one 5 x `iterations` times, then the "
       "other way round; the fastest transfer counts (a slow link is slow every time, a busy "
       "scheduler only "
       "sometimes): bandwidth = large_bytes / the receiver's time, latency = half the "
       "initiator's round trip. A directed pair is an outlier when it is worse than the median of "
       "its "
       "class by more than min_slowdown and more than mad_k robust standard deviations"},
      {"rounds", r.rounds},
      {"wall_time_s", r.wall_time_s},
      {"estimate", ojson{{"ranks", e.ranks},
                         {"ranks_per_node", e.ranks_per_node},
                         {"round_time_s", e.round_time_s},
                         {"all_pairs_rounds", e.all_pairs_rounds},
                         {"all_pairs_s", e.all_pairs_rounds * e.round_time_s},
                         {"node_level_rounds", e.node_level_rounds},
                         {"node_level_s", e.node_level_rounds * e.round_time_s}}},
      {"matrix", ojson{{"rows", "source rank"},
                       {"columns", "destination rank"},
                       {"bandwidth", bw},
                       {"latency_s", lat}}},
      {"classes", classes},
      {"outliers", outliers}};
}

std::string format_linkcheck(const LinkcheckRecord& r) {
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line,
                "# moebench linkcheck: %zu ranks, level %s, %s over %s, %lld-byte and %lld-byte "
                "messages, %d iterations\n",
                r.ranks.size(), r.level.c_str(), r.backend.c_str(), r.comm.c_str(),
                static_cast<long long>(r.large_bytes), static_cast<long long>(r.small_bytes),
                r.iterations);
  out += line;
  out += "#\n#  class          pairs  bandwidth (GB/s)  latency (us)\n";
  for (const LinkClassSummary& c : r.analysis.classes) {
    std::snprintf(line, sizeof line, "#  %-13s %6d %17.3f %13.2f\n", to_string(c.cls),
                  c.directed_pairs, c.median_bandwidth / 1e9, c.median_latency_s * 1e6);
    out += line;
  }
  std::snprintf(line, sizeof line, "#\n# %d rounds in %.3f s (%.3f ms a round)\n", r.rounds,
                r.wall_time_s, r.rounds > 0 ? 1e3 * r.wall_time_s / r.rounds : 0.0);
  out += line;
  const LinkcheckEstimate e = estimate_linkcheck(r, 1024);
  std::snprintf(line, sizeof line,
                "# at 1024 ranks (%d a node): every pair %d rounds, about %.0f s; --level node %d "
                "rounds, about %.1f s (at this run's round time)\n",
                e.ranks_per_node, e.all_pairs_rounds, e.all_pairs_rounds * e.round_time_s,
                e.node_level_rounds, e.node_level_rounds * e.round_time_s);
  out += line;
  if (r.analysis.outliers.empty()) {
    std::snprintf(
        line, sizeof line,
        "# outliers: none (> %.3g robust SD and %.0f%% worse than their class's median)\n",
        r.thresholds.mad_k, 100 * r.thresholds.min_slowdown);
    return out + line;
  }
  std::snprintf(line, sizeof line,
                "# outliers: %zu (> %.3g robust SD and %.0f%% worse than their class's median)\n",
                r.analysis.outliers.size(), r.thresholds.mad_k, 100 * r.thresholds.min_slowdown);
  out += line;
  for (const LinkOutlier& o : r.analysis.outliers) out += "#   " + reason(r, o) + "\n";
  return out;
}

std::vector<std::string> outlier_lines(const LinkcheckRecord& r) {
  std::vector<std::string> lines;
  for (const LinkOutlier& o : r.analysis.outliers) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.2fx", o.slowdown);
    lines.push_back("slow link " + who(r, o.a) + " - " + who(r, o.b) + ": " + o.metric + " " +
                    ratio + " worse than the median " + to_string(o.cls) + " link (" +
                    o.directions + ")");
  }
  return lines;
}

}  // namespace moebench
