// What `moebench linkcheck` measured, as plain data, and its two forms: the JSON report
// (reports/linkcheck.schema.json) and the console table. Both only read the record.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/device/device_records.hpp"
#include "harness/measure/links.hpp"

namespace moebench {

inline constexpr int kLinkcheckSchemaVersion = 1;
inline constexpr const char* kLinkcheckReportKind = "moebench.linkcheck";
inline constexpr const char* kLinkcheckSchemaFile = "linkcheck.schema.json";

struct LinkRank {
  int rank = 0;
  std::string host;
  int node = 0;
  int local_rank = 0;
  int domain = 0;
};

struct LinkcheckRecord {
  // meta
  std::string tool_version;
  std::string git_sha;
  std::vector<std::string> argv;
  std::string start_time;
  std::string backend;
  std::string comm;
  std::string mpi_library;
  std::vector<DeviceRecord> devices;  // empty on the cpu backend
  std::string domain_source;          // how domains were found: "emulated", "node", "nvml"
  // config
  std::string level;
  std::int64_t large_bytes = 0;
  std::int64_t small_bytes = 0;
  int iterations = 0;
  std::string inject;
  HealthThresholds thresholds;
  // results
  std::vector<LinkRank> ranks;
  std::vector<LinkSample> samples;  // every directed pair measured, by (src, dst)
  int rounds = 0;
  double wall_time_s = 0;  // of the rounds, barriers included
  LinkAnalysis analysis;
};

// The rounds a schedule takes at `ranks` ranks, as many to a node as this run had (8 where it had
// one a node), and the time they take at this run's mean round time: how long a link test of a
// large machine takes.
struct LinkcheckEstimate {
  int ranks = 0;
  int ranks_per_node = 0;
  int all_pairs_rounds = 0;
  int node_level_rounds = 0;
  double round_time_s = 0;  // this run's mean
};
LinkcheckEstimate estimate_linkcheck(const LinkcheckRecord& r, int ranks);

nlohmann::ordered_json make_linkcheck_report(const LinkcheckRecord& r);
std::string format_linkcheck(const LinkcheckRecord& r);
// One line per slow link, naming both ranks (host, GPU), the metric, the slowdown and the
// directions, for the console, --quiet too.
std::vector<std::string> outlier_lines(const LinkcheckRecord& r);

}  // namespace moebench
