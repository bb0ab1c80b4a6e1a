// The scaling report as JSON (reports/scaling.schema.json): built only from the ScalingResult and
// the inputs' provenance. Keys are stable; bump kScalingSchemaVersion when one changes meaning.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/scaling/scaling.hpp"

namespace moebench {

constexpr int kScalingSchemaVersion = 1;
constexpr const char* kScalingReportKind = "moebench.scaling";
constexpr const char* kScalingSchemaFile = "scaling.schema.json";

// Who made the report: this moebench and the command line.
struct ScalingMeta {
  std::string tool_version;
  std::string git_sha;
  bool git_dirty = false;
  std::vector<std::string> argv;
  std::string created;  // ISO 8601, UTC
};

nlohmann::ordered_json make_scaling_report(const ScalingResult& result,
                                           const std::vector<RunPoint>& runs,
                                           const ScalingOptions& options, const ScalingMeta& meta);

}  // namespace moebench
