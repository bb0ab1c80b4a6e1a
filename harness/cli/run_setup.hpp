// `moebench run`'s set-up, before any step: the configuration resolved and checked, the compute
// backend made, the destinations checked and locked, and the memory check against what each
// rank's memory has free (run_command.cpp drives it).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/cli/options.hpp"
#include "harness/cli/prediction.hpp"
#include "harness/compute/compute.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/host.hpp"
#include "harness/device/telemetry.hpp"
#include "harness/measure/health.hpp"
#include "harness/output/output_lock.hpp"
#include "harness/output/run_record.hpp"
#include "harness/output/table.hpp"
#include "harness/parallel/topology.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "harness/systems/systems.hpp"
#include "workloads/accounting/memory_model.hpp"
#include "workloads/config/run_config.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench::run_parts {

// Everything a run needs before its first allocation; UsageError when the run cannot be done.
struct Setup {
  RunConfig config;
  Topology topo;
  std::unique_ptr<Compute> compute;
  // --system (and --calibrate): the expected phase times the report carries.
  std::optional<SystemSpec> system;
  std::optional<CalibrationRun> calibration;
  MemoryEstimate memory;  // set once --fp8-weight-copies is resolved (resolve_weight_copies)
  std::shared_ptr<OutputLock> out_lock;  // rank 0: --out is this run's alone while it runs
};

// What the memory check weighs an estimate against, on this rank: the memory free now, after the
// communicator exists, so it already lacks what the CUDA context and NCCL's connection buffers
// (allocated by its warm-up) took; the ranks whose tensors live in the same memory (a real host's
// memory, or one GPU that ranks share with --comm mpi), who all see it free before any allocates
// and so must fit together; and the --verify reference where rank 0 is (an equal per-rank share
// would refuse whenever the reference outgrows one share). Collective.
struct MemoryBudget {
  double available = 0;
  long sharing = 1;
  bool with_reference = false;
  double reference = 0;          // the --verify reference's step, in the compute's memory
  double reference_results = 0;  // its results, FP32, in rank 0's host memory
  double reserved = 0;           // the backend's own, not yet allocated
  bool host = true;              // the compute's memory is the host's
  double need(const MemoryEstimate& per_rank) const {
    return (per_rank.total() + reserved) * static_cast<double>(sharing) +
           (with_reference ? reference + (host ? reference_results : 0.0) : 0.0);
  }
};

// The configuration, the backend and the expected-times inputs, checked on every rank; rank 0
// also checks and locks the destinations. UsageError when the run cannot be done.
Setup prepare(const CliOptions& o, MpiRuntime& rt);

MemoryBudget memory_budget(const Setup& s, MpiRuntime& rt);

// --fp8-weight-copies auto: kept, unless some rank fits only without the copies; the same on every
// rank, and on the backend. Collective.
void resolve_weight_copies(Setup& s, const MemoryBudget& b, MpiRuntime& rt);

// UsageError when the run's estimate does not fit the memory budget.
void check_memory(const Setup& s, const MemoryBudget& b);

// The communicator of the run's backend over the world, made before the memory check (its
// buffers are the memory's too), then --fp8-weight-copies resolved and the run's memory checked
// on every rank (a UsageError on one is every rank's). Sets the runtime's timeout. Collective.
std::unique_ptr<Communicator> connect_and_check_memory(Setup& s, MpiRuntime& rt);

// Ranks agree before anything runs: a bad file on one node must not hang the others. The first
// failing rank says why; the others end quietly with the same exit code.
void agree(MpiRuntime& rt, const std::string& problem);

std::string usage_problem(const std::function<void()>& f);

}  // namespace moebench::run_parts
