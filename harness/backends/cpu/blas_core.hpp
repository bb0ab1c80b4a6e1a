// Which kernels OpenBLAS runs, and making it run fast ones without the user's help.
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's and Ubuntu's) picks its kernels once, when the
// library loads, from the CPU's model number. On a CPU it does not know (0.3.21 on Sapphire and
// Emerald Rapids, which report "Intel(R) Xeon(R) Processor" under KVM) it falls back to its
// generic Prescott kernels: SSE3, several times slower than the CPU's AVX2 or AVX-512 ones.
// OPENBLAS_CORETYPE overrides the choice, but only before the library loads, so moebench sets it
// and re-executes itself before anything else runs (before MPI starts: a launcher sees the same
// process, as exec keeps the pid). A core type the user set is the user's choice and is kept.
#pragma once

#include <string>
#include <string_view>

namespace moebench {

// The vector extensions the kernel choice depends on.
struct CpuSimd {
  bool avx2 = false;    // with FMA: what OpenBLAS's Haswell kernels need
  bool avx512 = false;  // F, CD, BW, DQ and VL: what its SkylakeX kernels need
};

// How the BLAS came to run the kernels it runs, for the run and bench reports.
struct BlasCore {
  std::string name;       // OpenBLAS's core name ("SkylakeX"); "" without OpenBLAS
  std::string chosen_by;  // "openblas", "environment" (OPENBLAS_CORETYPE) or "moebench"
  std::string reason;     // one sentence
};

// True for the generic x86 kernels OpenBLAS falls back to (Prescott, Core2, ...).
bool is_generic_blas_core(std::string_view core);
// The core type that runs this CPU's extensions ("SkylakeX", "Haswell"), "" when it has neither.
std::string fast_blas_core_for(CpuSimd simd);
CpuSimd host_simd();

// The name of the environment variable moebench sets beside OPENBLAS_CORETYPE when it re-executes,
// holding the core OpenBLAS chose by itself; its presence also stops a second re-execution.
inline constexpr const char* kBlasFallbackVariable = "MOEBENCH_OPENBLAS_FALLBACK";

// What moebench should do at start-up, as a pure function (tested): the core type to set and
// re-execute with, or "" to go on. `user_coretype` is OPENBLAS_CORETYPE ("" when unset),
// `fallback_marker` kBlasFallbackVariable ("" when unset).
std::string blas_core_to_force(std::string_view current_core, std::string_view user_coretype,
                               std::string_view fallback_marker, CpuSimd simd);

// Called first in main: when OpenBLAS runs generic kernels that the user did not ask for on a CPU
// with AVX2 or AVX-512, sets OPENBLAS_CORETYPE and re-executes /proc/self/exe with the same
// arguments. Returns when there is nothing to do or the exec failed (the warning then says why
// the GEMMs are slow).
void use_fast_blas_kernels(char** argv);

// The kernels running now and why (reads OPENBLAS_CORETYPE and kBlasFallbackVariable).
BlasCore blas_core();
// The same from given facts, as a pure function (tested).
BlasCore describe_blas_core(std::string_view core, std::string_view user_coretype,
                            std::string_view fallback_marker);

// Why the BLAS will be slow here ("" when there is no reason to think so): generic kernels on a
// CPU with AVX2 or AVX-512, because the user asked for them or the re-execution failed.
std::string blas_fallback_warning();

}  // namespace moebench
