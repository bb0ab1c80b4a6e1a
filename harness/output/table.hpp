// The console summary of a run, for people: nccl-tests-style columns, friendly units (ms, MB,
// GB/s, TFLOP/s). Only reads the RunRecord; the JSON report is the machine-readable form.
#pragma once

#include <string>

#include "harness/output/run_record.hpp"

namespace moebench {

std::string format_run_table(const RunRecord& r);
// The health check's block: the suspects by node, each with its rank, host, GPU and reason.
std::string format_health(const RunRecord& r);

// Where every rank runs, printed at the start as nccl-tests does: rank, process id, host, local
// rank and device (the GPU's ordinal, PCI bus id and name; "cpu" on a host backend).
struct RankPlace {
  int rank = 0;
  long pid = 0;
  std::string host;
  int local_rank = 0;
};
std::string format_device_list(const std::vector<RankPlace>& ranks,
                               const std::vector<DeviceRecord>& devices);

// One finished step, as rank 0 prints it while the run goes on (Megatron's iteration line).
struct StepProgress {
  const char* kind = "timed";  // verify, warmup or timed
  int index = 0;               // within its kind, from 0
  int of = 0;                  // steps of its kind
  int overall = 0;             // steps finished, every kind, from 1
  int total = 0;               // steps of every kind
  double step_time_s = 0;      // the slowest rank's
  double tflops_per_gpu = 0;
  double tokens_per_s_per_gpu = 0;
};
// "# step 4/13 timed 1/10: 142.846 ms, 0.020 TFLOP/s/GPU, 896 tokens/s/GPU" (with a newline).
std::string format_step_line(const StepProgress& p);

}  // namespace moebench
