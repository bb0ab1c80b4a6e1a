#include "harness/cli/accept_checks.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "harness/core/human.hpp"
#include "harness/measure/stats.hpp"

namespace moebench {

namespace {

// The most common value among a group's members, and whether more than half hold it.
template <typename K>
struct Majority {
  std::size_t members = 0;
  std::size_t largest = 0;
  K value{};
  bool strict() const { return 2 * largest > members; }
};
template <typename K>
Majority<K> majority_of(const std::map<K, std::vector<std::size_t>>& values) {
  Majority<K> m;
  for (const auto& [v, idx] : values) {
    m.members += idx.size();
    if (idx.size() > m.largest) {
      m.largest = idx.size();
      m.value = v;
    }
  }
  return m;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string where(const AcceptResult& r, const AcceptCheck& c) {
  if (c.node < 0) return c.report >= 0 ? "report " + std::to_string(c.report) : "cluster";
  return r.node_names[static_cast<std::size_t>(c.node)] +
         (c.rank >= 0 ? " rank " + std::to_string(c.rank) : "") +
         (c.report >= 0 ? " (report " + std::to_string(c.report) + ")" : "");
}

}  // namespace

bool AcceptResult::passed() const {
  return std::none_of(checks.begin(), checks.end(),
                      [](const AcceptCheck& c) { return c.status == "fail"; });
}

std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

std::string rank_text(const AcceptRank& r) {
  return "rank " + std::to_string(r.rank) + " on " + r.host;
}

AcceptCheck rank_check(const std::string& name, const std::string& stage, const AcceptRank& r) {
  AcceptCheck c;
  c.name = name;
  c.stage = stage;
  c.rank = r.rank;
  c.node = r.node;
  c.report = r.report;
  return c;
}

AcceptCheck cluster_check(const std::string& name, const std::string& stage,
                          const std::string& status, const std::string& reason, int node) {
  AcceptCheck c;
  c.name = name;
  c.stage = stage;
  c.status = status;
  c.reason = reason;
  c.node = node;
  return c;
}

std::string checksum_text(std::uint64_t sum) {
  return strprintf("%016llx", static_cast<unsigned long long>(sum));
}

std::vector<std::string> node_names(const std::vector<AcceptRank>& ranks) {
  std::map<int, std::set<std::string>> hosts_of;
  std::set<std::string> hosts;
  for (const AcceptRank& r : ranks) {
    hosts_of[r.node].insert(r.host);
    hosts.insert(r.host);
  }
  const bool distinct = hosts.size() == hosts_of.size();
  std::vector<std::string> out;
  for (const auto& [node, h] : hosts_of) {
    if (static_cast<int>(out.size()) != node) out.resize(static_cast<std::size_t>(node));
    out.push_back(distinct ? *h.begin() : *h.begin() + "-n" + std::to_string(node));
  }
  return out;
}

std::vector<AcceptCheck> judge_rates(const RateSpec& spec, const std::vector<AcceptRank>& ranks,
                                     const std::vector<double>& values) {
  std::map<std::string, std::vector<double>> by_sku;
  for (std::size_t i = 0; i < ranks.size(); ++i) by_sku[ranks[i].sku].push_back(values[i]);
  std::vector<AcceptCheck> out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const AcceptRank& r = ranks[i];
    const double v = values[i];
    const std::optional<double> expected = spec.expected_for(r.sku);
    AcceptCheck c = rank_check(spec.name, spec.stage, r);
    c.measured = v;
    c.expected = expected;
    c.unit = spec.unit;
    c.source = spec.source;
    c.status = "pass";
    std::vector<std::string> why;
    const std::vector<double>& peers = by_sku[r.sku];
    if (peers.size() >= 3) {
      const double m = median(peers);
      if (v * (1 + spec.min_slowdown) < m) {
        why.push_back(
            strprintf("%.2fx the median rank's %s", v / m, human_rate(m, spec.unit).c_str()));
      }
    }
    if (expected && !spec.nominal && v < spec.floor * *expected) {
      why.push_back(spec.floor == 1.0 ? "under the floor of " + human_rate(*expected, spec.unit)
                                      : strprintf("under %.2f x the SKU's expected %s", spec.floor,
                                                  human_rate(*expected, spec.unit).c_str()));
    }
    c.reason = rank_text(r) + ": " + human_rate(v, spec.unit);
    if (!why.empty()) {
      c.status = "fail";
      c.reason += ", " + why.front() + (why.size() > 1 ? "; " + why.back() : "");
    } else if (expected) {
      c.reason += strprintf(", %.2f x the expected %s%s", v / *expected,
                            human_rate(*expected, spec.unit).c_str(),
                            spec.nominal ? " (nominal: not judged)" : "");
    }
    out.push_back(c);
  }
  return out;
}

std::vector<AcceptCheck> judge_checksums(const std::string& name, const std::string& stage,
                                         const std::string& what,
                                         const std::vector<AcceptRank>& ranks,
                                         const std::vector<std::vector<std::uint64_t>>& sums,
                                         const std::vector<std::string>& group) {
  std::vector<AcceptCheck> out;
  std::map<std::string, std::map<std::uint64_t, std::vector<std::size_t>>> by_group;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (!sums[i].empty()) by_group[group[i]][sums[i].front()].push_back(i);
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (sums[i].empty()) continue;
    const AcceptRank& r = ranks[i];
    AcceptCheck c = rank_check(name, stage, r);
    c.status = "pass";
    const std::set<std::uint64_t> own(sums[i].begin(), sums[i].end());
    const Majority<std::uint64_t> m = majority_of(by_group[group[i]]);
    if (own.size() > 1) {
      c.status = "fail";
      c.reason = rank_text(r) + ": " + what + " gave " + std::to_string(own.size()) +
                 " different results in " + std::to_string(sums[i].size()) + " repeats";
    } else if (m.strict() && sums[i].front() != m.value) {
      c.status = "fail";
      c.reason = rank_text(r) + ": " + what + " differs from " + std::to_string(m.largest) +
                 " of the " + std::to_string(m.members) + " ranks of " + group[i] + " (checksum " +
                 checksum_text(sums[i].front()) + ", theirs " + checksum_text(m.value) + ")";
    } else {
      c.reason = rank_text(r) + ": " + what + " bit-identical" +
                 (sums[i].size() > 1 ? " in " + std::to_string(sums[i].size()) + " repeats" : "") +
                 (m.members > 1 ? " and with the " + std::to_string(m.members - 1) +
                                      " other ranks of " + group[i]
                                : "");
    }
    out.push_back(c);
  }
  for (const auto& [g, values] : by_group) {
    if (values.size() < 2 || majority_of(values).strict()) continue;
    std::string list;
    for (const auto& [sum, idx] : values) {
      for (std::size_t i : idx) list += (list.empty() ? "" : ", ") + std::to_string(ranks[i].rank);
    }
    out.push_back(cluster_check(name, stage, "fail",
                                what + " differs between the ranks of " + g +
                                    " with no majority (ranks " + list +
                                    "): the faulty one cannot be told"));
  }
  return out;
}

std::vector<AcceptCheck> judge_links(const std::vector<AcceptRank>& ranks,
                                     const std::vector<LinkSample>& samples,
                                     const LinkAnalysis& analysis, bool single_links_judged) {
  std::vector<AcceptCheck> out;
  std::map<int, std::vector<const LinkOutlier*>> of_rank;
  std::set<std::pair<int, int>> pairs;
  for (const LinkOutlier& o : analysis.outliers) {
    if (!pairs.insert({o.a, o.b}).second) continue;  // bandwidth and latency: one link
    of_rank[o.a].push_back(&o);
    of_rank[o.b].push_back(&o);
  }
  const auto link_text = [](const LinkOutlier& o) {
    return strprintf("%d-%d %s %.2fx its class's median (%s)", o.a, o.b, o.metric.c_str(),
                     o.slowdown, to_string(o.cls));
  };
  std::set<std::pair<int, int>> blamed;
  for (const auto& [rank, links] : of_rank) {
    if (links.size() < 2) continue;
    const AcceptRank& r = ranks[static_cast<std::size_t>(rank)];
    AcceptCheck c = rank_check("link", "links", r);
    c.status = "fail";
    c.reason = rank_text(r) + ": " + std::to_string(links.size()) + " slow links:";
    for (const LinkOutlier* o : links) {
      c.reason += " " + link_text(*o) + ";";
      blamed.insert({o->a, o->b});
    }
    c.reason.pop_back();
    out.push_back(c);
  }
  for (const LinkOutlier& o : analysis.outliers) {
    if (blamed.contains({o.a, o.b})) continue;
    blamed.insert({o.a, o.b});
    const AcceptRank& a = ranks[static_cast<std::size_t>(o.a)];
    const AcceptRank& b = ranks[static_cast<std::size_t>(o.b)];
    AcceptCheck c = cluster_check("link", "links", single_links_judged ? "fail" : "info", "");
    if (a.node == b.node) {  // either end, but one node: the node's
      c.node = a.node;
      c.reason = "one slow link inside the node of " + a.host + ", either end: " + link_text(o);
    } else {
      c.reason = "one slow link, either end: " + link_text(o) + " (ranks on " + a.host + " and " +
                 b.host + ")";
    }
    if (!single_links_judged) {
      c.reason +=
          " (stated, not judged: the ranks share cores, and one exchange can meet a "
          "rank the scheduler set aside)";
    }
    out.push_back(c);
  }
  if (out.empty()) {
    std::string reason =
        std::to_string(samples.size()) + " links measured, none an outlier of its class";
    for (const LinkClassSummary& k : analysis.classes) {
      reason += strprintf("; %s: median %s", to_string(k.cls),
                          human_rate(k.median_bandwidth, "bytes/s").c_str());
    }
    out.push_back(cluster_check("link", "links", "pass", reason));
  }
  return out;
}

std::vector<AcceptCheck> judge_drift(const std::string& name, const std::string& unit,
                                     const std::vector<AcceptRank>& ranks,
                                     const std::vector<std::vector<double>>& series,
                                     double min_slowdown, bool judged) {
  std::vector<AcceptCheck> out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::vector<double>& v = series[i];
    if (v.empty()) continue;
    // The first third of the rounds against the last third (a round at least each): one round
    // the scheduler or a neighbour slowed does not decide.
    const auto k = static_cast<std::ptrdiff_t>(std::max<std::size_t>(1, v.size() / 3));
    const double first = median(std::vector<double>(v.begin(), v.begin() + k));
    const double last = median(std::vector<double>(v.end() - k, v.end()));
    AcceptCheck c = rank_check(name, "burnin", ranks[i]);
    c.measured = last;
    c.expected = first;
    c.unit = unit;
    c.source = "its own first rounds";
    const bool fell = last * (1 + min_slowdown) < first;
    c.status = fell && judged ? "fail" : "pass";
    const std::string which =
        k == 1 ? std::string("round") : "median of " + std::to_string(k) + " rounds";
    c.reason = rank_text(ranks[i]) + ": " + human_rate(first, unit) + " in the first " + which +
               " of " + std::to_string(v.size()) + ", " + human_rate(last, unit) + " in the last" +
               strprintf(" (%.2fx)", last / first) +
               (!judged ? " (stated, not judged: the ranks share cores)"
                : fell  ? ": it fell during the burn-in"
                        : "");
    out.push_back(c);
  }
  return out;
}

std::vector<AcceptCheck> judge_inventory(const std::vector<AcceptRank>& ranks) {
  std::map<std::string, std::map<std::string, std::vector<std::size_t>>> by_sku;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    by_sku[ranks[i].sku][ranks[i].software].push_back(i);
  std::vector<AcceptCheck> out;
  for (const auto& [sku, values] : by_sku) {
    if (values.size() < 2) continue;
    const Majority<std::string> m = majority_of(values);
    for (const auto& [sw, idx] : values) {
      if (m.strict() && sw == m.value) continue;
      for (std::size_t i : idx) {
        AcceptCheck c = rank_check("inventory", "inventory", ranks[i]);
        c.status = "fail";
        c.reason = rank_text(ranks[i]) + ": runs \"" + sw + "\"" +
                   (m.strict() ? ", where " + std::to_string(m.largest) + " of the " +
                                     std::to_string(m.members) + " " + sku + " ranks run \"" +
                                     m.value + "\""
                               : " (no majority among the " + sku + " ranks)");
        out.push_back(c);
      }
    }
  }
  if (out.empty()) {
    out.push_back(cluster_check("inventory", "inventory", "pass",
                                std::to_string(ranks.size()) + " ranks, " +
                                    std::to_string(by_sku.size()) +
                                    " SKU(s): every rank of a SKU runs the same software"));
  }
  return out;
}

std::vector<AcceptCheck> verification_check(const VerificationResult& v) {
  AcceptCheck c =
      cluster_check("verification", "step", v.passed ? "pass" : "fail",
                    std::to_string(v.mismatches) + " of " + std::to_string(v.compared) +
                        " values differ from the single-process reference beyond tolerance");
  c.measured = static_cast<double>(v.mismatches);
  c.expected = 0;
  c.unit = "values";
  return {c};
}

std::vector<AcceptCheck> health_checks(const std::vector<AcceptRank>& ranks,
                                       const HealthResult& health) {
  std::vector<AcceptCheck> out;
  for (const AcceptRank& r : ranks) {
    AcceptCheck h = rank_check("health", "step", r);
    h.status = "pass";
    h.reason = rank_text(r) + ": ";
    for (const Suspect& x : health.suspects) {
      if (x.rank != r.rank) continue;
      h.status = "fail";
      if (x.metric == kComputeMetric) h.reason += x.reason;
    }
    if (h.status == "pass") {
      h.reason += health.ranks_compared > 0 ? "its step's compute in line with its stage's"
                                            : "not compared (" + health.note + ")";
    }
    out.push_back(h);
  }
  return out;
}

std::vector<AcceptCheck> step_sdc_checks(const std::vector<AcceptRank>& ranks,
                                         const std::vector<std::vector<std::uint64_t>>& sums,
                                         const std::vector<std::string>& places) {
  std::vector<std::vector<std::uint64_t>> twice, dense, expert;
  std::vector<std::string> own, dense_group, expert_group;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::vector<std::uint64_t>& x = sums[i];
    twice.push_back({x[0] ^ x[2], x[1] ^ x[3]});  // one value a run of the step
    dense.push_back({x[0]});
    expert.push_back({x[2]});
    own.push_back("rank " + std::to_string(ranks[i].rank));  // each rank against itself only
    const std::string pp = places[i].substr(0, places[i].find(' '));
    dense_group.push_back("pipeline stage " + pp);
    expert_group.push_back("pipeline stage " + pp + ", expert slot " +
                           places[i].substr(places[i].find(' ') + 1));
  }
  std::vector<AcceptCheck> out = judge_checksums(
      "sdc_same_step", "sdc", "the same step from the same state", ranks, twice, own);
  for (auto [what, values, group] :
       {std::tuple{"its dense parameters after the step", &dense, &dense_group},
        std::tuple{"its experts' parameters after the step", &expert, &expert_group}}) {
    const std::vector<AcceptCheck> more =
        judge_checksums("sdc_replicas", "sdc", what, ranks, *values, *group);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

std::vector<AcceptCheck> hang_checks(const std::vector<AcceptRank>& ranks,
                                     const std::vector<int>& silent, const std::string& stage,
                                     const std::string& error) {
  std::vector<AcceptCheck> out;
  for (int r : silent) {
    AcceptCheck c = rank_check("responsive", stage, ranks[static_cast<std::size_t>(r)]);
    c.status = "fail";
    c.reason = rank_text(ranks[static_cast<std::size_t>(r)]) + ": stopped answering in stage " +
               stage + " (a hung process, GPU or link): the others waited past --timeout";
    out.push_back(c);
  }
  if (out.empty()) {
    out.push_back(
        cluster_check("responsive", stage, "fail",
                      "stage " + stage + " stopped, every rank still answering: " + error));
  }
  return out;
}

std::vector<std::string> drain_lines(const AcceptResult& r) {
  std::map<int, std::vector<const AcceptCheck*>> failed;
  for (const AcceptCheck& c : r.checks) {
    if (c.status == "fail" && c.node >= 0) failed[c.node].push_back(&c);
  }
  std::vector<std::string> out;
  for (const auto& [node, checks] : failed) {
    std::string reason = "moebench accept: " + checks.front()->name;
    if (checks.front()->rank >= 0) reason += " rank " + std::to_string(checks.front()->rank);
    if (checks.size() > 1) reason += " and " + std::to_string(checks.size() - 1) + " more";
    out.push_back("scontrol update NodeName=" + r.node_names[static_cast<std::size_t>(node)] +
                  " State=DRAIN Reason=\"" + reason + "\"");
  }
  return out;
}

namespace {

// A rank's burn-in telemetry, a series a figure (null where a round did not have it).
nlohmann::ordered_json rounds_json(const std::vector<RoundTelemetry>& rounds) {
  using nlohmann::ordered_json;
  ordered_json samples = ordered_json::array(), reasons = ordered_json::array(),
               clock = ordered_json::array(), temperature = ordered_json::array(),
               power = ordered_json::array(), slowdown = ordered_json::array(),
               cap = ordered_json::array();
  const auto opt = [](const std::optional<double>& v) {
    return v ? ordered_json(*v) : ordered_json();
  };
  for (const RoundTelemetry& r : rounds) {
    samples.push_back(r.samples);
    reasons.push_back(r.reason_samples);
    clock.push_back(opt(r.sm_clock_mhz));
    temperature.push_back(opt(r.temperature_c));
    power.push_back(opt(r.power_w));
    slowdown.push_back(r.slowdown_share);
    cap.push_back(r.power_cap_share);
  }
  return {{"samples", samples},           {"reason_samples", reasons}, {"sm_clock_mhz", clock},
          {"temperature_c", temperature}, {"power_w", power},          {"slowdown_share", slowdown},
          {"power_cap_share", cap}};
}

}  // namespace

nlohmann::ordered_json accept_json(const AcceptResult& r, const nlohmann::ordered_json& meta) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["schema_version"] = 1;
  j["kind"] = "moebench.accept";
  j["meta"] = meta;
  ordered_json ranks = ordered_json::array();
  for (const AcceptRank& x : r.ranks) {
    ordered_json rank = {{"rank", x.rank},
                         {"node", x.node},
                         {"node_name", r.node_names[static_cast<std::size_t>(x.node)]},
                         {"host", x.host},
                         {"sku", x.sku},
                         {"software", x.software},
                         {"gemm_checksum", x.gemm_sum ? ordered_json(checksum_text(*x.gemm_sum))
                                                      : ordered_json(nullptr)}};
    if (x.report >= 0) rank["report"] = x.report;
    if (x.nvml) rank["nvml"] = to_json(*x.nvml);
    if (x.nccl) rank["nccl_transports"] = to_json(*x.nccl);
    ranks.push_back(rank);
  }
  j["ranks"] = ranks;
  ordered_json stages = ordered_json::array();
  for (const AcceptStage& s : r.stages) {
    stages.push_back({{"name", s.name}, {"wall_time_s", s.wall_time_s}});
    if (s.stopped) stages.back()["stopped"] = true;
  }
  j["stages"] = stages;
  ordered_json checks = ordered_json::array();
  const auto opt = [](const std::optional<double>& v) {
    return v ? ordered_json(*v) : ordered_json(nullptr);
  };
  for (const AcceptCheck& c : r.checks) {
    checks.push_back(
        {{"name", c.name},
         {"stage", c.stage},
         {"status", c.status},
         {"rank", c.rank >= 0 ? ordered_json(c.rank) : ordered_json(nullptr)},
         {"node", c.node >= 0 ? ordered_json(r.node_names[static_cast<std::size_t>(c.node)])
                              : ordered_json(nullptr)},
         {"measured", opt(c.measured)},
         {"expected", opt(c.expected)},
         {"unit", c.unit.empty() ? ordered_json(nullptr) : ordered_json(c.unit)},
         {"source", c.source.empty() ? ordered_json(nullptr) : ordered_json(c.source)},
         {"reason", c.reason}});
    if (c.report >= 0) checks.back()["report"] = c.report;
  }
  j["checks"] = checks;
  if (r.burnin) {
    ordered_json per_rank = ordered_json::array();
    for (std::size_t i = 0; i < r.burnin->gemm_rate.size(); ++i) {
      per_rank.push_back({{"rank", i},
                          {"gemm_rate", r.burnin->gemm_rate[i]},
                          {"step_time_s", r.burnin->step_time_s[i]},
                          {"telemetry", i < r.burnin->telemetry.size() && r.burnin->telemetry[i]
                                            ? rounds_json(*r.burnin->telemetry[i])
                                            : ordered_json(nullptr)}});
    }
    j["burnin"] = {{"duration_s", r.burnin->duration_s},
                   {"rounds", r.burnin->rounds},
                   {"telemetry_note", r.burnin->telemetry_note.empty()
                                          ? ordered_json(nullptr)
                                          : ordered_json(r.burnin->telemetry_note)},
                   {"ranks", per_rank}};
  } else {
    j["burnin"] = nullptr;
  }
  if (!r.collectives.empty()) {
    ordered_json rows = ordered_json::array();
    for (const CollectiveRow& x : r.collectives) {
      rows.push_back({{"op", x.op},
                      {"bytes", x.bytes},
                      {"time_s", x.time_s},
                      {"algbw", x.algbw},
                      {"busbw", x.busbw}});
    }
    j["collectives"] = rows;
  }
  j["drain"] = drain_lines(r);
  j["passed"] = r.passed();
  return j;
}

std::string accept_markdown(const AcceptResult& r, const nlohmann::ordered_json& meta) {
  std::ostringstream os;
  std::size_t failed = 0;
  for (const AcceptCheck& c : r.checks) failed += c.status == "fail";
  os << "# Acceptance: " << (r.passed() ? "PASS" : "FAIL") << "\n\n";
  os << "- " << r.ranks.size() << " ranks on " << r.node_names.size() << " node(s), system "
     << meta.value("system", std::string("?")) << ", " << meta.value("backend", std::string("?"))
     << " backend\n";
  os << "- " << r.checks.size() << " checks, " << failed << " failed\n";
  const std::vector<std::string> drain = drain_lines(r);
  os << "- nodes to drain: " << drain.size() << "\n";
  if (meta.contains("reports")) {
    os << "- merged from " << meta["reports"].size() << " report(s) (moebench accept-merge):\n";
    for (std::size_t k = 0; k < meta["reports"].size(); ++k) {
      const auto& x = meta["reports"][k];
      os << "  - report " << k << ": " << x["path"].get<std::string>() << ", "
         << x["world"].get<int>() << " ranks on " << x["nodes"].size() << " node(s), "
         << (x["passed"].get<bool>() ? "PASS" : "FAIL") << "\n";
    }
  }
  os << "\n## Checks\n\n";
  os << "| check | stage | where | status | measured | expected | reason |\n";
  os << "|---|---|---|---|---:|---:|---|\n";
  for (const AcceptCheck& c : r.checks) {
    std::string reason = c.reason;
    std::replace(reason.begin(), reason.end(), '|', '/');
    os << "| " << c.name << " | " << c.stage << " | " << where(r, c) << " | "
       << (c.status == "fail" ? "**FAIL**" : c.status) << " | "
       << (c.measured ? human_rate(*c.measured, c.unit) : "-") << " | "
       << (c.expected ? human_rate(*c.expected, c.unit) : "-") << " | " << reason << " |\n";
  }
  os << "\n## Drain\n\n";
  if (drain.empty()) os << "None.\n";
  for (const std::string& line : drain) os << "    " << line << "\n";
  os << "\n## Stages\n\n";
  for (const AcceptStage& s : r.stages) {
    os << "- " << s.name << ": " << strprintf("%.2f", s.wall_time_s) << " s"
       << (s.stopped ? " (stopped: a rank stopped answering)" : "") << "\n";
  }
  return os.str();
}

std::string junit_xml(const AcceptResult& r) {
  std::size_t failures = 0;
  for (const AcceptCheck& c : r.checks) failures += c.status == "fail";
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<testsuites name=\"moebench accept\" tests=\"" << r.checks.size() << "\" failures=\""
     << failures << "\">\n"
     << "  <testsuite name=\"moebench accept\" tests=\"" << r.checks.size() << "\" failures=\""
     << failures << "\">\n";
  for (const AcceptCheck& c : r.checks) {
    os << "    <testcase classname=\"accept." << xml_escape(c.stage) << "." << xml_escape(c.name)
       << "\" name=\"" << xml_escape(where(r, c)) << "\"";
    if (c.status == "fail") {
      os << ">\n      <failure message=\"" << xml_escape(c.reason) << "\"/>\n    </testcase>\n";
    } else {
      os << "/>\n";
    }
  }
  os << "  </testsuite>\n</testsuites>\n";
  return os.str();
}

}  // namespace moebench
