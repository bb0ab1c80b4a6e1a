// `moebench accept-merge`: many acceptance reports (one per single-node Slurm job, and one of a
// job across the nodes) into one verdict and one drain list. Every report's checks are kept as
// they were judged; the merge adds what no single job could see: a node expected (--nodes) with
// no report, and the fleet's view across reports (a node slower than the fleet's median for its
// SKU, a GEMM whose result differs from the fleet's, software that differs between nodes).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli/accept_checks.hpp"

namespace moebench {

// One path given to the merge: an accept.json (already valid against accept.schema.json), or a
// job's output directory that holds none (doc empty: its job wrote no report).
struct AcceptInput {
  std::string path;
  std::optional<nlohmann::json> doc;
};

struct MergeSpec {
  std::vector<std::string> expected_nodes;  // --nodes: each must appear in some report
  std::optional<double> min_slowdown;       // default: the largest of the reports'
};

struct MergedAccept {
  AcceptResult result;
  nlohmann::ordered_json reports = nlohmann::ordered_json::array();  // meta.reports
  nlohmann::ordered_json meta_fields;  // backend, system, floor, gemm_n, inject, duration_s, ...
};

// Throws UsageError when the reports cannot be merged (none readable, different backends).
MergedAccept merge_accept(const std::vector<AcceptInput>& inputs, const MergeSpec& spec);

// --nodes: names separated by commas or white space (what `scontrol show hostnames` prints),
// each once.
std::vector<std::string> parse_node_list(const std::string& text);

}  // namespace moebench
