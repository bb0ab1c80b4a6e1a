// Everything a run produced, as plain data. Measurement fills it; the JSON report and the console
// table only read it. SI units throughout (seconds, bytes, FLOP).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/compute/compute.hpp"
#include "harness/device/device_records.hpp"
#include "harness/measure/health.hpp"
#include "harness/measure/results.hpp"
#include "harness/measure/telemetry.hpp"
#include "harness/parallel/topology.hpp"
#include "workloads/accounting/accounting.hpp"
#include "workloads/accounting/memory_model.hpp"
#include "workloads/config/run_config.hpp"

namespace moebench {

struct RunMeta {
  std::string tool_version;
  std::string git_sha;
  bool git_dirty = false;
  std::vector<std::string> argv;
  std::string start_time;          // ISO 8601, UTC
  std::vector<std::string> hosts;  // distinct host names, in rank order of first appearance
  std::string mpi_library;
  std::string backend;        // compute backend
  std::string comm;           // communication backend
  std::string comm_ordering;  // Communicator::lane_ordering(), "" when it says nothing
  std::string blas;           // the CBLAS library (cpu backend)
  BlasCore blas_core;         // its kernels and why (cpu backend)
  std::string build_type;
  std::string compiler;
  std::vector<std::pair<std::string, std::string>> environment;  // SLURM_JOB_ID etc., when set
  std::vector<DeviceRecord> devices;  // every rank's GPU, in rank order; empty on the cpu backend
  // Which implementations ran (rank 0's compute backend), e.g. the attention kernels.
  std::string gemm_path;
  std::string grouped_gemm_path;
  std::string attention_path;
  std::optional<KernelCalls> kernel_calls;  // a device backend's counts (compute.hpp)
  // The math and communication libraries rank 0 had loaded after the steps (full paths): which
  // cuDNN engines, NVRTC, cuBLAS, NCCL, BLAS and MPI the run really used.
  std::vector<std::string> loaded_libraries;
};

struct TensorCheck {
  std::string name;
  long long compared = 0;
  long long mismatches = 0;
  double max_abs_error = 0;  // over the finite errors (a report's numbers stay finite)
  double max_rel_error = 0;
  long long nonfinite = 0;  // NaN or infinity in either run: mismatches, not in the maxima
};

struct VerificationResult {
  bool enabled = false;
  bool passed = true;
  std::string reference;  // what the distributed step was compared against
  double rtol = 0;
  double atol = 0;
  std::string tolerance_reason;
  long long compared = 0;
  long long mismatches = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  long long nonfinite = 0;
  std::vector<TensorCheck> tensors;  // summed over ranks
};

// Which NVLink domain each rank is in, and what the all-to-alls sent inside and across them.
struct DomainRecord {
  std::string source;        // "emulated" (--nvlink-domain-size), "nvml" (fabric cliques), "node"
  std::vector<int> of_rank;  // world rank -> domain
  std::vector<std::string> warnings;  // expert groups that span domains
  // Per rank per timed step, the mean over ranks: bytes every all-to-all of rows (dispatch and
  // combine, forward and backward) sent to peers in the rank's own domain, and to others.
  double in_domain_bytes = 0;
  double cross_domain_bytes = 0;

  int count() const {
    int n = 0;
    for (int d : of_rank) n = d + 1 > n ? d + 1 : n;
    return n;
  }
  double cross_domain_share() const {
    const double total = in_domain_bytes + cross_domain_bytes;
    return total > 0 ? cross_domain_bytes / total : 0.0;
  }
};

// The step's memory, measured beside the memory model (workloads/accounting/memory_model.hpp).
struct MemoryRecord {
  bool measured = false;  // false where the run ended before it could gather the figures
  std::vector<std::string> recompute;
  // Per pipeline rank: the model's estimate of the step's tensors, and the largest peak of the
  // bytes its ranks' step tensors took (Compute::allocation_stats, from before the step was built
  // to the last timed step, the --verify reference left out).
  std::vector<double> estimate_bytes;
  std::vector<double> measured_peak_bytes;
  // The largest over ranks: each process's resident memory before the step allocated (libraries,
  // MPI, the backend's context), and its high-water mark at the end.
  double resident_baseline_bytes = 0;
  double resident_peak_bytes = 0;
  // The largest over ranks, on a GPU: its memory taken before the step allocated (the CUDA
  // context, cuBLAS, cuDNN, NCCL's buffers, other processes); -1 without one.
  double device_baseline_bytes = -1;
  // The largest pipeline rank's kept activations with the run's policy, and without recompute.
  double activation_bytes = 0;
  double activation_bytes_without_recompute = 0;
};

// What each phase should have taken on a known system (`run --system NAME|FILE`, optionally
// `--calibrate RUN.json`; `moebench predict`'s model for this run's configuration), beside what
// the rank that set the step time measured in its median step; a phase more than `threshold`
// times its expected time is marked slow. Absent (system empty) without --system.
struct ExpectedPhase {
  std::string name;
  bool communication = false;
  double expected_s = 0;
  double measured_s = 0;
  double ratio = 0;  // measured / expected; 0 where nothing is expected
  bool slow = false;
};
struct ExpectedRecord {
  std::string system;
  std::string calibration;  // the run report it was calibrated from; "" for the efficiencies
  int pp_rank = 0;          // the pipeline rank whose phases are compared
  double threshold = 1.25;
  double expected_step_s = 0;
  double measured_step_s = 0;
  std::vector<ExpectedPhase> phases;
  bool present() const { return !system.empty(); }
};

struct RunRecord {
  RunMeta meta;
  RunConfig config;
  Topology topology;  // of rank 0; nodes and ranks_per_node describe the job
  StackAccounting full_model;
  StackAccounting instantiated;
  CollectiveBytes collective_bytes;
  MemoryEstimate memory;
  MemoryRecord measured_memory;
  RunResults results;
  VerificationResult verification;
  // Whether every step ran: "completed"; "interrupted" by `signal` after `steps_completed` of
  // config.steps timed steps, every rank stopping after the same one; or "failed" (`error`: a
  // peer timed out or died, or the launcher ended the job mid-step), when the results are rank
  // 0's own (ranks_reporting 1) with the step times the ranks agreed after each finished step.
  std::string state = "completed";
  std::string signal;
  std::string error;
  int steps_completed = 0;
  int ranks_reporting = 0;  // the ranks whose samples the results hold
  HealthResult health;      // the ranks that held the run back (rank 0)
  DomainRecord domains;
  // GPU telemetry over the timed steps, one summary per GPU (rank order); empty with the note
  // saying why (the cpu backend; NVML missing).
  std::vector<GpuTelemetrySummary> telemetry;
  std::string telemetry_note;
  double telemetry_interval_s = 0;
  ExpectedRecord expected;
};

}  // namespace moebench
