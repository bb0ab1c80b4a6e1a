// The slow-compute decorator: the same results as the backend it wraps, everything forwarded, and
// every operation at least `factor` times as long. The wrapped backend's GEMM first spends a
// known CPU time; the decorator owes (factor - 1) x the CPU time the operation spent and spends it
// too, and CPU time never runs ahead of the wall clock, so each slowed GEMM takes at least
// factor x that in wall time: a lower bound that no load on a shared machine can break (an upper
// bound would be a timing test).
#include "harness/backends/fault/slow_compute.hpp"

#include <doctest/doctest.h>

#include <time.h>

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

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The cpu backend with a GEMM that spends at least kGemmCpu of this thread's CPU time.
constexpr double kGemmCpu = 2e-3;
class BusyGemm final : public CpuCompute {
 public:
  BusyGemm() : CpuCompute(1) {}

 protected:
  void do_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
               const Mat& c) override {
    const double start = thread_cpu_s();
    while (thread_cpu_s() - start < kGemmCpu) {
    }
    CpuCompute::do_gemm(trans_a, trans_b, alpha, a, b, beta, c);
  }
};

TEST_CASE("slow compute: same results, forwarded queries, and at least factor x the time") {
  CpuCompute plain(1);
  std::unique_ptr<Compute> slow = make_slow_compute(std::make_unique<BusyGemm>(), 4.0);
  CHECK(slow->kind() == plain.kind());
  CHECK(slow->gemm_path() == plain.gemm_path());
  CHECK(slow->memory_is_host());
  const auto [plain_s, plain_value] = gemms(plain);
  const auto [slow_s, slow_value] = gemms(*slow);
  CHECK(slow_value == plain_value);  // the same arithmetic, exactly
  // 20 GEMMs of at least 2 ms of CPU each, each followed by 3x its own CPU time spent spinning:
  // >= 160 ms of CPU, so of wall time. Without the debt the run would take about 40 ms.
  const double floor_s = 20 * 4.0 * kGemmCpu;
  CHECK(slow_s >= floor_s);
}

TEST_CASE("slow compute: work=grouped_gemm slows the grouped GEMMs, not the others") {
  // The plain GEMMs run at the wrapped backend's pace: no debt, however long they take, so the
  // slowed decorator's CPU time over them is the busy GEMMs' own (a lower bound as above, and an
  // upper one that holds under any load: debt would add 3x).
  std::unique_ptr<Compute> slow =
      make_slow_compute(std::make_unique<BusyGemm>(), 4.0, SlowWork::grouped_gemm);
  const double cpu0 = thread_cpu_s();
  gemms(*slow);
  const double cpu_s = thread_cpu_s() - cpu0;
  CHECK(cpu_s >= 20 * kGemmCpu);
  CHECK(cpu_s < 20 * 4.0 * kGemmCpu);
}

TEST_CASE("slow compute: the factor must exceed 1") {
  CHECK_THROWS_AS(make_slow_compute(std::make_unique<CpuCompute>(1), 1.0), RuntimeError);
}

}  // namespace
}  // namespace moebench
