// `moebench accept --dcgm FILE`: a site's `dcgmi diag -r N -j` results folded into the same
// checks and drain list. Both of DCGM's JSON layouts are read: 3.x ("DCGM GPU Diagnostic",
// results keyed by gpu_id, or gpu_ids before 3.3) and 4.x ("DCGM Diagnostic", results keyed by
// entity_group/entity_id). DCGM records neither the host nor a GPU's UUID: a file is one node's
// (FILE may hold %h, the node's name), and a GPU is its index on the node, which is the index of
// the node's rank that uses it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli/accept_checks.hpp"

namespace moebench {

struct DcgmResult {
  std::string category;  // Deployment, Integration, Hardware, Stress
  std::string test;      // PCIe, GPU Memory (3.x); pcie, memory (4.x)
  int gpu = -1;          // the GPU's index on its node; -1: the node's (no GPU named)
  std::string status;    // pass, skip, fail (DCGM's JSON writes a warning as Fail)
  std::string message;   // the warnings, joined
};

struct DcgmDiag {
  std::string version;        // DCGM's
  std::string driver;         // the driver it detected
  std::string runtime_error;  // DCGM did not run its tests: why
  std::vector<DcgmResult> results;
};

// Throws UsageError when `doc` is neither layout.
DcgmDiag parse_dcgm(const nlohmann::json& doc);

// One node's results as checks (stage and name "dcgm"): a failed GPU test is its rank's check
// (the node's, for a GPU no rank of the job uses), a failed node test or a runtime error the
// node's; one passing check for the node when nothing failed.
std::vector<AcceptCheck> judge_dcgm(const std::vector<AcceptRank>& ranks, int node,
                                    const std::string& node_name, const DcgmDiag& diag);

// FILE with %h replaced by the node's name.
std::string dcgm_path(const std::string& pattern, const std::string& node_name);

}  // namespace moebench
