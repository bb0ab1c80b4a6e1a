#include "harness/cli/accept_nvml.hpp"

#include <functional>
#include <map>

#include "harness/core/human.hpp"

namespace moebench {

namespace {

// A setting that must match across one model's GPUs: its name for people, its value as text.
struct Setting {
  const char* what;
  std::function<std::optional<std::string>(const NvmlInventory&)> value;
};

template <typename T>
std::function<std::optional<std::string>(const NvmlInventory&)> shown(
    std::optional<T> NvmlInventory::*field, const char* unit) {
  return [field, unit](const NvmlInventory& x) -> std::optional<std::string> {
    if (!(x.*field)) return std::nullopt;
    return strprintf("%g%s", static_cast<double>(*(x.*field)), unit);
  };
}

const std::vector<Setting>& settings() {
  static const std::vector<Setting> all = {
      {"power limit", shown(&NvmlInventory::power_limit_w, " W")},
      {"maximum SM clock", shown(&NvmlInventory::sm_clock_max_mhz, " MHz")},
      {"maximum memory clock", shown(&NvmlInventory::mem_clock_max_mhz, " MHz")},
      {"NVLinks up", shown(&NvmlInventory::nvlinks_up, "")},
      {"PCIe generation the slot allows", shown(&NvmlInventory::pcie_max_gen, "")},
      {"PCIe width the slot allows", shown(&NvmlInventory::pcie_max_width, " lanes")}};
  return all;
}

}  // namespace

std::vector<AcceptCheck> judge_nvml(const std::vector<AcceptRank>& ranks,
                                    const std::vector<std::optional<NvmlInventory>>& gpus,
                                    const std::string& why) {
  std::vector<AcceptCheck> out;
  // Each setting's values among each model's GPUs: value -> how many.
  std::map<std::string, std::vector<std::map<std::string, int>>> seen;
  for (const auto& g : gpus) {
    if (!g) continue;
    auto& by = seen[g->name];
    by.resize(settings().size());
    for (std::size_t k = 0; k < settings().size(); ++k) {
      if (const auto v = settings()[k].value(*g)) ++by[k][*v];
    }
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (!gpus[i]) continue;
    const NvmlInventory& g = *gpus[i];
    AcceptCheck c = cluster_check("nvml", "inventory", "pass", "", ranks[i].node);
    c.rank = ranks[i].rank;
    c.source = "NVML";
    std::vector<std::string> findings;
    if (g.ecc_uncorrected && *g.ecc_uncorrected > 0) {
      findings.push_back(std::to_string(*g.ecc_uncorrected) +
                         " uncorrected ECC errors since the driver loaded");
    }
    if (g.remap_failed && *g.remap_failed) {
      findings.push_back("a row remapping failed (the GPU needs service)");
    }
    if (g.remap_pending && *g.remap_pending) {
      findings.push_back("a row remapping is pending (the GPU needs a reset)");
    }
    const auto& by = seen[g.name];
    for (std::size_t k = 0; k < settings().size(); ++k) {
      const auto v = settings()[k].value(g);
      if (!v) continue;
      int members = 0, largest = 0;
      std::string common;
      for (const auto& [value, n] : by[k]) {
        members += n;
        if (n > largest) {
          largest = n;
          common = value;
        }
      }
      if (2 * largest > members && *v != common) {
        findings.push_back(strprintf("%s %s where %d of the %d %s GPUs have %s", settings()[k].what,
                                     v->c_str(), largest, members, g.name.c_str(), common.c_str()));
      }
    }
    c.reason = "rank " + std::to_string(ranks[i].rank) + " on " + ranks[i].host + ": " + g.name +
               " " + g.uuid;
    if (!findings.empty()) {
      c.status = "fail";
      for (const std::string& f : findings) c.reason += "; " + f;
    } else {
      c.reason += strprintf(
          ": no uncorrected ECC error, no row remapping pending; %s, NVLinks up %s of %s, PCIe "
          "Gen%s x%s",
          g.power_limit_w ? strprintf("%g W", *g.power_limit_w).c_str() : "power limit unknown",
          g.nvlinks_up ? std::to_string(*g.nvlinks_up).c_str() : "?",
          g.nvlinks ? std::to_string(*g.nvlinks).c_str() : "?",
          g.pcie_max_gen ? std::to_string(*g.pcie_max_gen).c_str() : "?",
          g.pcie_max_width ? std::to_string(*g.pcie_max_width).c_str() : "?");
    }
    out.push_back(c);
  }
  if (out.empty()) {
    out.push_back(cluster_check("nvml", "inventory", "info",
                                "no GPU inventory from NVML (" + why +
                                    "): clocks, power limits, ECC, row remapping, NVLinks and "
                                    "the PCIe link are not checked"));
  }
  return out;
}

}  // namespace moebench
