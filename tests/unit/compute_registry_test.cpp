#include <doctest/doctest.h>

#include <string>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/compute/compute.hpp"

namespace moebench {
namespace {

TEST_CASE("make_compute builds cpu, and cuda where it is built and a GPU is visible") {
  const auto cpu = make_compute(ComputeBackend::cpu, 0, 1);
  CHECK(cpu->name() == "cpu");
  CHECK(cpu->activation_dtype() == DType::f32);
  const std::vector<ComputeBackend> built = compute_backends();
  REQUIRE((built == std::vector<ComputeBackend>{ComputeBackend::cpu} ||
           built == std::vector<ComputeBackend>{ComputeBackend::cpu, ComputeBackend::cuda}));
  if (built.size() == 2) {
    // Built with CUDA: "cuda" is made where a GPU is visible, a usage error saying so elsewhere.
    try {
      const auto cuda = make_compute(ComputeBackend::cuda, 0, 1);
      CHECK(cuda->name() == "cuda");
      CHECK(cuda->activation_dtype() == DType::bf16);
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find("no CUDA device is visible") != std::string::npos);
    }
  } else {
    CHECK_THROWS_WITH_AS(make_compute(ComputeBackend::cuda, 0, 1),
                         doctest::Contains("not built into this binary"), UsageError);
  }
  CHECK(!blas_library_name().empty());
}

}  // namespace
}  // namespace moebench
