// The BLAS kernel choice: when moebench re-executes itself with OPENBLAS_CORETYPE, and what the
// report says about the kernels that ran. The re-execution itself is tested end to end
// (tests/e2e/test_bench.py), where the process really starts twice.
#include "harness/backends/cpu/blas_core.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

constexpr CpuSimd kAvx512{true, true};
constexpr CpuSimd kAvx2{true, false};
constexpr CpuSimd kSse{false, false};

TEST_CASE("blas core: the generic kernels are told apart from the fast ones") {
  for (const char* c : {"Prescott", "prescott", "Core2", "Katmai", "Northwood", "Generic"}) {
    CHECK(is_generic_blas_core(c));
  }
  for (const char* c : {"SkylakeX", "Haswell", "Cooperlake", "Zen", "SapphireRapids", ""}) {
    CHECK_FALSE(is_generic_blas_core(c));
  }
  CHECK(fast_blas_core_for(kAvx512) == "SkylakeX");
  CHECK(fast_blas_core_for(kAvx2) == "Haswell");
  CHECK(fast_blas_core_for(kSse).empty());
}

TEST_CASE("blas core: re-executes only for generic kernels the user did not ask for") {
  // OpenBLAS fell back on a CPU it does not know: the CPU's own kernels.
  CHECK(blas_core_to_force("Prescott", "", "", kAvx512) == "SkylakeX");
  CHECK(blas_core_to_force("Core2", "", "", kAvx2) == "Haswell");
  // Nothing faster to run.
  CHECK(blas_core_to_force("Prescott", "", "", kSse).empty());
  // OpenBLAS knew the CPU.
  CHECK(blas_core_to_force("SkylakeX", "", "", kAvx512).empty());
  CHECK(blas_core_to_force("Haswell", "", "", kAvx512).empty());
  // The user's choice stands, even a slow one.
  CHECK(blas_core_to_force("Prescott", "Prescott", "", kAvx512).empty());
  // Once only: after a re-execution the marker is set, whatever OpenBLAS then chose.
  CHECK(blas_core_to_force("Prescott", "SkylakeX", "Prescott", kAvx512).empty());
  CHECK(blas_core_to_force("Prescott", "", "Prescott", kAvx512).empty());
}

TEST_CASE("blas core: the report says who chose the kernels and why") {
  const BlasCore own = describe_blas_core("Haswell", "", "");
  CHECK(own.name == "Haswell");
  CHECK(own.chosen_by == "openblas");
  const BlasCore user = describe_blas_core("Prescott", "Prescott", "");
  CHECK(user.chosen_by == "environment");
  CHECK(user.reason == "OPENBLAS_CORETYPE=Prescott was set");
  const BlasCore ours = describe_blas_core("SkylakeX", "SkylakeX", "Prescott");
  CHECK(ours.name == "SkylakeX");
  CHECK(ours.chosen_by == "moebench");
  CHECK(ours.reason.find("generic Prescott kernels") != std::string::npos);
  CHECK(ours.reason.find("OPENBLAS_CORETYPE=SkylakeX") != std::string::npos);
  CHECK(describe_blas_core("", "", "").chosen_by == "none");
}

}  // namespace
}  // namespace moebench
