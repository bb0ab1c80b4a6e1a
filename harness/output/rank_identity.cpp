#include "harness/output/rank_identity.hpp"

#include <algorithm>
#include <set>

namespace moebench {

RankIdentity identify_rank(const RunRecord& r, int rank) {
  RankIdentity who;
  who.rank = rank;
  const auto& ranks = r.results.per_rank;
  const auto it =
      std::find_if(ranks.begin(), ranks.end(), [&](const RankResult& x) { return x.rank == rank; });
  if (it != ranks.end()) {
    who.host = it->host;
    who.node = it->node;
    who.local_rank = it->local_rank;
  }
  const auto dev = std::find_if(r.meta.devices.begin(), r.meta.devices.end(),
                                [&](const DeviceRecord& d) { return d.rank == rank; });
  if (dev != r.meta.devices.end()) {
    who.gpu_index = dev->info.ordinal;
    who.uuid = dev->info.uuid;
    who.pci_bus_id = dev->info.pci_bus_id;
    if (who.host.empty()) who.host = dev->host;
  }
  return who;
}

std::string describe(const RankIdentity& who) {
  std::string s = "rank " + std::to_string(who.rank) + " (host " + who.host + ", local rank " +
                  std::to_string(who.local_rank);
  if (who.gpu_index >= 0) {
    s += ", GPU " + std::to_string(who.gpu_index) + " " + who.uuid + " " + who.pci_bus_id;
  }
  return s + ")";
}

std::vector<std::string> suspect_lines(const RunRecord& r) {
  std::vector<std::string> lines;
  std::set<int> named;
  for (const Suspect& s : r.health.suspects) {
    if (!named.insert(s.rank).second) continue;  // the rank's first entry (its compute total)
    lines.push_back(describe(identify_rank(r, s.rank)) + ": " + s.reason);
  }
  return lines;
}

}  // namespace moebench
