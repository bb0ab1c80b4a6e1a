// The fault decorator on the one-rank local communicator (every group is this rank, so an
// all-to-all copies send to recv): which call it damages, in which step, on which rank, once;
// and the --inject grammar.
#include "harness/backends/fault/fault_communicator.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/local/local_communicator.hpp"
#include "harness/core/error.hpp"

namespace moebench {
namespace {

struct Rig {
  explicit Rig(const FaultSpec& spec)
      : comm(make_fault_communicator(make_local_communicator(cpu), cpu, spec)) {}
  CpuCompute cpu{1};
  std::unique_ptr<Communicator> comm;
  std::vector<float> send = {1, 2, 3, 4};
  std::vector<float> recv = std::vector<float>(4, 0.0f);
  const std::vector<std::int64_t> rows = {2}, zero = {0};
  Mat s() { return Mat{send.data(), 2, 2, 2, DType::f32}; }
  Mat r() { return Mat{recv.data(), 2, 2, 2, DType::f32}; }

  // An MoE layer's forward as the step issues it: counts, dispatch, combine; all blocking or
  // all started. Returns what the dispatch and the combine delivered (their first elements).
  std::pair<float, float> layer(bool started) {
    comm->alltoall_counts(Group::expert, rows);
    float first[2];
    for (int i = 0; i < 2; ++i) {
      recv.assign(4, 0.0f);
      if (started) {
        comm->wait(comm->start_alltoallv(Group::expert, s(), rows, zero, r(), rows, zero,
                                         CommLane::critical));
      } else {
        comm->alltoallv(Group::expert, s(), rows, zero, r(), rows, zero);
      }
      first[i] = recv[0];
    }
    return {first[0], first[1]};
  }
};

TEST_CASE("fault: the dispatch of the chosen step is damaged once, blocking or started") {
  for (bool started : {false, true}) {
    CAPTURE(started);
    FaultSpec spec;
    spec.step = 1;
    Rig rig(spec);
    rig.comm->clear_requests();  // step 0
    CHECK(rig.layer(started) == std::pair<float, float>{1.0f, 1.0f});
    rig.comm->clear_requests();  // step 1
    CHECK(rig.layer(started) == std::pair<float, float>{1000.0f, 1.0f});
    CHECK(rig.layer(started) == std::pair<float, float>{1.0f, 1.0f});  // once only
    CHECK(rig.recv[1] == 2.0f);                                        // one element
    rig.comm->clear_requests();                                        // step 2
    CHECK(rig.layer(started) == std::pair<float, float>{1.0f, 1.0f});
  }
}

TEST_CASE("fault: combine and grad_reduce points; another rank's fault does nothing here") {
  FaultSpec spec;
  spec.point = FaultSpec::Point::combine;
  Rig combine(spec);
  combine.comm->clear_requests();
  CHECK(combine.layer(false) == std::pair<float, float>{1.0f, 1000.0f});

  spec.point = FaultSpec::Point::grad_reduce;
  Rig grads(spec);
  grads.comm->clear_requests();
  std::vector<float> g = {5, 6};
  const Mat gm{g.data(), 2, 1, 1, DType::f32};
  grads.comm->allreduce_sum(Group::world, gm);  // not a gradient group
  CHECK(g[0] == 5.0f);
  grads.comm->wait(grads.comm->start_allreduce_sum(Group::data, gm, CommLane::background));
  CHECK(g[0] == 1000.0f);
  CHECK(g[1] == 6.0f);

  spec = FaultSpec{};
  spec.rank = 3;  // this process is rank 0
  Rig elsewhere(spec);
  elsewhere.comm->clear_requests();
  CHECK(elsewhere.layer(false) == std::pair<float, float>{1.0f, 1.0f});
  CHECK(elsewhere.comm->name() == "local");
}

TEST_CASE("fault: --inject grammar, with one line naming what is valid") {
  const FaultSpec f = parse_fault_spec("corrupt:rank=3,phase=grad_reduce,step=7");
  CHECK(f.rank == 3);
  CHECK(f.point == FaultSpec::Point::grad_reduce);
  CHECK(f.step == 7);
  CHECK(to_string(f) == "corrupt:rank=3,phase=grad_reduce,step=7");
  const FaultSpec d = parse_fault_spec("corrupt:rank=1");
  CHECK(to_string(d) == "corrupt:rank=1,phase=dispatch,step=0");
  for (const char* bad :
       {"hang", "corrupt:", "corrupt:rank=-1", "corrupt:rank=x", "delay:rank=1",
        "delay:rank=1,seconds=0", "delay:rank=1,seconds=inf", "hang:rank=1,seconds=2",
        "corrupt:rank=1,phase=step", "stall:rank=1", "corrupt:rank=1,phase=attention",
        "corrupt:rank=1,color=red", "corrupt:rank=1,step="}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_fault_spec(bad), doctest::Contains("valid: corrupt:rank=R"),
                         UsageError);
  }
}

TEST_CASE("fault: delay, hang and die parse, at the step's start unless a phase is given") {
  const FaultSpec d = parse_fault_spec("delay:rank=2,seconds=1.5,step=3");
  CHECK(d.kind == FaultSpec::Kind::delay);
  CHECK(d.seconds == 1.5);
  CHECK(d.point == FaultSpec::Point::step);
  CHECK(to_string(d) == "delay:rank=2,seconds=1.5,phase=step,step=3");
  const FaultSpec h = parse_fault_spec("hang:rank=0,phase=pp");
  CHECK(h.kind == FaultSpec::Kind::hang);
  CHECK(h.point == FaultSpec::Point::pp);
  CHECK(to_string(parse_fault_spec("die:rank=4")) == "die:rank=4,phase=step,step=0");
}

TEST_CASE("fault: slow and slowlink parse, with a factor above 1 and at most 1000") {
  const FaultSpec s = parse_fault_spec("slow:rank=3,factor=4");
  CHECK(s.kind == FaultSpec::Kind::slow);
  CHECK(s.rank == 3);
  CHECK(s.factor == 4.0);
  CHECK(to_string(s) == "slow:rank=3,factor=4");
  CHECK_FALSE(s.every_rank);
  CHECK(s.work == SlowWork::all);
  const FaultSpec w = parse_fault_spec("slow:rank=all,factor=6,work=grouped_gemm");
  CHECK(w.every_rank);
  CHECK(w.work == SlowWork::grouped_gemm);
  CHECK(to_string(w) == "slow:rank=all,factor=6,work=grouped_gemm");
  CHECK(parse_fault_spec(to_string(w)).work == SlowWork::grouped_gemm);
  const FaultSpec l = parse_fault_spec("slowlink:a=1,b=6,factor=2.5");
  CHECK(l.kind == FaultSpec::Kind::slowlink);
  CHECK(l.rank == 1);
  CHECK(l.peer == 6);
  CHECK(l.factor == 2.5);
  CHECK(to_string(l) == "slowlink:a=1,b=6,factor=2.5");
  const FaultSpec port = parse_fault_spec("slowlink:a=2,b=all,factor=20");
  CHECK(port.peer == FaultSpec::kEveryPeer);
  CHECK(to_string(port) == "slowlink:a=2,b=all,factor=20");
  const FaultSpec v = parse_fault_spec("version:rank=3");
  CHECK(v.kind == FaultSpec::Kind::version);
  CHECK(v.rank == 3);
  CHECK(to_string(v) == "version:rank=3");
  for (const char* bad : {"slow:rank=1",
                          "slow:rank=1,factor=1",
                          "slow:rank=1,factor=0.5",
                          "slow:rank=1,factor=1e4",
                          "slow:rank=1,factor=nan",
                          "slow:factor=2",
                          "slow:rank=1,factor=2,step=1",
                          "slow:rank=1,factor=2,phase=dispatch",
                          "slowlink:a=1,factor=2",
                          "slowlink:b=1,factor=2",
                          "slowlink:a=1,b=1,factor=2",
                          "slowlink:rank=1,b=2,factor=2",
                          "delay:rank=1,seconds=1,factor=2",
                          "slow:rank=1,factor=2,work=optimizer",
                          "corrupt:rank=all",
                          "slowlink:a=all,b=1,factor=2",
                          "delay:rank=1,seconds=1,work=gemm",
                          "version:rank=1,factor=2",
                          "version:rank=1,step=1",
                          "version:b=1"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_fault_spec(bad),
                         doctest::Contains("slowlink:a=R1,b=R2|all,factor=F"), UsageError);
  }
}

TEST_CASE("fault: a delay sleeps once, before its point in its step, on its rank only") {
  // Step 1's dispatch on rank 0 (the local communicator's only rank).
  Rig rig(parse_fault_spec("delay:rank=0,seconds=0.3,step=1,phase=dispatch"));
  const auto timed_layer = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    rig.layer(false);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  rig.comm->clear_requests();  // step 0
  CHECK(timed_layer() < 0.3);
  rig.comm->clear_requests();  // step 1
  CHECK(timed_layer() >= 0.3);
  CHECK(timed_layer() < 0.3);  // once
  Rig other(parse_fault_spec("delay:rank=1,seconds=0.3,step=0"));
  const auto t0 = std::chrono::steady_clock::now();
  other.comm->clear_requests();
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.3);
}

TEST_CASE("fault: a slow link's end waits (F - 1) times the fastest transfer, sends before") {
  SlowLinkClock clock(3.0);
  // A receive waits after it ends: twice its own time the first time, then twice the fastest of
  // that size (a slower receive does not raise the wait; a faster one lowers it).
  CHECK(clock.before(false, 8) == 0.0);
  CHECK(clock.after(false, 8, 0.010) == doctest::Approx(0.020));
  CHECK(clock.after(false, 8, 0.050) == doctest::Approx(0.020));
  CHECK(clock.after(false, 8, 0.005) == doctest::Approx(0.010));
  // Sizes are kept apart.
  CHECK(clock.after(false, 4096, 0.100) == doctest::Approx(0.200));
  CHECK(clock.after(false, 8, 0.007) == doctest::Approx(0.010));
  // A send waits before it starts, once a send of its size has been timed; never after.
  CHECK(clock.before(true, 8) == 0.0);
  CHECK(clock.after(true, 8, 0.001) == 0.0);
  CHECK(clock.before(true, 8) == doctest::Approx(0.002));
  CHECK(clock.before(true, 4096) == 0.0);
}

}  // namespace
}  // namespace moebench
