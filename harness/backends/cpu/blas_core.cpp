#include "harness/backends/cpu/blas_core.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>

#if defined(MOEBENCH_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace moebench {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The kernels OpenBLAS runs now, "" without OpenBLAS.
std::string current_core() {
#if defined(MOEBENCH_HAVE_OPENBLAS)
  const char* name = openblas_get_corename();
  return name ? name : "";
#else
  return "";
#endif
}

std::string extensions(CpuSimd simd) {
  return simd.avx512 ? "AVX-512" : "AVX2";
}

}  // namespace

bool is_generic_blas_core(std::string_view core) {
  const std::string l = lower(core);
  return l == "prescott" || l == "core2" || l == "katmai" || l == "coppermine" ||
         l == "northwood" || l == "banias" || l == "generic" || l == "unknown";
}

std::string fast_blas_core_for(CpuSimd simd) {
  if (simd.avx512) return "SkylakeX";
  if (simd.avx2) return "Haswell";
  return "";
}

CpuSimd host_simd() {
  CpuSimd s;
#if defined(__x86_64__)
  __builtin_cpu_init();
  s.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  s.avx512 = s.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
  return s;
}

std::string blas_core_to_force(std::string_view current, std::string_view user_coretype,
                               std::string_view fallback_marker, CpuSimd simd) {
  if (!user_coretype.empty() || !fallback_marker.empty()) return "";  // the user's, or done once
  if (!is_generic_blas_core(current)) return "";
  return fast_blas_core_for(simd);
}

void use_fast_blas_kernels(char** argv) {
#if defined(MOEBENCH_HAVE_OPENBLAS) && defined(__x86_64__)
  const std::string current = current_core();
  const std::string core = blas_core_to_force(current, env("OPENBLAS_CORETYPE"),
                                              env(kBlasFallbackVariable), host_simd());
  if (core.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0 ||
      setenv(kBlasFallbackVariable, current.c_str(), 1) != 0) {
    return;
  }
  execv("/proc/self/exe", argv);
  // The exec failed (no /proc): go on with the generic kernels; the warning says so.
  unsetenv("OPENBLAS_CORETYPE");
#else
  (void)argv;
#endif
}

BlasCore describe_blas_core(std::string_view core, std::string_view user_coretype,
                            std::string_view fallback_marker) {
  BlasCore b;
  b.name = std::string(core);
  if (core.empty()) {
    b.chosen_by = "none";
    b.reason = "the CBLAS is not OpenBLAS: its kernels are its own";
  } else if (!fallback_marker.empty() && !user_coretype.empty()) {
    b.chosen_by = "moebench";
    b.reason = "OpenBLAS chose its generic " + std::string(fallback_marker) +
               " kernels on this CPU, which it does not recognise; moebench set "
               "OPENBLAS_CORETYPE=" +
               std::string(user_coretype) + " for the CPU's vector extensions";
  } else if (!user_coretype.empty()) {
    b.chosen_by = "environment";
    b.reason = "OPENBLAS_CORETYPE=" + std::string(user_coretype) + " was set";
  } else {
    b.chosen_by = "openblas";
    b.reason = "OpenBLAS's own choice for this CPU";
  }
  return b;
}

BlasCore blas_core() {
  return describe_blas_core(current_core(), env("OPENBLAS_CORETYPE"), env(kBlasFallbackVariable));
}

std::string blas_fallback_warning() {
  const std::string core = current_core();
  const CpuSimd simd = host_simd();
  const std::string fast = fast_blas_core_for(simd);
  if (!is_generic_blas_core(core) || fast.empty()) return "";
  const std::string asked = env("OPENBLAS_CORETYPE");
  const std::string slower = ": its GEMMs run several times slower than they could; ";
  if (!env(kBlasFallbackVariable).empty()) {
    return "OpenBLAS runs its " + core + " kernels on a CPU with " + extensions(simd) +
           " although moebench set OPENBLAS_CORETYPE=" + asked +
           " (this OpenBLAS may lack those kernels)" + slower + "use a newer OpenBLAS";
  }
  if (!asked.empty()) {
    return "OpenBLAS runs its " + core + " kernels, as OPENBLAS_CORETYPE=" + asked +
           " asks, on a CPU with " + extensions(simd) + slower +
           "unset OPENBLAS_CORETYPE (moebench then sets " + fast + ") or set it to " + fast;
  }
  return "OpenBLAS runs its " + core +
         " kernels, a generic fallback for a CPU it does not recognise, on a CPU with " +
         extensions(simd) + slower + "set OPENBLAS_CORETYPE=" + fast +
         " (moebench could not re-execute itself to do so) or use a newer OpenBLAS";
}

}  // namespace moebench
