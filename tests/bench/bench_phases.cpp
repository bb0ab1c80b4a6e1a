// How close the measured phases come to the bare libraries they call, in one process so that a
// ratio cancels what a shared, noisy machine does to both sides:
//  (a) experts: the cpu backend's experts phase (grouped GEMMs and SwiGLU, forward and backward)
//      against the same GEMMs issued straight to cblas_sgemm, plus the same SwiGLU as plain loops;
//  (b) dispatch: the dispatch phase's algbw against bare MPI_Alltoallv of the same rows, plus the
//      MPI_Alltoall of the counts that the phase also holds.
// Every repetition runs one real TrainingStep and one replay of each, alternating which goes
// first to cancel drift. Both sides use the run report's convention: the slowest rank's time,
// the median over repetitions. See tests/bench/README.md.
#include <cblas.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/mpi/mpi_check.hpp"
#include "harness/backends/mpi/mpi_communicator.hpp"
#include "harness/cli/options.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/core/error.hpp"
#include "harness/math/elementwise.hpp"
#include "harness/math/route.hpp"
#include "harness/measure/stats.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "tests/bench/bench_replays.hpp"
#include "workloads/layers/moe.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench {
namespace {

using namespace bench_replay;

constexpr double kPassRatio = 0.9;  // the acceptance criterion for both quantities

struct PhaseBenchOptions {
  std::string preset = "deepseek-v3-tiny";
  std::int64_t hidden = 512;   // 0: the preset's
  std::int64_t moe_ffn = 256;  // 0: the preset's
  std::int64_t seq_len = 1024;
  std::int64_t micro_batch = 1;
  std::int64_t layers = 2;  // all MoE: the dense layers add nothing measured here
  int ep = 0;               // 0: the world size
  int warmup = 2;
  int reps = 10;
  std::string routing = "balanced";
  std::string attention = "off";
  int blas_threads = 1;
};

// The run configuration through the CLI's own resolution, then the size overrides.
RunConfig make_config(const PhaseBenchOptions& b, int world) {
  CliOptions o;
  o.command = Command::run;
  WorkloadFlags& w = o.workload;
  w.preset = b.preset;
  w.seq_len = b.seq_len;
  w.micro_batch = b.micro_batch;
  w.layers = b.layers;
  w.dense_layers = 0;
  w.attention = b.attention;
  w.routing = b.routing;
  w.ep = b.ep > 0 ? b.ep : world;
  w.blas_threads = b.blas_threads;
  o.warmup = b.warmup;
  o.steps = b.reps;
  RunConfig c = resolve_run_config(o, world);
  if (b.hidden > 0) c.model.hidden_size = b.hidden;
  if (b.moe_ffn > 0) c.model.moe_intermediate_size = b.moe_ffn;
  c.model.name += " (hidden " + std::to_string(c.model.hidden_size) + ", moe_ffn " +
                  std::to_string(c.model.moe_intermediate_size) + ")";
  validate(c);
  if (c.workload.routing.mode == RoutingMode::router) {
    throw UsageError(
        "--routing router: the replay recomputes the routing, which the router mode takes from "
        "the weights; use balanced or zipf:S");
  }
  return c;
}

// The dispatch rows exactly as the MoE block derives them. Balanced and zipf routing depend only
// on (seed, global token), never on the scores, so the plan is the same in every MoE layer.
DispatchTimes run_interleaved(ExpertsReplay& experts, DispatchReplay& dispatch) {
  DispatchTimes t;
  ExpertsTimes unused;
  for (std::size_t l = 0; l < experts.layers(); ++l) {
    dispatch.forward(l, false, t);
    experts.forward(l, unused);
    dispatch.exchange(l, false);  // the combine
  }
  for (std::size_t l = experts.layers(); l-- > 0;) {
    dispatch.exchange(l, true);  // the combine's reverse
    experts.backward(l, unused);
    dispatch.backward(l, false, t);
  }
  return t;
}

// One rank's times in one repetition, in this order (reduced over ranks as one array).
enum Field : int {
  experts_phase,
  experts_direct,  // GEMMs + SwiGLU loops
  experts_gemm,
  dispatch_phase,
  dispatch_direct,  // Alltoallv + counts Alltoall
  dispatch_alltoallv,
  dispatch_interleaved,  // Alltoallv + counts amid the experts replay, no barriers
  kFields
};

struct Row {
  std::string quantity;
  double phase = 0, direct = 0;  // medians over repetitions of the rates
  Stats ratio;                   // phase rate / direct rate, per repetition
  // Best of the repetitions on each side: noise on a shared machine only ever adds time, so
  // this is the robust second view when the machine is loaded.
  double best_ratio = 0;
  bool verdict = false;  // judged against kPassRatio, otherwise information
};

// Rates (work / time) of both sides per repetition; the ratio is taken per repetition so the
// machine's drift between repetitions cancels.
Row compare(const std::string& quantity, double work, const std::vector<double>& phase_s,
            const std::vector<double>& direct_s, bool verdict) {
  std::vector<double> p, d, r;
  for (std::size_t i = 0; i < phase_s.size(); ++i) {
    p.push_back(work / phase_s[i]);
    d.push_back(work / direct_s[i]);
    r.push_back(direct_s[i] / phase_s[i]);
  }
  const double best = *std::min_element(direct_s.begin(), direct_s.end()) /
                      *std::min_element(phase_s.begin(), phase_s.end());
  return {quantity, median(p), median(d), summarize(r), best, verdict};
}

void print_rows(const std::vector<Row>& rows, const char* unit) {
  for (const Row& r : rows) {
    const char* verdict = !r.verdict ? "info" : r.ratio.median >= kPassRatio ? "PASS" : "FAIL";
    std::printf("%-52s %9.2f %9.2f %7.3f  %5.3f..%5.3f %6.3f  %s\n",
                (r.quantity + " (" + unit + ")").c_str(), r.phase / 1e9, r.direct / 1e9,
                r.ratio.median, r.ratio.min, r.ratio.max, r.best_ratio, verdict);
  }
}

void check_close(double phase, double replay, const char* what) {
  MB_CHECK(std::abs(phase - replay) <= 1e-9 * std::max(1.0, replay),
           "the replay does not match the step: " << what << " " << replay << " vs the phase's "
                                                  << phase);
}

void run_bench(const PhaseBenchOptions& b, MpiRuntime& rt) {
  const RunConfig c = make_config(b, rt.size());
  const Topology topo = rt.topology(c.layout.grid(), 0);
  CpuCompute compute(c.blas_threads);
  auto comm = make_mpi_communicator(rt.world(), topo);
  TrainingStep step(c, topo, compute, *comm);
  step.initialize();

  MPI_Comm expert_comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(rt.world(), topo.grid.group_index(Group::expert, topo.rank),
                           topo.group(Group::expert).rank, &expert_comm),
            "MPI_Comm_split");
  const int local_experts = topo.local_experts(static_cast<int>(c.model.n_routed_experts));
  const Routing routing = recompute_routing(c, topo, expert_comm, local_experts);
  ExpertsReplay experts(compute, c, routing.layout);
  DispatchReplay dispatch(expert_comm, routing, local_experts, c.model.hidden_size,
                          c.workload.moe_layers());

  using Sample = std::array<double, kFields>;
  auto run_step = [&](Sample& s) {
    rt.barrier();
    const StepSample x = step.run();
    check_close(x.flops[static_cast<std::size_t>(Phase::experts)], experts.flops(), "experts FLOP");
    check_close(x.bytes[static_cast<std::size_t>(Phase::dispatch)], dispatch.bytes(),
                "dispatch bytes");
    s[experts_phase] = x.time_s[static_cast<std::size_t>(Phase::experts)];
    s[dispatch_phase] = x.time_s[static_cast<std::size_t>(Phase::dispatch)];
  };
  auto run_replays = [&](Sample& s) {
    rt.barrier();
    const ExpertsTimes e = experts.run();
    const DispatchTimes d = dispatch.run();
    s[experts_direct] = e.gemm_s + e.swiglu_s;
    s[experts_gemm] = e.gemm_s;
    s[dispatch_direct] = d.alltoallv_s + d.counts_s;
    s[dispatch_alltoallv] = d.alltoallv_s;
    rt.barrier();
    const DispatchTimes di = run_interleaved(experts, dispatch);
    s[dispatch_interleaved] = di.alltoallv_s + di.counts_s;
  };
  Sample unused{};
  for (int i = 0; i < c.warmup; ++i) {
    run_step(unused);
    run_replays(unused);
  }
  const auto reps = static_cast<std::size_t>(c.steps);
  std::vector<double> mine(reps * kFields);
  for (std::size_t i = 0; i < reps; ++i) {
    Sample s{};
    if (i % 2 == 0) {
      run_step(s);
      run_replays(s);
    } else {
      run_replays(s);
      run_step(s);
    }
    std::copy(s.begin(), s.end(), mine.begin() + static_cast<std::ptrdiff_t>(i * kFields));
  }
  std::vector<double> slowest(mine.size()), fastest(mine.size());
  const int n = static_cast<int>(mine.size());
  check_mpi(MPI_Allreduce(mine.data(), slowest.data(), n, MPI_DOUBLE, MPI_MAX, rt.world()),
            "MPI_Allreduce");
  check_mpi(MPI_Allreduce(mine.data(), fastest.data(), n, MPI_DOUBLE, MPI_MIN, rt.world()),
            "MPI_Allreduce");
  // Work per rank, the mean over ranks as the run report takes it.
  const double flops = rt.allreduce_sum(experts.flops()) / rt.size();
  const double bytes = rt.allreduce_sum(dispatch.bytes()) / rt.size();
  check_mpi(MPI_Comm_free(&expert_comm), "MPI_Comm_free");
  if (rt.rank() != 0) return;

  auto field = [&](const std::vector<double>& v, Field f) {
    std::vector<double> out;
    for (std::size_t i = 0; i < reps; ++i) out.push_back(v[i * kFields + f]);
    return out;
  };
  auto ms = [&](Field f) { return 1e3 * median(field(slowest, f)); };
  const ExpertLayout& lay = routing.layout;
  std::printf(
      "# moebench phase benchmark: %s, %lld MoE layers, %lld tokens/rank (seq %lld x %lld)\n",
      c.model.name.c_str(), static_cast<long long>(c.workload.moe_layers()),
      static_cast<long long>(c.workload.tokens_per_rank()),
      static_cast<long long>(c.workload.seq_len), static_cast<long long>(c.workload.micro_batch));
  std::printf(
      "# world %d, ep %d, %d local experts; rank 0: %lld expert rows (%lld for expert 0), "
      "%lld rows sent; attention %s, routing %s, BLAS threads %d\n",
      topo.world(), topo.grid.ep(), local_experts, static_cast<long long>(lay.total_rows),
      static_cast<long long>(lay.expert_rows.empty() ? 0 : lay.expert_rows[0]),
      static_cast<long long>(routing.plan.row_token.size()), c.workload.attention ? "on" : "off",
      to_string(c.workload.routing).c_str(), c.blas_threads);
  std::printf("# BLAS: %s\n", blas_library_name().c_str());
  std::printf(
      "# %d warmup + %zu repetitions, step and replays alternating; slowest rank's time, "
      "medians over repetitions\n",
      c.warmup, reps);
  std::printf(
      "# experts per step and rank: %.3f GFLOP; phase %.2f ms, direct GEMMs %.2f ms + "
      "SwiGLU %.2f ms\n",
      flops / 1e9, ms(experts_phase), ms(experts_gemm), ms(experts_direct) - ms(experts_gemm));
  std::printf(
      "# dispatch per step and rank: %.2f MB; phase %.3f ms (counts exchange included), "
      "direct Alltoallv %.3f ms + counts Alltoall %.3f ms; amid experts replay %.3f ms\n",
      bytes / 1e6, ms(dispatch_phase), ms(dispatch_alltoallv),
      ms(dispatch_direct) - ms(dispatch_alltoallv), ms(dispatch_interleaved));
  std::printf("#\n%-52s %9s %9s %7s  %12s %6s  %s\n", "# quantity", "phase", "direct", "ratio",
              "ratio range", "best", "verdict");
  const auto s = [&](Field f) { return field(slowest, f); };
  const auto f = [&](Field x) { return field(fastest, x); };
  print_rows({compare("experts rate vs cblas GEMMs + SwiGLU loops", flops, s(experts_phase),
                      s(experts_direct), true),
              compare("experts rate vs cblas GEMMs only", flops, s(experts_phase), s(experts_gemm),
                      false)},
             "GFLOP/s");
  print_rows({compare("dispatch algbw vs Alltoallv + counts Alltoall", bytes, s(dispatch_phase),
                      s(dispatch_direct), true),
              compare("dispatch algbw vs Alltoallv only", bytes, s(dispatch_phase),
                      s(dispatch_alltoallv), false),
              compare("dispatch algbw, fastest rank, vs + counts", bytes, f(dispatch_phase),
                      f(dispatch_direct), false),
              compare("dispatch algbw vs the same amid experts replay", bytes, s(dispatch_phase),
                      s(dispatch_interleaved), false)},
             "GB/s");
  std::fflush(stdout);
}

// Before MPI starts, the launcher's environment says which rank prints usage messages.
bool first_rank_by_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v) == 0;
  }
  return true;
}

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) {
  using namespace moebench;
  use_fast_blas_kernels(argv);  // as moebench does (blas_core.hpp)
  PhaseBenchOptions b;
  CLI::App app{
      "moebench_bench: the experts phase's FLOP rate against direct CBLAS GEMMs and the dispatch "
      "phase's bandwidth against bare MPI_Alltoallv, in one process (see tests/bench/README.md)",
      "moebench_bench"};
  app.add_option("--preset", b.preset, "model preset (default deepseek-v3-tiny)");
  app.add_option("--hidden", b.hidden, "hidden size override (default 512; 0: the preset's)");
  app.add_option("--moe-ffn", b.moe_ffn,
                 "expert intermediate size override (default 256; 0: the preset's)");
  app.add_option("--seq-len", b.seq_len, "tokens per sequence (default 1024)");
  app.add_option("--micro-batch", b.micro_batch, "sequences per rank (default 1)");
  app.add_option("--layers", b.layers, "MoE layers (default 2, no dense layers)");
  app.add_option("--ep", b.ep, "expert-parallel size (default: the world size)");
  app.add_option("--warmup", b.warmup, "untimed repetitions (default 2)");
  app.add_option("--reps", b.reps, "timed repetitions (default 10)");
  app.add_option("--routing", b.routing, "balanced|zipf:S (default balanced)");
  app.add_option("--attention", b.attention, "on|off (default off: not measured here)");
  app.add_option("--blas-threads", b.blas_threads, "BLAS threads per rank (default 1)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (!first_rank_by_environment()) return e.get_exit_code() == 0 ? 0 : 2;
    const int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(ExitCode::usage);
  }
  MpiRuntime rt(&argc, &argv);
  try {
    run_bench(b, rt);
  } catch (const Error& e) {
    if (e.code() == ExitCode::usage) {
      // Every rank resolves the same flags to the same verdict, so all return together.
      if (rt.rank() == 0) std::cerr << "moebench_bench: " << e.what() << "\n";
      return static_cast<int>(ExitCode::usage);
    }
    std::cerr << "moebench_bench: error on rank " << rt.rank() << ": " << e.what() << "\n";
    rt.abort(static_cast<int>(e.code()));
  } catch (const std::exception& e) {
    std::cerr << "moebench_bench: error on rank " << rt.rank() << ": " << e.what() << "\n";
    rt.abort(static_cast<int>(ExitCode::runtime));
  }
  return 0;
}
