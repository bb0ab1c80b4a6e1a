// The slow-compute decorator: the same results as the backend it wraps, everything forwarded, and
// every operation at least `factor` times as long (a sleep never ends early, so the slowed run's
// time is at least factor x the operations' own; compared within one run, with a wide margin).
#include "harness/backends/fault/slow_compute.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/core/error.hpp"

namespace moebench {
namespace {

// 20 GEMMs of 128^3 on `c`; returns the seconds they took and C's first value.
std::pair<double, float> gemms(Compute& c) {
  Tensor a = c.alloc(128, 128, DType::f32), b = c.alloc(128, 128, DType::f32),
         out = c.alloc(128, 128, DType::f32);
  c.fill_random(a.view(), 1, 0, 1.0f);
  c.fill_random(b.view(), 1, 1, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) c.gemm(false, false, 1.0f, a.view(), b.view(), 0.0f, out.view());
  c.mark();  // pays what is still owed
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  float first = 0;
  c.download(out.view().row_slice(0, 1).col_slice(0, 1), &first);
  return {took.count(), first};
}

TEST_CASE("slow compute: same results, forwarded queries, and at least factor x the time") {
  CpuCompute plain(1);
  std::unique_ptr<Compute> slow = make_slow_compute(std::make_unique<CpuCompute>(1), 4.0);
  CHECK(slow->kind() == plain.kind());
  CHECK(slow->gemm_path() == plain.gemm_path());
  CHECK(slow->memory_is_host());
  gemms(plain);  // warm
  const auto [plain_s, plain_value] = gemms(plain);
  const auto [slow_s, slow_value] = gemms(*slow);
  CHECK(slow_value == plain_value);  // the same arithmetic, exactly
  // 4x expected; 2x leaves room for a plain run slowed by this shared machine.
  CHECK(slow_s > 2.0 * plain_s);
}

TEST_CASE("slow compute: the factor must exceed 1") {
  CHECK_THROWS_AS(make_slow_compute(std::make_unique<CpuCompute>(1), 1.0), RuntimeError);
}

}  // namespace
}  // namespace moebench
