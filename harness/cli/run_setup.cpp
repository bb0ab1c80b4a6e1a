#include "harness/cli/run_setup.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/fault/fault_communicator.hpp"
#include "harness/backends/fault/slow_compute.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/cli/commands.hpp"
#include "harness/cli/prediction.hpp"
#include "harness/cli/run_outputs.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/host.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/core/stop_request.hpp"
#include "harness/core/version.hpp"
#include "harness/device/device_records.hpp"
#include "harness/device/nvlink_domains.hpp"
#include "harness/device/telemetry.hpp"
#include "harness/measure/summary.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/rank_identity.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/table.hpp"
#include "harness/parallel/domains.hpp"
#include "harness/verify/reference_check.hpp"
#include "harness/verify/verify_cost.hpp"
#include "workloads/config/recipes.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench::run_parts {

std::unique_ptr<Communicator> connect_and_check_memory(Setup& s, MpiRuntime& rt) {
  const RunConfig& c = s.config;
  rt.set_timeout(c.comm_timeout_s);
  std::unique_ptr<Communicator> comm =
      make_communicator(c.comm, rt.world(), s.topo, *s.compute, c.comm_timeout_s);
  const MemoryBudget budget = memory_budget(s, rt);
  resolve_weight_copies(s, budget, rt);
  agree(rt, usage_problem([&] { check_memory(s, budget); }));
  return comm;
}

Setup prepare(const CliOptions& o, MpiRuntime& rt) {
  Setup s;
  // A recipe moebench cannot run as published, before anything about its layout.
  if (!o.workload.recipe.empty()) {
    const std::string refusal = offload_refusal(recipe(o.workload.recipe));
    if (!refusal.empty()) throw UsageError(refusal);
  }
  s.config = resolve_run_config(o, rt.size());
  s.topo = rt.topology(s.config.layout.grid(), s.config.layout.ranks_per_node);
  s.compute = make_compute(s.config.backend, s.topo.local_rank, s.config.blas_threads);
  if (s.config.inject && s.config.inject->kind == FaultSpec::Kind::slow &&
      (s.config.inject->every_rank || s.config.inject->rank == rt.rank())) {
    s.compute =
        make_slow_compute(std::move(s.compute), s.config.inject->factor, s.config.inject->work);
  }
  if (s.config.inject && s.config.inject->kind == FaultSpec::Kind::sdc &&
      s.config.inject->rank == rt.rank()) {
    s.compute = make_sdc_compute(std::move(s.compute), s.config.inject->every);
  }
  s.compute->set_grouped_gemm_impl(s.config.grouped_gemm);  // UsageError on the cpu backend
  s.compute->set_attention_impl(s.config.attention_impl);   // UsageError: cudnn where there is none
  if (s.config.precision == Precision::fp8) {
    // UsageError where the device has no FP8 tensor cores.
    s.compute->set_linear_precision(LinearPrecision::fp8);
    s.compute->set_fp8_recipe(s.config.fp8_recipe);  // UsageError where the GPU cannot run it
  }
  // Bad system files and calibration reports fail here, on every rank, before any step.
  ExpectedInputs expected = expected_inputs(o, s.config);
  s.system = std::move(expected.system);
  s.calibration = std::move(expected.calibration);
  if (rt.rank() == 0) s.out_lock = check_destinations(o);
  return s;
}

MemoryBudget memory_budget(const Setup& s, MpiRuntime& rt) {
  const std::size_t bpe = dtype_size(s.compute->activation_dtype());
  MemoryBudget b;
  const std::vector<std::string> domains =
      rt.all_gather(rt.host() + " " + s.compute->memory_domain());
  const std::string& mine = domains[static_cast<std::size_t>(rt.rank())];
  b.sharing = static_cast<long>(std::count(domains.begin(), domains.end(), mine));
  b.with_reference = s.config.verify && domains.front() == mine;
  if (s.config.verify) {
    const VerifyCost v = estimate_verify_cost(s.config, bpe);
    b.reference = v.reference_step_bytes;
    b.reference_results = v.reference_results_bytes;
  }
  b.host = s.compute->memory_is_host();
  b.reserved = static_cast<double>(s.compute->reserved_bytes());
  b.available = static_cast<double>(s.compute->memory_available_bytes());
  return b;
}

// --fp8-weight-copies auto: kept, unless some rank fits only without the copies; the same on every
// rank, and on the backend. Collective.
void resolve_weight_copies(Setup& s, const MemoryBudget& b, MpiRuntime& rt) {
  RunConfig& c = s.config;
  if (c.fp8_weight_copies == Fp8WeightCopies::automatic) {
    const std::size_t bpe = dtype_size(s.compute->activation_dtype());
    RunConfig kept = c, none = c;
    kept.fp8_weight_copies = Fp8WeightCopies::kept;
    none.fp8_weight_copies = Fp8WeightCopies::per_gemm;
    const bool only_without = c.precision == Precision::fp8 &&
                              b.need(estimate_memory(kept, bpe)) > b.available &&
                              b.need(estimate_memory(none, bpe)) <= b.available;
    c.fp8_weight_copies = rt.allreduce_max(only_without ? 1.0 : 0.0) > 0 ? Fp8WeightCopies::per_gemm
                                                                         : Fp8WeightCopies::kept;
  }
  s.compute->set_fp8_weight_copies(c.fp8_weight_copies != Fp8WeightCopies::per_gemm);
  s.memory = estimate_memory(c, dtype_size(s.compute->activation_dtype()));
}

// UsageError when the run's estimate does not fit the memory budget.
void check_memory(const Setup& s, const MemoryBudget& b) {
  const double need = b.need(s.memory);
  std::string scope = " per rank";
  if (b.sharing > 1) {
    scope = " for the " + std::to_string(b.sharing) + " ranks sharing this " +
            (s.compute->memory_is_host() ? "host" : "GPU");
  }
  if (b.with_reference && !b.host) {
    // The reference's results stay in rank 0's host memory while every rank takes its slices.
    const double host = static_cast<double>(host_memory_available_bytes());
    if (b.reference_results > host) {
      throw UsageError("--verify: the single-process reference's results need an estimated " +
                       format_gib(b.reference_results) + " of rank 0's host memory but " +
                       format_gib(host) +
                       " is available; verify fewer --layers, a smaller --global-batch or "
                       "--seq-len, or a model with fewer experts (see `moebench plan --verify`)");
    }
  }
  if (need > b.available) {
    throw UsageError("this configuration needs an estimated " + format_gib(need) + scope +
                     (b.with_reference ? " (with the --verify reference)" : "") + " but " +
                     format_gib(b.available) +
                     " is available; use fewer --layers, a smaller --seq-len or --micro-batch, a "
                     "larger --ep, --recompute, or --fp8-weight-copies per-gemm (see `moebench "
                     "plan`)");
  }
}

// Ranks agree before anything runs: a bad file on one node must not hang the others. The first
// failing rank says why; the others end quietly with the same exit code.
void agree(MpiRuntime& rt, const std::string& problem) {
  const int first_bad = static_cast<int>(rt.allreduce_min(problem.empty() ? rt.size() : rt.rank()));
  if (first_bad < rt.size()) {
    if (rt.rank() == first_bad) throw UsageError(problem);
    throw Error(ExitCode::usage, "");
  }
}

std::string usage_problem(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace moebench::run_parts
