// PhaseTimer on the cpu backend (host-clock marks): scopes sum per phase, nested and adjacent
// scopes each count their own interval, reset() starts over, and an open scope is an error.
#include "harness/measure/phase_timer.hpp"

#include <doctest/doctest.h>

#include <thread>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

// A Compute whose marks are given times, so intervals are exact.
class FakeMarks : public Compute {
 public:
  std::vector<double> times;
  int next = 0;
  int mark() override { return next++; }
  std::vector<double> mark_times_s() override {
    return std::vector<double>(times.begin(), times.begin() + next);
  }
  void clear_marks() override { next = 0; }

  std::string name() const override { return "fake"; }
  DType activation_dtype() const override { return DType::f32; }
  std::string gemm_path() const override { return {}; }
  std::string grouped_gemm_path() const override { return {}; }
  std::string attention_path() const override { return {}; }
  Tensor alloc(std::int64_t, std::int64_t, DType) override { return {}; }
  void upload(const float*, Mat) override {}
  void upload_i32(const std::int32_t*, Mat) override {}
  void download(Mat, float*) override {}
  void download_i32(Mat, std::int32_t*) override {}
  void synchronize() override {}
  std::int64_t memory_available_bytes() const override { return 0; }
  void zero(Mat) override {}
  void copy(Mat, Mat) override {}
  void axpby(float, Mat, float, Mat) override {}
  void fill_random(Mat, std::uint64_t, std::uint64_t, float) override {}
  void fill(Mat, float) override {}
  void gemm(bool, bool, float, Mat, Mat, float, Mat) override {}
  void grouped_gemm(bool, bool, float, std::span<const GemmProblem>, float) override {}
  void rmsnorm_forward(Mat, Mat, float, Mat, Mat) override {}
  void rmsnorm_backward(Mat, Mat, Mat, Mat, Mat, Mat) override {}
  void rope_forward(Mat, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                    float) override {}
  void rope_backward(Mat, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                     float) override {}
  void swiglu_forward(Mat, Mat) override {}
  void swiglu_backward(Mat, Mat, Mat) override {}
  void attention_forward(const AttentionShape&, Mat, Mat, Mat, Mat, Mat) override {}
  void attention_backward(const AttentionShape&, Mat, Mat, Mat, Mat, Mat, Mat, Mat, Mat,
                          Mat) override {}
  void router_forward(const RouterParams&, Mat, Mat, std::int64_t, Mat, Mat, Mat) override {}
  void router_backward(const RouterParams&, Mat, Mat, Mat, Mat) override {}
  void gather_rows(Mat, Mat, Mat) override {}
  void scatter_add_rows(Mat, Mat, Mat, Mat) override {}
  void gather_rows_scaled(Mat, Mat, Mat, Mat) override {}
  void gathered_row_dot(Mat, Mat, Mat, Mat) override {}
  void adamw(const AdamWStep&, Mat, Mat, Mat, Mat, Mat) override {}
};

constexpr auto at(Phase p) {
  return static_cast<std::size_t>(p);
}

// Differences of exact binary fractions: exact in double.
TEST_CASE("PhaseTimer sums each phase's scopes from the marks; nested scopes count their own") {
  FakeMarks c;
  c.times = {0.0, 0.25, 0.5, 1.0, 1.5, 3.0, 3.5, 4.0};
  PhaseTimer t(c);
  {
    auto a = t.scope(Phase::dispatch);  // marks 0 .. 1: 0.25
  }
  {
    auto a = t.scope(Phase::shared_expert);  // marks 2 .. 5: 2.5
    {
      auto b = t.scope(Phase::experts);  // marks 3 .. 4: 0.5, nested
    }
  }
  {
    auto a = t.scope(Phase::dispatch);  // marks 6 .. 7: 0.5
  }
  const PerPhase<double> times = t.times();
  CHECK(times[at(Phase::dispatch)] == 0.75);
  CHECK(times[at(Phase::shared_expert)] == 2.5);
  CHECK(times[at(Phase::experts)] == 0.5);
  CHECK(times[at(Phase::attention)] == 0.0);

  t.reset();
  CHECK(c.next == 0);  // the backend's marks were cleared
  CHECK(t.times()[at(Phase::dispatch)] == 0.0);
  { auto a = t.scope(Phase::router); }
  CHECK(t.times()[at(Phase::router)] == 0.25);
}

TEST_CASE("PhaseTimer refuses to read a phase that is still open") {
  FakeMarks c;
  c.times = {0.0, 1.0, 2.0};
  PhaseTimer t(c);
  auto a = t.scope(Phase::router);
  CHECK_THROWS_AS(t.times(), RuntimeError);
}

TEST_CASE("PhaseTimer on the host clock of the default marks measures a sleep") {
  struct HostMarks : FakeMarks {
    int mark() override { return Compute::mark(); }
    std::vector<double> mark_times_s() override { return Compute::mark_times_s(); }
    void clear_marks() override { Compute::clear_marks(); }
  } c;
  PhaseTimer t(c);
  {
    auto a = t.scope(Phase::comm_wait);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // A 20 ms sleep lasts at least 20 ms; 2 s bounds a loaded machine's scheduling delay.
  const double s = t.times()[at(Phase::comm_wait)];
  CHECK(s >= 0.020);
  CHECK(s < 2.0);
}

}  // namespace
}  // namespace moebench
