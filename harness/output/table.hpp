// The console summary of a run, for people: nccl-tests-style columns, friendly units (ms, MB,
// GB/s, TFLOP/s). Only reads the RunRecord; the JSON report is the machine-readable form.
#pragma once

#include <string>

#include "harness/output/run_record.hpp"
#include "harness/parallel/pipeline_schedule.hpp"

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

// Where rank 0 is inside a long step, printed while it runs (the step line comes at its end):
// "# step 1/13 warmup 1/3: 10.0 s in, rank 0 at pass 7 of 16 (micro-batch 3 of 4, chunk 2 of 2,
// backward)", or "... past its 16 passes (gradient reduction and optimizer)".
struct PassProgress {
  int overall = 0;  // the step under way, every kind, from 1
  int total = 0;
  const char* kind = "timed";
  int index = 0;  // within its kind, from 0
  int of = 0;
  double since_start_s = 0;
  int done = 0;        // passes done
  int passes = 0;      // the rank's passes a step (2 x chunks x micro-batches)
  PipelineOp current;  // the pass under way, when done < passes
  PipelineShape shape;
};
std::string format_pass_line(const PassProgress& p);

// How long a step should take, from rank 0's first forward pass (one micro-batch through one
// chunk) of the run's first step: 3 of them (the backward costs about two) for each of its V x m
// micro-batch chunks, and P - 1 more for the pipeline's fill and drain.
double estimate_step_s(double first_pass_s, const PipelineShape& shape);
// "# a step should take about 2.10 s: 3 x rank 0's first forward pass (0.070 s) x 10 (vp 2 x 4
// micro-batches + pp 2 - 1)" (with a newline).
std::string format_step_estimate(double first_pass_s, const PipelineShape& shape);

}  // namespace moebench
