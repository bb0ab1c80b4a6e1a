#include "harness/systems/systems.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/output/schema.hpp"

namespace moebench {

// Generated from harness/systems/data/*.json (harness/layers.cmake).
extern const char* const kSystemFiles[];
extern const int kSystemFileCount;

namespace {

Figure figure(const nlohmann::json& j) {
  Figure f;
  if (j.at("value").is_number()) f.value = j.at("value").get<double>();
  f.source = j.at("source").get<std::string>();
  return f;
}

std::string cell(const std::optional<double>& v, double unit, const char* format) {
  if (!v) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, *v / unit);
  return text;
}

}  // namespace

SystemSpec system_from_json(const nlohmann::json& doc) {
  SystemSpec s;
  s.name = doc.at("name").get<std::string>();
  s.description = doc.at("description").get<std::string>();
  s.gpu = doc.at("gpu").get<std::string>();
  s.generation = doc.at("generation").get<std::string>();
  const nlohmann::json& peak = doc.at("peak_dense_flops");
  s.peak_bf16 = figure(peak.at("bf16"));
  s.peak_fp8 = figure(peak.at("fp8"));
  s.peak_mxfp8 = figure(peak.at("mxfp8"));
  s.peak_fp32 = figure(peak.at("fp32"));
  s.memory_bytes = figure(doc.at("memory_bytes"));
  s.memory_bandwidth = figure(doc.at("memory_bandwidth_bytes_per_s"));
  s.nvlink_domain_gpus = figure(doc.at("nvlink_domain_gpus"));
  s.nvlink_bandwidth = figure(doc.at("nvlink_bandwidth_bytes_per_s"));
  s.nvls = doc.at("nvls").at("value").get<bool>();
  s.scale_out_bandwidth = figure(doc.at("scale_out_bandwidth_bytes_per_s"));
  s.scale_out_topology = doc.at("scale_out_topology").at("value").get<std::string>();
  s.nvlink_latency = figure(doc.at("nvlink_latency_s"));
  s.scale_out_latency = figure(doc.at("scale_out_latency_s"));
  if (doc.contains("sm_count")) s.sm_count = figure(doc.at("sm_count"));
  if (doc.contains("exp_per_s")) s.exp_per_s = figure(doc.at("exp_per_s"));
  if (doc.contains("host_link_bandwidth_bytes_per_s")) {
    s.host_link_bandwidth = figure(doc.at("host_link_bandwidth_bytes_per_s"));
  }
  s.document = doc;
  return s;
}

const std::vector<SystemSpec>& builtin_systems() {
  static const std::vector<SystemSpec> all = [] {
    std::vector<SystemSpec> out;
    for (int i = 0; i < kSystemFileCount; ++i) {
      out.push_back(system_from_json(nlohmann::json::parse(kSystemFiles[i])));
    }
    std::sort(out.begin(), out.end(),
              [](const SystemSpec& a, const SystemSpec& b) { return a.name < b.name; });
    return out;
  }();
  return all;
}

std::string implausible_figure(const SystemSpec& s) {
  struct Range {
    const char* name;
    const Figure* figure;
    double low, high;
    const char* unit;
  };
  // A GPU's dense peak is 1 to 100,000 TFLOP/s; the cpu system's from 1 GFLOP/s. Bandwidths are
  // bytes/s: 450 GB/s is 4.5e11, and "450" is a unit mistake, not a slow link.
  const double peak_low = s.generation == "cpu" ? 1e9 : 1e12;
  const Range ranges[] = {
      {"peak_dense_flops.bf16", &s.peak_bf16, peak_low, 1e17, "FLOP/s"},
      {"peak_dense_flops.fp8", &s.peak_fp8, peak_low, 1e17, "FLOP/s"},
      {"peak_dense_flops.mxfp8", &s.peak_mxfp8, peak_low, 1e17, "FLOP/s"},
      {"peak_dense_flops.fp32", &s.peak_fp32, 1e9, 1e17, "FLOP/s"},
      {"memory_bytes", &s.memory_bytes, 1e9, 1e14, "bytes"},
      {"memory_bandwidth_bytes_per_s", &s.memory_bandwidth, 1e9, 1e15, "bytes/s"},
      {"nvlink_bandwidth_bytes_per_s", &s.nvlink_bandwidth, 1e9, 1e14, "bytes/s"},
      {"scale_out_bandwidth_bytes_per_s", &s.scale_out_bandwidth, 1e8, 1e14, "bytes/s"},
      {"host_link_bandwidth_bytes_per_s", &s.host_link_bandwidth, 1e8, 1e14, "bytes/s"},
      {"nvlink_latency_s", &s.nvlink_latency, 1e-9, 1e-2, "s"},
      {"scale_out_latency_s", &s.scale_out_latency, 1e-9, 1e-1, "s"},
  };
  for (const Range& r : ranges) {
    if (!r.figure->value) continue;
    const double v = *r.figure->value;
    if (!(v >= r.low && v <= r.high)) {  // NaN too
      std::ostringstream os;
      os << r.name << " is " << v << " " << r.unit << ", outside what any such system has ("
         << r.low << " to " << r.high << " " << r.unit << "); figures are in SI units (" << r.unit
         << ", not " << (r.unit == std::string("FLOP/s") ? "TFLOP/s" : "GB/s") << ")";
      return os.str();
    }
  }
  return "";
}

SystemSpec load_system_file(const std::string& path) {
  const std::string hint =
      "give a system description (reports/system.schema.json; `moebench systems --json` prints "
      "the built-in ones to start from)";
  std::string text;
  try {
    text = read_regular_file(path, hint, kMaxSmallInputBytes);
  } catch (const UsageError& e) {
    throw UsageError("--system " + std::string(e.what()));
  }
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) throw UsageError("--system " + path + ": not JSON; " + hint);
  const std::vector<std::string> errors = schema_errors(doc, load_schema(kSystemSchemaFile));
  if (!errors.empty()) {
    throw UsageError(
        "--system " + path + ": " + errors.front() +
        (errors.size() > 1 ? " (and " + std::to_string(errors.size() - 1) + " more)" : "") + "; " +
        hint);
  }
  SystemSpec s = system_from_json(doc);
  if (const std::string why = implausible_figure(s); !why.empty()) {
    throw UsageError("--system " + path + ": " + why);
  }
  for (const SystemSpec& b : builtin_systems()) {
    if (b.name == s.name) {
      throw UsageError("--system " + path + ": its name '" + s.name +
                       "' is a built-in system's; give it a name of its own");
    }
  }
  return s;
}

SystemSpec find_system(const std::string& name_or_file) {
  const bool file =
      name_or_file.find('/') != std::string::npos ||
      (name_or_file.size() > 5 && name_or_file.compare(name_or_file.size() - 5, 5, ".json") == 0);
  if (file) return load_system_file(name_or_file);
  std::vector<std::string> names;
  for (const SystemSpec& s : builtin_systems()) {
    if (s.name == name_or_file) return s;
    names.push_back(s.name);
  }
  throw UsageError("--system '" + name_or_file + "' is not a built-in system; valid: " +
                   join(names, ", ") + ", or a file (`moebench systems` lists them)");
}

std::string format_systems(const std::vector<SystemSpec>& systems) {
  // One format for the header and the rows, so their columns cannot drift apart.
  constexpr const char* kRow = "%-15s %-9s %-9s %7s %7s %7s %7s %8s %9s %4s %9s %5s %9s %10s\n";
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line, kRow, "system", "gpu", "gen", "BF16", "FP8", "MXFP8", "FP32",
                "mem(GB)", "mem(TB/s)", "nvl", "nvl(GB/s)", "nvls", "out(GB/s)", "host(GB/s)");
  out += line;
  for (const SystemSpec& s : systems) {
    std::snprintf(line, sizeof line, kRow, s.name.c_str(), s.gpu.c_str(), s.generation.c_str(),
                  cell(s.peak_bf16.value, 1e12, "%.0f").c_str(),
                  cell(s.peak_fp8.value, 1e12, "%.0f").c_str(),
                  cell(s.peak_mxfp8.value, 1e12, "%.0f").c_str(),
                  cell(s.peak_fp32.value, 1e12, "%.3g").c_str(),
                  cell(s.memory_bytes.value, 1e9, "%.0f").c_str(),
                  cell(s.memory_bandwidth.value, 1e12, "%.3g").c_str(),
                  cell(s.nvlink_domain_gpus.value, 1, "%.0f").c_str(),
                  cell(s.nvlink_bandwidth.value, 1e9, "%.0f").c_str(), s.nvls ? "yes" : "no",
                  cell(s.scale_out_bandwidth.value, 1e9, "%.3g").c_str(),
                  cell(s.host_link_bandwidth.value, 1e9, "%.4g").c_str());
    out += line;
  }
  out +=
      "# per GPU: peak dense TFLOP/s, memory, NVLink domain (GPUs) and bandwidth, the scale-out "
      "network's and host memory's (every GPU of a node copying), each way; `--json` gives every "
      "figure's source\n";
  return out;
}

}  // namespace moebench
