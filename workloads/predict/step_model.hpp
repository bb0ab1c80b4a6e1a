// The composition rules of the step-time model behind `moebench predict`: the
// time of one GEMM from its FLOPs, of a point-to-point transfer and of the collectives from an
// alpha-beta cost per link, the all-to-all split into traffic inside and across NVLink domains,
// and the pipeline schedule moebench runs simulated pass by pass from per-chunk times, with what
// of the data-parallel exchanges its passes hide. Pure functions of SI quantities: the tests check
// each on hand-computed cases.
#pragma once

#include <vector>

#include "harness/parallel/pipeline_schedule.hpp"

namespace moebench {

// Seconds for `flops` at `peak` FLOP/s times an efficiency in (0, 1] (UsageError outside).
double compute_time_s(double flops, double peak_flops_per_s, double efficiency);

// A link's alpha-beta cost: a message of b bytes takes latency + b / bandwidth.
struct LinkCost {
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;  // each direction
};
double transfer_time_s(const LinkCost& link, double bytes);

// An all-to-all among `group` consecutive ranks in NVLink domains of `domain` consecutive ranks
// (1: no NVLink), each rank sending `bytes_per_rank` spread evenly over the group (its own share
// stays local): the bytes each rank sends to peers inside its domain and outside it, and the
// time, the slower of the two parts (they use different links and run at once), each one
// latency per peer plus its bytes over the link's bandwidth.
struct AllToAllCost {
  double in_domain_bytes = 0;
  double cross_domain_bytes = 0;
  double time_s = 0;
};
AllToAllCost alltoall_cost(double bytes_per_rank, int group, int domain, const LinkCost& nvlink,
                           const LinkCost& scale_out);

// The same exchange as DeepEP and HybridEP run it: each token goes once to each distinct rank
// that holds one of its `k` experts (never twice to one rank), and across domains once to each
// distinct remote domain, whose receiving rank forwards it over NVLink to the others there.
// Experts are spread evenly, `k` of them chosen uniformly (as with forced balance): a rank is hit
// with probability q = 1 - (1 - 1/group)^k, a remote domain with 1 - (1 - 1/domains)^k. Bytes per
// rank and time as for alltoall_cost, `row_bytes` per (token, destination).
AllToAllCost dedup_alltoall_cost(double tokens, int k, double row_bytes, int group, int domain,
                                 const LinkCost& nvlink, const LinkCost& scale_out);

// A ring reduce-scatter or all-gather of `bytes` over n ranks on links of `link`: n - 1 steps,
// each one latency and bytes / n over the bandwidth; 0 for one rank.
double ring_half_time_s(double bytes, int n, const LinkCost& link);
// A ring all-reduce: a reduce-scatter then an all-gather, 2 (n - 1) such steps.
double ring_allreduce_time_s(double bytes, int n, const LinkCost& link);

// Exchanges of `exchange_s` run under `compute_s` of other work, the exchanges' kernels holding a
// fraction `comm_sm_fraction` in [0, 1) of the GPU's SMs while they run (DeepEP's and HybridEP's
// SMs): the compute runs on the rest meanwhile, so the two end at max(exchange, compute +
// exchange x fraction). The time this adds to the compute alone: max(0, exchange - compute,
// exchange x fraction). UsageError for a fraction outside [0, 1).
double overlapped_exchange_s(double exchange_s, double compute_s, double comm_sm_fraction);

// The pipeline schedule moebench runs (pipeline_schedule: 1F1B, or interleaved with vp > 1)
// simulated pass by pass: a pass starts when its rank has finished the one before and the
// activation or gradient it needs has arrived (its producer's end plus `p2p_s`); sends do not
// block. Times are per virtual stage (pp x vp, stage s is chunk s / pp of rank s % pp).
struct PipelineTimes {
  std::vector<double> forward_s;
  std::vector<double> backward_s;
  double p2p_s = 0;
};
struct SimulatedPipeline {
  double step_s = 0;           // the last pass's end
  std::vector<double> busy_s;  // per pipeline rank: its passes' time
  std::vector<double> end_s;   // per pipeline rank: its last pass's end
  // Per pipeline rank, each pass's start and end, in pipeline_schedule's order.
  std::vector<std::vector<double>> pass_start_s;
  std::vector<std::vector<double>> pass_end_s;
};
SimulatedPipeline simulate_pipeline(const PipelineShape& shape, const PipelineTimes& times);

// A pipeline rank's data-parallel exchanges with --overlap on, as moebench's step and
// Megatron-Core's schedules run them, per model chunk: its gradient reduction starts with its last
// micro-batch's backward (bucket by bucket as its layers finish); its ZeRO-1 parameter all-gather
// has to end with its first micro-batch's forward (bucket by bucket as its layers start). Each
// kind runs chunk after chunk on one channel, in the order the schedule reaches the chunks, under
// the rank's passes as `sim` timed them (its waits included). What each adds to the rank's step:
// the reductions' tail after its last pass, and the forwards' wait on the all-gathers, which start
// with the step (after the previous step's optimizer). `reduce_s` and `gather_s` per chunk.
struct DataParallelExposure {
  double reduce_s = 0;
  double gather_s = 0;
};
DataParallelExposure exposed_data_parallel(const PipelineShape& shape, const SimulatedPipeline& sim,
                                           int pp_rank, const std::vector<double>& reduce_s,
                                           const std::vector<double>& gather_s);

}  // namespace moebench
