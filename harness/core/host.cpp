#include "harness/core/host.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <string_view>

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

}  // namespace moebench
