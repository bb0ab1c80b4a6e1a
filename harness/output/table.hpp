// The console summary of a run, for people: nccl-tests-style columns, friendly units (ms, MB,
// GB/s, TFLOP/s). Only reads the RunRecord; the JSON report is the machine-readable form.
#pragma once

#include <string>

#include "harness/output/run_record.hpp"

namespace moebench {

std::string format_run_table(const RunRecord& r);

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
