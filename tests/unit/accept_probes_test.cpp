// accept's probes on the cpu backend: the GEMM probe gives the same checksum in every repeat and
// in a second probe (the same seed everywhere), a rate above zero, and another checksum where one
// output value is corrupted (the sdc fault); the attention probe runs core attention forward and
// backward, and the expert GEMM probe the six grouped calls, at the tiny model's shapes: each a
// finite rate above zero.
#include "harness/cli/accept_probes.hpp"

#include <cmath>
#include <memory>

#include <doctest/doctest.h>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/fault/slow_compute.hpp"

namespace moebench {
namespace {

TEST_CASE("accept probes: the GEMM's checksums repeat, and a corrupted value changes them") {
  CpuCompute c(1);
  const GemmProbe p = probe_gemm(c, 64, 3);
  REQUIRE(p.sums.size() == 3);
  CHECK(p.sums[0] == p.sums[1]);
  CHECK(p.sums[1] == p.sums[2]);
  CHECK(p.flops_per_s > 0);
  CHECK(probe_gemm(c, 64, 1).sums.front() == p.sums.front());
  std::unique_ptr<Compute> bad = make_sdc_compute(std::make_unique<CpuCompute>(1), 1);
  CHECK(probe_gemm(*bad, 64, 1).sums.front() != p.sums.front());
}

TEST_CASE("accept probes: core attention and the experts' GEMMs at the tiny model's shapes") {
  CpuCompute c(1);
  const double rate = probe_attention(c, preset("deepseek-v3-tiny"), 64, 2);
  CHECK(std::isfinite(rate));
  CHECK(rate > 0);
  const double experts = probe_expert_gemms(c, preset("deepseek-v3-tiny"), 2, 16, 2);
  CHECK(std::isfinite(experts));
  CHECK(experts > 0);
}

}  // namespace
}  // namespace moebench
