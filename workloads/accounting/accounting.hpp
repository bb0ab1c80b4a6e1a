// Parameter, FLOP, byte and memory accounting. Pure functions of the configuration; the FLOP
// convention is Megatron-Core's num_floating_point_operations (megatron/training/training.py), so
// TFLOP/s figures compare with published rows; TorchTitan's is reported beside it.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "workloads/config/run_config.hpp"

namespace moebench {

// 2 * m * n * k: one GEMM's forward FLOPs.
constexpr double gemm_flops(double m, double n, double k) {
  return 2.0 * m * n * k;
}

struct ParamCounts {
  std::int64_t attention_per_layer = 0;  // MLA projections and its norms, incl. the layer's 2 norms
  std::int64_t dense_mlp_per_layer = 0;
  std::int64_t expert = 0;          // one routed expert (gate, up, down)
  std::int64_t shared_experts = 0;  // all shared experts of one MoE layer
  std::int64_t router = 0;          // router weight (+ selection bias) of one MoE layer
  std::int64_t embedding = 0;
  std::int64_t output_head = 0;  // incl. the final norm
  // One MTP module's own parts: enorm, hnorm and its output norm (3 h), eh_proj (2h x h).
  std::int64_t mtp_own = 0;
  std::int64_t mtp_layer = 0;  // one MTP module: a MoE layer's parameters plus mtp_own
  std::int64_t mtp = 0;        // all MTP modules (not in total_params)
};

ParamCounts param_counts(const ModelConfig& m);

// Accounting of a stack of layers at a given sequence length.
struct StackAccounting {
  std::string scope;  // "full_model" or "instantiated"
  std::int64_t total_params = 0;
  std::int64_t active_params = 0;  // per token
  double flops_per_token = 0;      // Megatron-Core convention (forward + backward)
  double flops_per_token_torchtitan = 0;
  double tokens_per_step = 0;  // global
  double flops_per_step = 0;   // Megatron, global (flops_per_token * tokens_per_step)
};

// The whole model as published (embedding, 61 layers, MTP, output heads).
StackAccounting account_full_model(const ModelConfig& m, std::int64_t seq_len,
                                   double tokens_per_step);
// Only the layers this run instantiates (no embedding, head or MTP), attention on or off.
StackAccounting account_instantiated(const RunConfig& c);

// Megatron FLOPs per token of one layer's parts (forward + backward, i.e. 6 x MACs).
double mla_flops_per_token(const ModelConfig& m, std::int64_t seq_len);  // incl. core attention
double core_attention_flops_per_token(const ModelConfig& m, std::int64_t seq_len);
double dense_mlp_flops_per_token(const ModelConfig& m);
double routed_experts_flops_per_token(const ModelConfig& m);  // top_k experts
double shared_experts_flops_per_token(const ModelConfig& m);
double router_flops_per_token(const ModelConfig& m);  // not in the Megatron total

// Bytes each rank moves per step in each collective (the send-buffer size, nccl-tests' "size").
struct CollectiveBytes {
  double dispatch = 0;  // forward dispatch + backward reverse-combine, all MoE layers
  double combine = 0;   // forward combine + backward reverse-dispatch
  double dense_grad_reduce = 0;
  double expert_grad_reduce = 0;
  double param_allgather = 0;  // ZeRO-1 only
};
CollectiveBytes collective_bytes(const RunConfig& c, std::size_t bytes_per_element);

// Per-rank memory estimate for the run (and for the --verify reference on rank 0).
struct MemoryEstimate {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double communication = 0;
  double workspace = 0;
  double total() const {
    return weights + gradients + optimizer + activations + communication + workspace;
  }
};
// One pipeline rank's estimate: its stages' weights (with the embedding, output head and MTP layer
// where the layout places them when every layer is instantiated, run or not), FP32 main gradients,
// AdamW state (sharded over the data-parallel ranks with ZeRO-1), the activations of the
// micro-batches the schedule keeps in flight at its peak, the all-to-all and point-to-point
// buffers, and workspace.
// --precision fp8: the quantised E4M3 copies (one byte an element) of the two operands of the
// largest linear GEMM (forward, data or weight gradient: a weight and the rows it meets), which
// the cuda backend keeps in scratch. Routed experts are bounded by all top-k rows of the rank
// meeting one expert's weight, the worst imbalance the workspace allows for.
double fp8_operand_bytes(const RunConfig& c);

struct StageMemory {
  int pp_rank = 0;
  std::vector<int> stages;  // its virtual stages, chunk by chunk
  int layers = 0;
  bool embedding = false;
  int mtp = 0;
  bool loss = false;
  double params = 0;  // held by one rank of the stage (its local experts)
  int in_flight = 0;  // micro-batch chunks whose activations are kept at the peak
  MemoryEstimate memory;
};
// How a trainer keeps activations, where it differs from moebench's own step (the defaults).
struct ActivationPolicy {
  // Megatron's recompute of MLA's up-projections: q, k and v are recomputed in the backward from
  // the latents, which are kept anyway.
  bool recompute_mla_up_proj = false;
  // Core attention's k and v kept as tensors of their own, per head [k_nope | rope key] and v
  // (Transformer Engine's saved inputs); moebench's step reads them in place from the kv
  // up-projection and the shared rope key, which it keeps instead.
  bool separate_k_v = false;
  // With --precision fp8, the inputs of GEMMs and of core attention kept in FP8 (1 byte), as
  // Transformer Engine keeps its quantised copies; moebench's step keeps them in storage
  // precision.
  bool fp8_saved_inputs = false;
  // With --precision fp8, every weight's quantised copies kept for the step (moebench quantises
  // each weight once per step, forward and transposed). Off for the published rows as Megatron
  // runs them: with --fp8-param-gather their primary weights are FP8 already, which this
  // estimate does not model beyond the BF16 weights it counts.
  bool fp8_weight_copies = true;
};
std::vector<StageMemory> estimate_stage_memory(const RunConfig& c, std::size_t bytes_per_element,
                                               ActivationPolicy policy = {});
// The largest of the pipeline ranks' estimates, for moebench's own step.
MemoryEstimate estimate_memory(const RunConfig& c, std::size_t bytes_per_element);
// The single-process reference's memory (the whole global batch, all experts), on rank 0.
MemoryEstimate estimate_reference_memory(const RunConfig& c, std::size_t bytes_per_element);

nlohmann::json to_json(const StackAccounting& a);
nlohmann::json to_json(const CollectiveBytes& b);
nlohmann::json to_json(const MemoryEstimate& m);
nlohmann::json to_json(const StageMemory& s);

}  // namespace moebench
