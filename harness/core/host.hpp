// The host this process runs on, for messages and reports: its name, and the environment that
// shapes a run.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace moebench {

// gethostname(), or "unknown" when it fails.
std::string host_name();

// The variables of `envp` (NAME=value strings, null-terminated, as `environ`) that shape or
// identify a run: NCCL_*, UCX_*, CUDA_*, OMPI_*, PMIX_*, SLURM_*, and OMP_NUM_THREADS, sorted by
// name. A value longer than kMaxRecordedValue is cut there and ends in "..."; at most
// kMaxRecordedVariables are kept (the first by name).
inline constexpr std::size_t kMaxRecordedValue = 1024;
inline constexpr std::size_t kMaxRecordedVariables = 512;
std::vector<std::pair<std::string, std::string>> recorded_environment(const char* const* envp);

// This process's resident memory now and its high-water mark, in bytes (Linux's VmRSS and VmHWM
// in /proc/self/status); 0 where the system does not say.
struct ResidentMemory {
  double now_bytes = 0;
  double peak_bytes = 0;
};
ResidentMemory resident_memory();

// The shared libraries this process has loaded whose file names start with one of `prefixes`
// ("libcudnn"), as full paths, sorted, each once (Linux's /proc/self/maps); empty elsewhere. What
// a library loaded by name at run time (cuDNN's engines, NVRTC's builtins) resolved to.
std::vector<std::string> loaded_libraries(const std::vector<std::string>& prefixes);

// The host's MemAvailable (/proc/meminfo), in bytes; RuntimeError where the system does not say.
std::int64_t host_memory_available_bytes();

}  // namespace moebench
