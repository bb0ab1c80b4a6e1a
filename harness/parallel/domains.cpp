#include "harness/parallel/domains.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "harness/core/error.hpp"

namespace moebench {

std::vector<int> domains_from_keys(const std::vector<std::string>& keys) {
  std::map<std::string, int> index;
  std::vector<int> out;
  out.reserve(keys.size());
  for (const std::string& k : keys) {
    const auto [it, fresh] = index.try_emplace(k, static_cast<int>(index.size()));
    out.push_back(it->second);
  }
  return out;
}

std::vector<int> emulated_domains(int world, int size) {
  MB_CHECK(world >= 1 && size >= 1 && world % size == 0,
           "domains of " << size << " ranks in a world of " << world);
  std::vector<int> out(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) out[static_cast<std::size_t>(r)] = r / size;
  return out;
}

std::vector<std::string> straddling_expert_groups(const ParallelGrid& grid,
                                                  const std::vector<int>& domains,
                                                  std::size_t limit) {
  MB_CHECK(static_cast<int>(domains.size()) == grid.world(),
           domains.size() << " domains for " << grid.world() << " ranks");
  std::vector<std::string> out;
  std::size_t more = 0;
  std::map<int, int> domain_size;
  for (int d : domains) ++domain_size[d];
  const std::vector<std::vector<int>> groups = grid.groups(Group::expert);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::set<int> seen;
    for (int r : groups[g]) seen.insert(domains[static_cast<std::size_t>(r)]);
    if (seen.size() < 2) continue;
    // A group larger than its domains spans them by design (EP 32 over 8-GPU nodes).
    int smallest = static_cast<int>(domains.size());
    for (int d : seen) smallest = std::min(smallest, domain_size[d]);
    if (static_cast<int>(groups[g].size()) > smallest) continue;
    if (out.size() >= limit) {
      ++more;
      continue;
    }
    std::string ranks, ds;
    const auto [lo, hi] = std::minmax_element(groups[g].begin(), groups[g].end());
    const bool consecutive = *hi - *lo + 1 == static_cast<int>(groups[g].size());
    ranks = consecutive ? std::to_string(*lo) + "-" + std::to_string(*hi)
                        : std::to_string(groups[g].size()) + " ranks from " + std::to_string(*lo);
    for (int d : seen) ds += (ds.empty() ? "" : ", ") + std::to_string(d);
    out.push_back("expert group " + std::to_string(g) + " (world ranks " + ranks +
                  ") spans NVLink domains " + ds +
                  ": part of its dispatch and combine crosses between domains; with ranks "
                  "placed domain by domain, every expert group stays in one domain when the "
                  "domain's GPU count is a multiple of --ep (" +
                  std::to_string(grid.ep()) + ")");
  }
  if (more > 0) out.push_back("and " + std::to_string(more) + " more expert groups like it");
  return out;
}

}  // namespace moebench
