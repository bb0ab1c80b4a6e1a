#include "harness/core/host.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "harness/core/error.hpp"

namespace moebench {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0') return buf;
  return "unknown";
}

std::vector<std::pair<std::string, std::string>> recorded_environment(const char* const* envp) {
  constexpr std::string_view kPrefixes[] = {"NCCL_", "UCX_", "CUDA_", "OMPI_", "PMIX_", "SLURM_"};
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    const std::string_view name = entry.substr(0, eq);
    const bool wanted = name == "OMP_NUM_THREADS" ||
                        std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                                    [&](std::string_view p) { return name.starts_with(p); });
    if (!wanted) continue;
    std::string value(entry.substr(eq + 1));
    if (value.size() > kMaxRecordedValue) {
      value.resize(kMaxRecordedValue);
      value += "...";
    }
    out.emplace_back(std::string(name), std::move(value));
  }
  std::sort(out.begin(), out.end());
  if (out.size() > kMaxRecordedVariables) out.resize(kMaxRecordedVariables);
  return out;
}

ResidentMemory resident_memory() {
  ResidentMemory r;
  std::ifstream in("/proc/self/status");
  std::string line;
  // "VmRSS:     12345 kB"
  const auto kib = [&](std::string_view key) {
    return line.compare(0, key.size(), key) == 0 ? std::stod(line.substr(key.size())) * 1024.0
                                                 : -1.0;
  };
  while (std::getline(in, line)) {
    if (const double v = kib("VmRSS:"); v >= 0) r.now_bytes = v;
    if (const double v = kib("VmHWM:"); v >= 0) r.peak_bytes = v;
  }
  return r;
}

std::vector<std::string> loaded_libraries(const std::vector<std::string>& prefixes) {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (const auto deleted = path.find(" (deleted)"); deleted != std::string::npos) {
      path.resize(deleted);
    }
    const std::string_view name = std::string_view(path).substr(path.rfind('/') + 1);
    const bool wanted = std::any_of(prefixes.begin(), prefixes.end(),
                                    [&](const std::string& p) { return name.starts_with(p); });
    if (wanted && name.find(".so") != std::string_view::npos) out.push_back(path);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::int64_t host_memory_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;  // reported in kB
  }
  throw RuntimeError("no MemAvailable in /proc/meminfo");
}

}  // namespace moebench
