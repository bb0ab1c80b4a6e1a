// System descriptions: the hardware figures a prediction of a step's time needs (peak dense
// FLOP/s per precision, memory and its bandwidth, the NVLink domain and its bandwidth, NVLS, the
// scale-out network, latencies), per GPU in SI units, each with its source. The built-in ones are
// harness/systems/data/*.json, compiled in; a user's own file follows reports/system.schema.json.
// `moebench systems` lists them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moebench {

constexpr const char* kSystemSchemaFile = "system.schema.json";

// One figure and where it comes from; no value where the system has no such thing (no FP8
// tensor cores, no NVLink).
struct Figure {
  std::optional<double> value;
  std::string source;
};

struct SystemSpec {
  std::string name;
  std::string description;
  std::string gpu;
  std::string generation;                             // hopper, blackwell, cpu
  Figure peak_bf16, peak_fp8, peak_mxfp8, peak_fp32;  // dense FLOP/s per GPU
  Figure memory_bytes;
  Figure memory_bandwidth;  // bytes/s per GPU
  Figure nvlink_domain_gpus;
  Figure nvlink_bandwidth;  // bytes/s per GPU, each direction
  bool nvls = false;
  Figure scale_out_bandwidth;  // bytes/s per GPU, each direction
  std::string scale_out_topology;
  Figure nvlink_latency;     // seconds
  Figure scale_out_latency;  // seconds
  Figure sm_count;           // streaming multiprocessors per GPU (optional in a user's file)
  Figure exp_per_s;          // the SFUs' exponentials per second per GPU (optional likewise)
  // bytes/s each way between a GPU and host memory, every GPU of the node copying (optional)
  Figure host_link_bandwidth;
  nlohmann::json document;  // the description as written
};

// A description already valid against the schema, as a SystemSpec.
SystemSpec system_from_json(const nlohmann::json& doc);

// The built-in systems, in name order (parsed once; the tests check them against the schema).
const std::vector<SystemSpec>& builtin_systems();

// Why a figure cannot be a real system's ("" when every one is in range): a GPU's dense peak of 1
// to 100,000 TFLOP/s (the cpu system's from 1 GFLOP/s), bandwidths in bytes/s, latencies in
// seconds. Catches unit mistakes (989 for TFLOP/s, 450 for GB/s) and figures that would print as
// inf or NaN.
std::string implausible_figure(const SystemSpec& s);

// A user's file: read as a regular file, parsed, checked against reports/system.schema.json;
// UsageError "--system PATH: <what is wrong>; <what would be right>" otherwise, one line.
SystemSpec load_system_file(const std::string& path);

// A built-in system by name, or a user's file (a name with '/' or ending in .json); UsageError
// naming the built-in names otherwise.
SystemSpec find_system(const std::string& name_or_file);

// `moebench systems`: one row per system (per GPU: TFLOP/s, memory, bandwidths, NVLink domain),
// and the note that every figure's source is in --json.
std::string format_systems(const std::vector<SystemSpec>& systems);

}  // namespace moebench
