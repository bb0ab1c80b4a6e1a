// Everything a run produced, as plain data. Measurement fills it; the JSON report and the console
// table only read it. SI units throughout (seconds, bytes, FLOP).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/measure/phases.hpp"
#include "harness/measure/stats.hpp"
#include "harness/runtime/topology.hpp"
#include "workloads/accounting/accounting.hpp"
#include "workloads/config/run_config.hpp"

namespace moebench {

// One rank's GPU (device backends only), for meta.devices[].
struct DeviceRecord {
  int rank = 0;
  std::string host;
  std::string name;  // "NVIDIA H200"
  std::string uuid;  // "GPU-...", as nvidia-smi -L prints it
  std::string pci_bus_id;
  std::int64_t memory_bytes = 0;
  std::string compute_capability;    // "9.0"
  std::string driver_version;        // the driver's release ("580.65.06"); empty without NVML
  std::string cuda_driver_version;   // the CUDA version the driver supports ("13.0")
  std::string cuda_runtime_version;  // the CUDA runtime the binary runs with
  std::string nccl_version;          // empty when built without NCCL
};

struct RunMeta {
  std::string tool_version;
  std::string git_sha;
  bool git_dirty = false;
  std::vector<std::string> argv;
  std::string start_time;          // ISO 8601, UTC
  std::vector<std::string> hosts;  // distinct host names, in rank order of first appearance
  std::string mpi_library;
  std::string backend;  // compute backend
  std::string comm;     // communication backend
  std::string blas;     // the CBLAS library (cpu backend)
  std::string build_type;
  std::string compiler;
  std::vector<std::pair<std::string, std::string>> environment;  // SLURM_JOB_ID etc., when set
  std::vector<DeviceRecord> devices;  // every rank's GPU, in rank order; empty on the cpu backend
  // Which implementations ran (rank 0's compute backend), e.g. the attention kernels.
  std::string gemm_path;
  std::string grouped_gemm_path;
  std::string attention_path;
};

struct PhaseResult {
  Phase phase = Phase::attention;
  Stats time_s;      // over timed steps, of the slowest rank's time in this phase
  double flops = 0;  // per rank per step (mean over ranks)
  double bytes = 0;  // per rank per step (mean over ranks)
  // Communication phases: over timed steps, of the slowest rank's busy time, the collectives' own
  // durations (time_s is what the compute stream waited for them: the exposed part).
  Stats busy_s;
  double flop_rate = 0;  // flops / median time (compute phases)
  double algbw = 0;      // bytes / median busy time (communication phases), bytes/s
  double busbw = 0;
  int group_size = 0;
};

struct RankResult {
  int rank = 0;
  std::string host;
  int node = 0;
  double step_time_s = 0;           // median over timed steps
  PerPhase<double> phase_time_s{};  // median over timed steps
};

struct TensorCheck {
  std::string name;
  long long compared = 0;
  long long mismatches = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
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
  std::vector<TensorCheck> tensors;  // summed over ranks
};

struct RunResults {
  Stats step_time_s;  // each step's time is the slowest rank's
  std::vector<double> step_times_s;
  double tflops_per_gpu = 0;           // instantiated Megatron FLOPs per GPU / median step / 1e12
  double tokens_per_s_per_gpu = 0;     // tokens per rank / median step time
  double compute_time_s = 0;           // sum of compute phases' medians
  double communication_time_s = 0;     // sum of communication phases' medians
  double exposed_communication_s = 0;  // median step time minus compute time, >= 0 (includes
                                       // comm_wait: time the GPU does no compute)
  // Communication against compute (--overlap), from the communication phases' medians.
  struct Overlap {
    double busy_s = 0;     // sum of busy medians: the collectives' own durations
    double exposed_s = 0;  // sum of time medians: what the compute stream waited for them
    double hidden_s = 0;   // max(0, busy - exposed): communication hidden behind compute
    double fraction = 0;   // hidden / busy (0 without communication)
  } overlap;
  // Gradient buckets per step and group (TrainingStep::grad_buckets()), set by the run.
  int grad_buckets_dense = 0;
  int grad_buckets_expert = 0;
  std::vector<PhaseResult> phases;
  std::vector<RankResult> per_rank;
};

struct RunRecord {
  RunMeta meta;
  RunConfig config;
  Topology topology;  // of rank 0; nodes and ranks_per_node describe the job
  StackAccounting full_model;
  StackAccounting instantiated;
  CollectiveBytes collective_bytes;
  MemoryEstimate memory;
  RunResults results;
  VerificationResult verification;
};

}  // namespace moebench
