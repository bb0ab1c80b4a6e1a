// The stages of `moebench accept` that stand alone: the inventory, each GPU's rates, the links
// and the collectives (accept_command.cpp runs them in order, then the step, the silent-data-
// corruption checks and the burn-in, which share one training step). Each measures on every
// rank and, on rank 0, judges into the job's result (accept_checks.hpp).
#pragma once

#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "harness/cli/accept_checks.hpp"
#include "harness/cli/accept_figures.hpp"
#include "harness/cli/accept_probes.hpp"
#include "harness/cli/nccl_log.hpp"
#include "harness/cli/options.hpp"
#include "harness/cli/run_setup.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/device/device_records.hpp"
#include "harness/device/nvml_library.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "harness/systems/systems.hpp"

namespace moebench {

// What every stage reads and adds to: the job's options and setup, this rank's compute and
// communicator, the site's figures, rank 0's result and the system it is judged against.
struct AcceptJob {
  const CliOptions& o;
  const AcceptOptions& a;
  const RunConfig& c;
  run_parts::Setup& s;
  MpiRuntime& rt;
  Compute& compute;
  Communicator& comm;
  const SiteFigures& site;
  AcceptResult& result;
  std::optional<SystemSpec>& system;
  bool host = false;
  double min_slowdown = 0;
  // Rank 0's checks, judged stage by stage.
  void add(const std::vector<AcceptCheck>& more) const {
    result.checks.insert(result.checks.end(), more.begin(), more.end());
  }
  // A progress line, rank 0's, unless --quiet.
  void say(const std::string& line) const {
    if (rt.rank() == 0 && !o.quiet) std::cout << "# accept: " << line << "\n" << std::flush;
  }
};

// 1. Inventory: who each rank is and what it runs (NVML's view of `gpu` where NVML is there),
// --dcgm's results folded in. Every rank's device record, for the system's detection.
std::vector<DeviceRecord> run_inventory(AcceptJob& job, const NvmlGpuId& gpu_id);

// 2. Each GPU: the n x n x n GEMM (its checksums returned for the silent-data-corruption
// checks), core attention and memory bandwidth, against the SKU's expected figures: the
// system's peaks x the generation's efficiencies, as `predict` prices them (or the site's:
// --floors, --baseline). Detects the system from `devices` where none was given.
GemmProbe run_gpu_stage(AcceptJob& job, std::int64_t n, const std::vector<DeviceRecord>& devices);

// 3. Links: every pair of ranks, each link against its class's median (linkcheck's rule).
void run_links(AcceptJob& job);

// 3b. Collectives over every rank at a few sizes (nccl-tests' bus bandwidth) against the
// bandwidth of the links they cross, and the transport NCCL used (its log, where it was asked
// for: null on the cpu backend, whose collectives run over MPI).
void run_collectives(AcceptJob& job, NcclLogRequest* nccl_log);

}  // namespace moebench
