#include "harness/cli/accept_transport.hpp"

#include <set>

#include "harness/core/human.hpp"

namespace moebench {

namespace {

// What one rank's transports break of `expect`, each a finding ("" for none).
std::vector<std::string> findings(const NcclTransports& t, const TransportExpectation& expect) {
  std::vector<std::string> out;
  const auto count = [&](const std::string& k) {
    const auto it = t.connections.find(k);
    return it == t.connections.end() ? 0 : it->second;
  };
  const bool rdma_expected = expect.spans_nodes && expect.scale_out_bytes_per_s >= 10e9;
  if (rdma_expected && (count("NET/Socket") > 0 || t.network == "Socket")) {
    out.push_back(
        strprintf("NCCL crossed nodes over TCP sockets (network %s, %d connection(s) via "
                  "NET/Socket) where the system's scale-out network gives %s a GPU "
                  "(an HCA, its driver or NCCL's network plugin missing)",
                  t.network.empty() ? "?" : t.network.c_str(), count("NET/Socket"),
                  human_rate(expect.scale_out_bytes_per_s, "bytes/s").c_str()));
  }
  if (expect.nvlink && count("SHM") > 0) {
    out.push_back(
        strprintf("NCCL connected GPUs of one node through host memory (%d connection(s) "
                  "via SHM) where NVLink P2P is expected (peer access off, an IOMMU or "
                  "ACS setting)",
                  count("SHM")));
  }
  return out;
}

std::string summary(const NcclTransports& t) {
  std::string s = "network " + (t.network.empty() ? std::string("not named") : t.network) + "; ";
  std::string list;
  for (const auto& [k, n] : t.connections) {
    list += (list.empty() ? "" : ", ") + k + " " + std::to_string(n);
  }
  return s + (list.empty() ? "no connection logged" : "connections: " + list);
}

}  // namespace

std::vector<AcceptCheck> judge_transports(const std::vector<AcceptRank>& ranks,
                                          const std::vector<std::optional<NcclTransports>>& seen,
                                          const TransportExpectation& expect,
                                          const std::vector<std::string>& why) {
  std::vector<AcceptCheck> out;
  std::vector<std::vector<std::string>> found(ranks.size());
  std::set<std::string> distinct;
  std::size_t read = 0, failing = 0;
  for (std::size_t i = 0; i < ranks.size() && i < seen.size(); ++i) {
    if (!seen[i]) continue;
    ++read;
    found[i] = findings(*seen[i], expect);
    if (!found[i].empty()) ++failing;
    for (const std::string& f : found[i]) distinct.insert(f);
  }
  if (read == 0) {
    out.push_back(cluster_check("collective_transport", "collectives", "info",
                                "NCCL's transports not known (" +
                                    (why.empty() ? std::string("no reason") : why.front()) + ")"));
    return out;
  }
  // Every rank read and every one failing alike: a setting of the job or the fabric, not a node.
  if (read == ranks.size() && failing == ranks.size() && distinct.size() <= 2) {
    bool alike = true;
    for (const auto& f : found) alike = alike && f == found.front();
    if (alike) {
      std::string reason = "every rank: ";
      for (std::size_t k = 0; k < found.front().size(); ++k) {
        reason += (k ? "; " : "") + found.front()[k];
      }
      out.push_back(cluster_check("collective_transport", "collectives", "fail",
                                  reason + " (" + summary(*seen.front()) + ")"));
      return out;
    }
  }
  for (std::size_t i = 0; i < ranks.size() && i < seen.size(); ++i) {
    if (!seen[i]) {
      AcceptCheck c = rank_check("collective_transport", "collectives", ranks[i]);
      c.status = "info";
      c.reason = rank_text(ranks[i]) + ": NCCL's transports not known (" +
                 (i < why.size() && !why[i].empty() ? why[i] : std::string("no reason")) + ")";
      out.push_back(c);
      continue;
    }
    AcceptCheck c = rank_check("collective_transport", "collectives", ranks[i]);
    c.source = "NCCL's log (NCCL_DEBUG=INFO)";
    c.status = found[i].empty() ? "pass" : "fail";
    c.reason = rank_text(ranks[i]) + ": ";
    for (std::size_t k = 0; k < found[i].size(); ++k) c.reason += (k ? "; " : "") + found[i][k];
    c.reason += (found[i].empty() ? "" : " (") + summary(*seen[i]) + (found[i].empty() ? "" : ")");
    out.push_back(c);
  }
  return out;
}

}  // namespace moebench
