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
  // What --recompute repeats in the backward (its GEMMs' and core attention's forward FLOPs), not
  // in the Megatron count, as Megatron does not count it: per token, and per step (global).
  double recompute_flops_per_token = 0;
  double recompute_flops_per_step = 0;
};

// The whole model as published (embedding, 61 layers, MTP, output heads), with what `recompute`
// repeats in every one of its layers (none by default).
StackAccounting account_full_model(const ModelConfig& m, std::int64_t seq_len,
                                   double tokens_per_step, const Recompute& recompute = {});
// Only the layers this run instantiates (no embedding, head or MTP), attention on or off.
StackAccounting account_instantiated(const RunConfig& c);

// Megatron FLOPs per token of one layer's parts (forward + backward, i.e. 6 x MACs).
double mla_flops_per_token(const ModelConfig& m, std::int64_t seq_len);  // incl. core attention
double core_attention_flops_per_token(const ModelConfig& m, std::int64_t seq_len);
double dense_mlp_flops_per_token(const ModelConfig& m);
double routed_experts_flops_per_token(const ModelConfig& m);  // top_k experts
double shared_experts_flops_per_token(const ModelConfig& m);
double router_flops_per_token(const ModelConfig& m);  // not in the Megatron total
// The forward FLOPs --recompute repeats per token of one layer (attention on or off, dense or
// MoE): the up-projections (mla_up_proj), core attention (core_attn), the dense MLP's and the
// shared experts' gate/up GEMM (mlp, shared_experts); norms and activations count nothing, as in
// Megatron's count.
double recompute_flops_per_token(const ModelConfig& m, std::int64_t seq_len, const Recompute& r,
                                 bool attention, bool dense);

// With attention off a layer keeps only its MLP's input norm (h); the attention block's
// projections and its own input norm go with it.
std::int64_t layer_attention_params(const ModelConfig& m, const ParamCounts& pc, bool attention);

// Bytes each rank moves per step in each collective (the send-buffer size, nccl-tests' "size").
struct CollectiveBytes {
  double dispatch = 0;  // forward dispatch + backward reverse-combine, all MoE layers
  double combine = 0;   // forward combine + backward reverse-dispatch
  double dense_grad_reduce = 0;
  double expert_grad_reduce = 0;
  double param_allgather = 0;  // ZeRO-1 only
};
CollectiveBytes collective_bytes(const RunConfig& c, std::size_t bytes_per_element);

nlohmann::json to_json(const StackAccounting& a);
nlohmann::json to_json(const CollectiveBytes& b);

}  // namespace moebench
