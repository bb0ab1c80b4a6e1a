// The step-time model behind `moebench predict`: a pure function of a run's configuration, the
// hardware figures of a system and one set of efficiencies. It prices every pass of every
// pipeline stage from the run's own accounting (the FLOPs of each GEMM kind per token, the bytes
// of each all-to-all and gradient collective, the element-wise traffic of each layer), composes
// them with step_model's rules (alpha-beta links, the all-to-all split over NVLink domains, the
// pipeline schedule simulated pass by pass), applies moebench's overlap rules (--overlap on: the
// shared expert under the dispatch, the router's backward under the dispatch's reverse, gradient
// buckets under the backward), and adds what follows the pipeline (the gradient reduction's
// exposed part, ZeRO-1's parameter all-gather, the optimizer).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "workloads/config/run_config.hpp"
#include "workloads/predict/step_model.hpp"

namespace moebench {

// What the model needs of a system, per GPU, SI units.
struct Hardware {
  double gemm_flops = 0;       // peak dense FLOP/s of the run's GEMM precision
  double attention_flops = 0;  // peak dense FLOP/s of core attention (BF16, or FP32 on cpu)
  double fp8_flops = 0;        // the FP8 peak, for FP8 core attention (0: none)
  double memory_bandwidth = 0;
  int nvlink_domain = 1;  // GPUs per NVLink domain (1: none)
  LinkCost nvlink;
  LinkCost scale_out;
  int storage_bytes = 2;  // bytes per element of activations and gradients (BF16; 4 on cpu)
  // Whether communication runs while the rank computes (GPUs: copy engines and NCCL's kernels
  // beside the compute; moebench's cpu backend: no, its collectives block the rank).
  bool concurrent_communication = true;
  int sms = 0;  // streaming multiprocessors per GPU (0: unknown; exchanges then share none)
  double exp_per_s = 0;  // the SFUs' exponentials per second (0: unknown; softmax not bounded)
  // bytes/s each way between the GPU and host memory while the node's GPUs all copy (0: unknown;
  // an offload is then priced at nothing).
  double host_link_bandwidth = 0;
};

// The fraction of a peak each kind of work reaches, all in (0, 1].
struct Efficiencies {
  double dense_gemm = 1;    // a large GEMM
  double grouped_gemm = 1;  // the experts' grouped GEMM at many rows per expert ...
  // ... reached as rows / (rows + grouped_gemm_half_rows): half of it at this many rows
  double grouped_gemm_half_rows = 0;
  double attention = 1;  // fused core attention (forward and backward)
  double memory = 1;     // element-wise and optimizer kernels against the memory bandwidth
  double nvlink = 1;     // collectives and all-to-alls over NVLink against its bandwidth
  double scale_out = 1;  // the same over the scale-out network
  // Not fractions of a peak: the time a trainer's host adds to each pass, as a fraction of the
  // pass, in [0, 1): with CUDA graphs of part of each layer, and with none.
  double host_overhead_partial_graphs = 0;
  double host_overhead_no_graphs = 0;
};

// How the trainer whose step is predicted runs what moebench's accounting does not fix: moebench's
// own step by default; a published row as its recipe runs it (workloads/config/recipes.json).
enum class Dispatcher {
  alltoall,  // one row per (token, expert), as moebench and Megatron's all-to-all dispatcher send
  dedup      // DeepEP and HybridEP: once per distinct rank, across domains once per domain
};
enum class HostGaps {
  none,            // moebench's C++ step, or a trainer that captures the whole step in CUDA graphs
  partial_graphs,  // CUDA graphs of attention, router and preprocessing; the rest from the host
  no_graphs        // every kernel launched from the host
};
struct TrainerRules {
  Dispatcher dispatcher = Dispatcher::alltoall;
  // Megatron's overlap_moe_expert_parallel_comm: in the 1F1B steady state a micro-batch's
  // all-to-alls run under another's compute, exposed only where they outlast it.
  bool ep_overlap = false;
  // Without it, with --overlap on: the shared expert computes while the dispatch is in flight and
  // the router's backward while its reverse is, as moebench's step runs them (Megatron's
  // moe_shared_expert_overlap, off in every recipe).
  bool shared_expert_overlap = true;
  bool fp8_attention = false;  // core attention at the FP8 peak (fp8_dot_product_attention)
  int grad_reduce_bytes = 0;   // bytes per gradient reduced (0: storage precision)
  HostGaps host_gaps = HostGaps::none;  // priced with the efficiencies' host_overhead figures
  // SMs the dispatcher's kernels hold while an exchange runs under other compute (DeepEP's and
  // HybridEP's num_sms; 0: none priced).
  int ep_comm_sms = 0;
  // Megatron's overlap_param_gather: ZeRO-1's all-gather of each chunk runs under the next step's
  // forwards until that chunk's first forward ends. moebench's step waits for it after the
  // optimizer.
  bool param_gather_overlap = false;
  // Megatron's fine_grained_activation_offloading of expert_fc1: each MoE layer's expert input,
  // as the backward keeps it, copied to host memory on a side stream after the layer's forward
  // and back while the backward of the layer after it runs.
  bool offload_expert_fc1 = false;
};

// The fraction of each pass the trainer's host adds (0 for HostGaps::none).
double host_overhead(const Efficiencies& e, HostGaps gaps);

// What a measured run says of the model on its system (`predict --calibrate RUN.json`): each
// phase's measured time over the model's for that run, applied to the same phase of every pass
// predicted, and the time the run spent waiting at collectives' barriers (comm_wait) and in no
// phase, as a fraction of the rest of its step.
struct Calibration {
  std::map<std::string, double> phase_scale;
  double wait_fraction = 0;
};

// The grouped GEMM's efficiency at `rows` per expert.
double grouped_gemm_efficiency(const Efficiencies& e, double rows_per_expert);

// One term of the step on the rank that sets it (seconds in one step), in the run's phase names
// where they exist.
struct PredictedPhase {
  std::string name;
  double time_s = 0;
  std::string what;  // what it holds, for --explain
};

// The expert input's copies to host memory and back (TrainerRules::offload_expert_fc1), for one
// MoE layer and micro-batch, each hidden under one layer's compute: the forward's for the copy out,
// the backward's for the copy back.
struct ExpertInputOffload {
  bool priced = false;  // false: no offload, or a system without a host link figure
  double bytes = 0;     // each way
  double copy_s = 0;    // each way, at the host link's bandwidth
  // The layer's compute with the host's gaps, before any calibration, exchanges left out.
  double layer_forward_s = 0, layer_backward_s = 0;
  double exposed_forward_s = 0, exposed_backward_s = 0;  // where the copy outlasts it
};

struct Prediction {
  double step_s = 0;
  double pipeline_s = 0;  // the simulated schedule
  double bubble_fraction = 0;
  double tflops_per_gpu = 0;  // Megatron's FLOPs of the whole step / step / GPUs
  double tokens_per_s_per_gpu = 0;
  int critical_pp_rank = 0;            // the pipeline rank whose passes end last
  std::vector<PredictedPhase> phases;  // of the critical rank, adding up to step_s
  // Each pipeline rank's (its passes, its wait; the step-end terms of the critical rank).
  std::vector<std::vector<PredictedPhase>> rank_phases;
  // Per virtual stage, one micro-batch: forward and backward pass times.
  std::vector<double> stage_forward_s, stage_backward_s;
  double p2p_s = 0;
  // Communication priced, before overlap (one step, the critical rank): for the explanation.
  // The dispatch's and the combine's are equal (the same rows each way): alltoall_s each.
  double alltoall_s = 0, grad_reduce_s = 0, param_gather_s = 0;
  double rows_per_expert = 0;
  double grouped_gemm_efficiency = 0;
  ExpertInputOffload offload;    // one MoE layer and micro-batch
  double offload_exposed_s = 0;  // one step, the critical rank (inside its experts phase)
  bool calibrated = false;
};

// UsageError where the configuration or the figures cannot be priced (no peak for the precision,
// an efficiency outside (0, 1]).
Prediction predict_step(const RunConfig& c, const Hardware& hw, const Efficiencies& eff,
                        const TrainerRules& rules = {}, const Calibration* calibration = nullptr);

nlohmann::json to_json(const Prediction& p);

}  // namespace moebench
