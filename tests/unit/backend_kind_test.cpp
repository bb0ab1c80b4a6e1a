#include "harness/compute/backend_kind.hpp"

#include <doctest/doctest.h>

#include <string>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

TEST_CASE("backend and precision names round trip; unknown names list the valid ones") {
  for (ComputeBackend b : {ComputeBackend::cpu, ComputeBackend::cuda}) {
    CHECK(parse_compute_backend(to_string(b)) == b);
  }
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp8}) {
    CHECK(parse_precision(to_string(p)) == p);
  }
  CHECK_THROWS_WITH_AS(parse_compute_backend("tpu"),
                       "--backend tpu: unknown compute backend 'tpu'; valid: cpu, cuda",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_precision("int4"), doctest::Contains("expected fp32"), UsageError);
}

TEST_CASE("precision is the backend's own unless fp8 is asked for, resolved once") {
  CHECK(native_precision(ComputeBackend::cpu) == Precision::fp32);
  CHECK(native_precision(ComputeBackend::cuda) == Precision::bf16);
  CHECK(resolve_precision(ComputeBackend::cpu, std::nullopt) == Precision::fp32);
  CHECK(resolve_precision(ComputeBackend::cpu, Precision::fp32) == Precision::fp32);
  CHECK(resolve_precision(ComputeBackend::cuda, std::nullopt) == Precision::bf16);
  CHECK(resolve_precision(ComputeBackend::cuda, Precision::bf16) == Precision::bf16);
  CHECK(resolve_precision(ComputeBackend::cuda, Precision::fp8) == Precision::fp8);
  CHECK(resolve_precision(ComputeBackend::cpu, Precision::fp8) == Precision::fp8);
  CHECK_THROWS_WITH_AS(resolve_precision(ComputeBackend::cpu, Precision::bf16),
                       "--precision bf16 is not available with --backend cpu; valid: fp32 or fp8",
                       UsageError);
  CHECK_THROWS_AS(resolve_precision(ComputeBackend::cuda, Precision::fp32), UsageError);
}

}  // namespace
}  // namespace moebench
