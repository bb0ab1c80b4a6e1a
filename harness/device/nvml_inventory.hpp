// What NVML says of one GPU for an acceptance inventory: identity, the limits a site sets (power,
// clocks), the health counters (uncorrected ECC errors, row remapping), NVLink links up, and the
// PCIe link the slot allows. Read through NvmlLibrary (loaded at run time, never linked); a field
// NVML does not give stays unknown.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/device/nvml_library.hpp"

namespace moebench {

struct NvmlInventory {
  std::string name, uuid, serial;
  std::optional<unsigned> sm_clock_max_mhz, mem_clock_max_mhz;
  std::optional<double> power_limit_w;
  std::optional<unsigned long long> ecc_uncorrected;  // volatile: since the driver loaded
  std::optional<unsigned> rows_remapped_uncorrectable;
  std::optional<bool> remap_pending, remap_failed;
  std::optional<int> nvlinks_up, nvlinks;  // links active, links the GPU has
  std::optional<unsigned> pcie_max_gen, pcie_max_width, pcie_gen, pcie_width;
};

// The GPU `id` names, or why not: NVML absent, not initialised, or no such GPU.
struct NvmlRead {
  std::optional<NvmlInventory> gpu;
  std::string why;
};
NvmlRead read_nvml_inventory(const NvmlGpuId& id);

nlohmann::ordered_json to_json(const NvmlInventory& x);
NvmlInventory nvml_inventory_from_json(const nlohmann::json& j);

}  // namespace moebench
