#include "harness/cli/accept_merge.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "harness/core/error.hpp"
#include "harness/core/human.hpp"

namespace moebench {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::optional<double> number_or_none(const json& v) {
  return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
}
std::string string_or_empty(const json& v) {
  return v.is_string() ? v.get<std::string>() : "";
}

// A fleet check keeps its failures and, in place of one passing check a rank, one for the fleet.
void add_fleet(std::vector<AcceptCheck>& out, std::vector<AcceptCheck> judged,
               const std::string& name, const std::string& stage, const std::string& summary) {
  bool failed = false;
  for (AcceptCheck& c : judged) {
    if (c.status != "fail") continue;
    c.name = name;
    out.push_back(c);
    failed = true;
  }
  if (!failed) out.push_back(cluster_check(name, stage, "pass", summary));
}

}  // namespace

std::vector<std::string> parse_node_list(const std::string& text) {
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');
  std::istringstream in(spaced);
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::string name; in >> name;) {
    if (!seen.insert(name).second) throw UsageError("--nodes names " + name + " twice");
    out.push_back(name);
  }
  if (out.empty()) throw UsageError("--nodes is empty: give node names, e.g. --nodes n01,n02");
  return out;
}

MergedAccept merge_accept(const std::vector<AcceptInput>& inputs, const MergeSpec& spec) {
  MergedAccept m;
  AcceptResult& r = m.result;
  std::map<std::string, int> node_index;
  const auto node_of = [&](const std::string& name) {
    const auto [it, added] = node_index.emplace(name, static_cast<int>(r.node_names.size()));
    if (added) r.node_names.push_back(name);
    return it->second;
  };
  // Directories that hold no report, each with the --nodes node its name names (or none).
  std::vector<std::pair<AcceptCheck, std::string>> missing;
  std::vector<std::string> gemm_group;  // per merged rank: its SKU and the probe's size
  std::map<std::pair<int, int>, std::size_t> rank_at;  // (report, rank) -> index in r.ranks
  std::vector<std::size_t> gemm_ranks, memory_ranks;
  std::vector<double> gemm_rates, memory_rates;
  std::set<std::string> backends, systems, injects;
  double min_slowdown = 0, duration = 0;
  std::optional<double> floor;
  std::optional<std::int64_t> gemm_n;
  for (const AcceptInput& in : inputs) {
    if (!in.doc) {
      // accept.sh's DIR/nodes/<node>: the directory's name is the node's.
      const std::string base = fs::path(in.path).lexically_normal().filename().empty()
                                   ? fs::path(in.path).lexically_normal().parent_path().filename()
                                   : fs::path(in.path).lexically_normal().filename();
      const bool named = std::find(spec.expected_nodes.begin(), spec.expected_nodes.end(), base) !=
                         spec.expected_nodes.end();
      missing.emplace_back(
          cluster_check(
              "report_missing", "merge", "fail",
              in.path +
                  " holds no accept.json: its job wrote no report (see the job's "
                  "log)" +
                  (named ? "; node " + base + " is not accepted without its own report" : "")),
          named ? base : std::string());
      continue;
    }
    const json& d = *in.doc;
    const json& meta = d["meta"];
    const int k = static_cast<int>(m.reports.size());
    backends.insert(meta["backend"].get<std::string>());
    systems.insert(meta["system"].get<std::string>());
    if (const std::string inj = meta["inject"].get<std::string>(); !inj.empty()) {
      injects.insert(inj);
    }
    min_slowdown = std::max(min_slowdown, meta["min_slowdown"].get<double>());
    duration = std::max(duration, meta["duration_s"].get<double>());
    if (!floor) floor = meta["floor"].get<double>();
    const std::int64_t n = meta["gemm_n"].get<std::int64_t>();
    if (!gemm_n) gemm_n = n;
    std::vector<std::string> nodes;
    for (const json& x : d["ranks"]) {
      AcceptRank a;
      a.rank = x["rank"].get<int>();
      const std::string name = x["node_name"].get<std::string>();
      if (std::find(nodes.begin(), nodes.end(), name) == nodes.end()) nodes.push_back(name);
      a.node = node_of(name);
      a.host = x["host"].get<std::string>();
      a.sku = x["sku"].get<std::string>();
      a.software = x["software"].get<std::string>();
      if (x["gemm_checksum"].is_string()) {
        a.gemm_sum = std::stoull(x["gemm_checksum"].get<std::string>(), nullptr, 16);
      }
      a.report = k;
      if (x.contains("nvml")) a.nvml = nvml_inventory_from_json(x["nvml"]);
      if (x.contains("nccl_transports")) {
        a.nccl = nccl_transports_from_json(x["nccl_transports"]);
      }
      rank_at[{k, a.rank}] = r.ranks.size();
      r.ranks.push_back(a);
      gemm_group.push_back(a.sku + strprintf(" (%lld^3 GEMM)", static_cast<long long>(n)));
    }
    for (const json& x : d["checks"]) {
      AcceptCheck c;
      c.name = x["name"].get<std::string>();
      c.stage = x["stage"].get<std::string>();
      c.status = x["status"].get<std::string>();
      c.rank = x["rank"].is_number() ? x["rank"].get<int>() : -1;
      c.node = x["node"].is_string() ? node_of(x["node"].get<std::string>()) : -1;
      c.measured = number_or_none(x["measured"]);
      c.expected = number_or_none(x["expected"]);
      c.unit = string_or_empty(x["unit"]);
      c.source = string_or_empty(x["source"]);
      c.reason = x["reason"].get<std::string>();
      c.report = k;
      const auto at = rank_at.find({k, c.rank});
      if (c.measured && at != rank_at.end()) {
        if (c.name == "gemm_rate") {
          gemm_ranks.push_back(at->second);
          gemm_rates.push_back(*c.measured);
        } else if (c.name == "memory_bandwidth") {
          memory_ranks.push_back(at->second);
          memory_rates.push_back(*c.measured);
        }
      }
      r.checks.push_back(c);
    }
    for (const json& s : d["stages"]) {
      r.stages.push_back({s["name"].get<std::string>(), s["wall_time_s"].get<double>(),
                          s.value("stopped", false)});
    }
    m.reports.push_back({{"path", in.path},
                         {"passed", d["passed"].get<bool>()},
                         {"world", meta["world"].get<int>()},
                         {"nodes", nodes},
                         {"start_time", meta["start_time"].get<std::string>()}});
  }
  if (r.ranks.empty()) {
    throw UsageError("none of the " + std::to_string(inputs.size()) +
                     " paths given holds an accept report: nothing to merge (give accept.json "
                     "files or the --out directories of moebench accept)");
  }
  if (backends.size() > 1) {
    throw UsageError(
        "the reports come from different backends (cpu and cuda): merge the reports "
        "of one fleet");
  }
  for (auto& [check, node] : missing) {
    if (!node.empty()) check.node = node_of(node);
    r.checks.push_back(check);
  }
  for (const std::string& name : spec.expected_nodes) {
    if (node_index.contains(name)) continue;
    r.checks.push_back(cluster_check("report_missing", "merge", "fail",
                                     "node " + name + ": no report among the " +
                                         std::to_string(m.reports.size()) +
                                         " merged: its job failed before writing one, did not "
                                         "run, or wrote elsewhere",
                                     node_of(name)));
  }
  const double slowdown = spec.min_slowdown.value_or(min_slowdown);
  if (m.reports.size() >= 2) {
    const auto pick = [&](const std::vector<std::size_t>& idx) {
      std::vector<AcceptRank> out;
      for (std::size_t i : idx) out.push_back(r.ranks[i]);
      return out;
    };
    const std::string across = " across " + std::to_string(m.reports.size()) + " reports";
    std::vector<AcceptCheck> inventory = judge_inventory(r.ranks);
    add_fleet(r.checks, inventory, "fleet_inventory", "inventory",
              std::to_string(r.ranks.size()) + " ranks" + across +
                  ": every rank of a SKU runs the same software");
    RateSpec g;
    g.name = "fleet_gemm_rate";
    g.stage = "gpu";
    g.unit = "FLOP/s";
    g.source = "the fleet's median rank of its SKU";
    g.min_slowdown = slowdown;
    add_fleet(r.checks, judge_rates(g, pick(gemm_ranks), gemm_rates), "fleet_gemm_rate", "gpu",
              std::to_string(gemm_rates.size()) + " GEMM rates" + across +
                  strprintf(": none more than %.2fx slower than its SKU's median", 1 + slowdown));
    RateSpec b = g;
    b.name = "fleet_memory_bandwidth";
    b.unit = "bytes/s";
    add_fleet(r.checks, judge_rates(b, pick(memory_ranks), memory_rates), "fleet_memory_bandwidth",
              "gpu",
              std::to_string(memory_rates.size()) + " memory bandwidths" + across +
                  strprintf(": none more than %.2fx slower than its SKU's median", 1 + slowdown));
    std::vector<std::vector<std::uint64_t>> sums;  // none for a rank stopped before the probe
    for (const AcceptRank& a : r.ranks) {
      sums.push_back(a.gemm_sum ? std::vector<std::uint64_t>{*a.gemm_sum}
                                : std::vector<std::uint64_t>{});
    }
    add_fleet(r.checks,
              judge_checksums("fleet_sdc_gemm", "sdc", "the GEMM probe's result", r.ranks, sums,
                              gemm_group),
              "fleet_sdc_gemm", "sdc",
              std::to_string(r.ranks.size()) + " GEMM results" + across +
                  ": bit-identical within each SKU and size");
  }
  std::string system;
  for (const std::string& s : systems) system += (system.empty() ? "" : ", ") + s;
  std::string inject;
  for (const std::string& s : injects) inject += (inject.empty() ? "" : "; ") + s;
  m.meta_fields = {{"backend", *backends.begin()},
                   {"system", system},
                   {"world", r.ranks.size()},
                   {"nodes", r.node_names.size()},
                   {"floor", floor.value_or(0.8)},
                   {"min_slowdown", slowdown},
                   {"gemm_n", gemm_n.value_or(1)},
                   {"duration_s", duration},
                   {"inject", inject}};
  return m;
}

}  // namespace moebench
