#include <doctest/doctest.h>

#include <string>

#include "harness/compute/compute.hpp"
#include "harness/compute/cpu_compute.hpp"

namespace moebench {
namespace {

TEST_CASE("make_compute builds cpu and rejects the rest with the available list") {
  CHECK(compute_backends() == std::vector<std::string>{"cpu"});
  const auto cpu = make_compute("cpu", 0, 1);
  CHECK(cpu->name() == "cpu");
  CHECK(cpu->activation_dtype() == DType::f32);
  CHECK_THROWS_WITH_AS(make_compute("cuda", 0, 1), doctest::Contains("not built into this binary"),
                       UsageError);
  CHECK_THROWS_WITH_AS(make_compute("tpu", 0, 1), doctest::Contains("available: cpu"), UsageError);
  CHECK(!blas_library_name().empty());
}

}  // namespace
}  // namespace moebench
