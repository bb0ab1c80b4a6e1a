// `moebench accept`'s NVML inventory, judged: each GPU's health counters (uncorrected ECC errors
// since the driver loaded, a row remapping pending or failed) and the settings that must match
// across the GPUs of one model (power limit, maximum clocks, NVLinks up, the PCIe link the slot
// allows), each against the majority of the ranks of its model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/cli/accept_checks.hpp"
#include "harness/device/nvml_inventory.hpp"

namespace moebench {

// One check a rank with an inventory (`nvml`, stage inventory): pass with a summary, or fail
// with every finding; when no rank has one, a single check stating why (`why`), which fails
// nothing.
std::vector<AcceptCheck> judge_nvml(const std::vector<AcceptRank>& ranks,
                                    const std::vector<std::optional<NvmlInventory>>& gpus,
                                    const std::string& why);

}  // namespace moebench
