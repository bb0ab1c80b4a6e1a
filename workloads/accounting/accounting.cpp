#include "workloads/accounting/accounting.hpp"

#include <nlohmann/json.hpp>

namespace moebench {
namespace {

// Parameters of the stack a run instantiates, split the way gradients are reduced: "dense" is
// replicated over the data group (attention, norms, dense MLPs, routers, shared experts), "expert"
// is one rank's share of the routed experts.
struct StackParams {
  std::int64_t dense = 0;
  std::int64_t local_experts = 0;   // E / ep experts per MoE layer
  std::int64_t global_experts = 0;  // all E experts per MoE layer
  std::int64_t active = 0;          // per token
  std::int64_t mtp_total = 0;       // of the above, the MTP layers' (all their experts)
  std::int64_t mtp_active = 0;      // and per token
};

// The run's transformer layers (decoder and MTP) with a dense MLP and with an MoE block.
std::int64_t run_dense_layers(const RunConfig& c) {
  return c.workload.dense_layers + (c.model.moe_layers() == 0 ? c.workload.mtp : 0);
}
std::int64_t run_moe_layers(const RunConfig& c) {
  return c.workload.transformer_layers() - run_dense_layers(c);
}

StackParams stack_params(const RunConfig& c) {
  const ModelConfig& m = c.model;
  const Workload& w = c.workload;
  const ParamCounts pc = param_counts(m);
  const std::int64_t per_layer = layer_attention_params(m, pc, w.attention);
  const std::int64_t moe_dense = pc.shared_experts + pc.router;
  const std::int64_t dense_layers = run_dense_layers(c), moe_layers = run_moe_layers(c);
  StackParams s;
  s.dense = w.transformer_layers() * per_layer + dense_layers * pc.dense_mlp_per_layer +
            moe_layers * moe_dense;
  // The ends: the embedding, the final norm and output head, and each MTP layer's two norms, its
  // eh projection and its output norm.
  if (w.head) s.dense += pc.embedding + pc.output_head;
  s.dense += w.mtp * pc.mtp_own;
  s.global_experts = moe_layers * m.n_routed_experts * pc.expert;
  s.local_experts = moe_layers * (m.n_routed_experts / c.layout.ep) * pc.expert;
  s.active = s.dense + moe_layers * m.num_experts_per_tok * pc.expert;
  // One MTP layer: a transformer layer of the model's last layer's kind and its own parts.
  const bool mtp_dense = m.moe_layers() == 0;
  const std::int64_t own = per_layer + pc.mtp_own;
  s.mtp_total = w.mtp * (own + (mtp_dense ? pc.dense_mlp_per_layer
                                          : moe_dense + m.n_routed_experts * pc.expert));
  s.mtp_active = w.mtp * (own + (mtp_dense ? pc.dense_mlp_per_layer
                                           : moe_dense + m.num_experts_per_tok * pc.expert));
  return s;
}

double moe_layer_flops_per_token(const ModelConfig& m) {
  return routed_experts_flops_per_token(m) + shared_experts_flops_per_token(m);
}

// TorchTitan's attention term: QK^T and AV, forward + backward, no causal discount.
double torchtitan_attention_flops(const ModelConfig& m, std::int64_t layers, std::int64_t seq) {
  return 6.0 * static_cast<double>(layers) * static_cast<double>(m.num_attention_heads) *
         static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) *
         static_cast<double>(seq);
}

}  // namespace

std::int64_t layer_attention_params(const ModelConfig& m, const ParamCounts& pc, bool attention) {
  return attention ? pc.attention_per_layer : m.hidden_size;
}

double recompute_flops_per_token(const ModelConfig& m, std::int64_t seq_len, const Recompute& r,
                                 bool attention, bool dense) {
  const double h = static_cast<double>(m.hidden_size);
  const double heads = static_cast<double>(m.num_attention_heads);
  double f = 0;
  if (attention && r.mla_up_proj) {
    const double q_in = m.q_lora_rank ? static_cast<double>(*m.q_lora_rank) : h;
    f += gemm_flops(1, heads * static_cast<double>(m.qk_head_dim()), q_in) +
         gemm_flops(1, heads * static_cast<double>(m.qk_nope_head_dim + m.v_head_dim),
                    static_cast<double>(m.kv_lora_rank));
  }
  // Megatron counts core attention's forward and backward as 3 forwards.
  if (attention && r.core_attn) f += core_attention_flops_per_token(m, seq_len) / 3.0;
  if (dense && r.mlp) f += gemm_flops(1, 2.0 * static_cast<double>(m.intermediate_size), h);
  if (!dense && r.shared_experts) {
    f += gemm_flops(1, 2.0 * static_cast<double>(m.n_shared_experts * m.moe_intermediate_size), h);
  }
  return f;
}

ParamCounts param_counts(const ModelConfig& m) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t heads = m.num_attention_heads;
  const std::int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
  ParamCounts pc;
  // q: down-projection, its norm and up-projection; or one direct projection without q_lora.
  const std::int64_t q = m.q_lora_rank
                             ? h * *m.q_lora_rank + *m.q_lora_rank + *m.q_lora_rank * heads * qk
                             : h * heads * qk;
  // kv: down-projection to the latent plus the shared rope key, the latent's norm, up-projection.
  const std::int64_t kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
                          m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim);
  const std::int64_t o = heads * m.v_head_dim * h;
  pc.attention_per_layer = q + kv + o + 2 * h;
  pc.dense_mlp_per_layer = 3 * h * m.intermediate_size;
  pc.expert = 3 * h * m.moe_intermediate_size;
  pc.shared_experts = m.n_shared_experts * pc.expert;
  pc.router = h * m.n_routed_experts + m.n_routed_experts;
  pc.embedding = m.vocab_size * h;
  pc.output_head = m.vocab_size * h + h;
  // DeepSeek's MTP module: enorm, hnorm, eh_proj (2h -> h), one MoE block and its own final norm;
  // the embedding and output head are shared with the main model.
  pc.mtp_own = 2 * h * h + 3 * h;
  pc.mtp_layer = pc.attention_per_layer + m.n_routed_experts * pc.expert + pc.shared_experts +
                 pc.router + pc.mtp_own;
  pc.mtp = m.num_nextn_predict_layers * pc.mtp_layer;
  return pc;
}

double core_attention_flops_per_token(const ModelConfig& m, std::int64_t seq_len) {
  const double s = static_cast<double>(seq_len);
  const double heads = static_cast<double>(m.num_attention_heads);
  // The 0.5 is the causal mask, as Megatron-Core counts it.
  return 6.0 * (s * heads * static_cast<double>(m.qk_head_dim()) * 0.5 +
                s * heads * static_cast<double>(m.v_head_dim) * 0.5);
}

double mla_flops_per_token(const ModelConfig& m, std::int64_t seq_len) {
  const double h = static_cast<double>(m.hidden_size);
  const double heads = static_cast<double>(m.num_attention_heads);
  const double qk = static_cast<double>(m.qk_head_dim());
  const double kv_lora = static_cast<double>(m.kv_lora_rank);
  // The "+ 1" terms are the lora norms, as Megatron-Core counts them.
  const double q_term =
      m.q_lora_rank ? static_cast<double>(*m.q_lora_rank) * (h + heads * qk + 1) : h * heads * qk;
  const double kv_term =
      kv_lora * (h + heads * static_cast<double>(m.qk_nope_head_dim + m.v_head_dim) + 1);
  const double rope_term = h * static_cast<double>(m.qk_rope_head_dim);
  const double o_term = heads * static_cast<double>(m.v_head_dim) * h;
  return 6.0 * (q_term + kv_term + rope_term + o_term) + core_attention_flops_per_token(m, seq_len);
}

double dense_mlp_flops_per_token(const ModelConfig& m) {
  return 18.0 * static_cast<double>(m.hidden_size) * static_cast<double>(m.intermediate_size);
}

double routed_experts_flops_per_token(const ModelConfig& m) {
  return 18.0 * static_cast<double>(m.hidden_size) * static_cast<double>(m.moe_intermediate_size) *
         static_cast<double>(m.num_experts_per_tok);
}

double shared_experts_flops_per_token(const ModelConfig& m) {
  return 18.0 * static_cast<double>(m.hidden_size) * static_cast<double>(m.moe_intermediate_size) *
         static_cast<double>(m.n_shared_experts);
}

double router_flops_per_token(const ModelConfig& m) {
  return 6.0 * static_cast<double>(m.hidden_size) * static_cast<double>(m.n_routed_experts);
}

StackAccounting account_full_model(const ModelConfig& m, std::int64_t seq_len,
                                   double tokens_per_step, const Recompute& recompute) {
  const ParamCounts pc = param_counts(m);
  const std::int64_t layers = m.num_hidden_layers;
  const std::int64_t dense = m.first_k_dense_replace;
  const std::int64_t moe = m.moe_layers();
  const std::int64_t mtp = m.num_nextn_predict_layers;
  const std::int64_t outer = pc.embedding + pc.output_head + layers * pc.attention_per_layer +
                             dense * pc.dense_mlp_per_layer;
  StackAccounting a;
  a.scope = "full_model";
  a.total_params = outer + moe * (m.n_routed_experts * pc.expert + pc.shared_experts + pc.router);
  a.active_params =
      outer + moe * (m.num_experts_per_tok * pc.expert + pc.shared_experts + pc.router);

  // Megatron-Core: each MTP layer is one more layer of the last layer's kind, plus its norms and
  // eh projection; logits are counted once per output head (main + MTP).
  const double h = static_cast<double>(m.hidden_size);
  const bool last_is_moe = moe > 0;
  const double moe_layers = static_cast<double>(moe + (last_is_moe ? mtp : 0));
  const double dense_layers = static_cast<double>(dense + (last_is_moe ? 0 : mtp));
  a.flops_per_token = static_cast<double>(layers + mtp) * mla_flops_per_token(m, seq_len) +
                      dense_layers * dense_mlp_flops_per_token(m) +
                      moe_layers * moe_layer_flops_per_token(m) +
                      6.0 * static_cast<double>(mtp * pc.mtp_own) +
                      6.0 * h * static_cast<double>(m.vocab_size) * static_cast<double>(1 + mtp);

  // TorchTitan: 6 x active parameters without the input embedding (the output head is a matmul
  // and counts), plus its non-causal attention term over the main layers; it has no MTP.
  a.flops_per_token_torchtitan = 6.0 * static_cast<double>(a.active_params - pc.embedding) +
                                 torchtitan_attention_flops(m, layers, seq_len);
  a.tokens_per_step = tokens_per_step;
  a.flops_per_step = a.flops_per_token * tokens_per_step;
  // As account_instantiated counts it: the MTP layers are of the last layer's kind.
  a.recompute_flops_per_token =
      dense_layers * recompute_flops_per_token(m, seq_len, recompute, true, true) +
      moe_layers * recompute_flops_per_token(m, seq_len, recompute, true, false);
  a.recompute_flops_per_step = a.recompute_flops_per_token * tokens_per_step;
  return a;
}

StackAccounting account_instantiated(const RunConfig& c) {
  const ModelConfig& m = c.model;
  const Workload& w = c.workload;
  const StackParams sp = stack_params(c);
  const ParamCounts pc = param_counts(m);
  const double h = static_cast<double>(m.hidden_size);
  StackAccounting a;
  a.scope = "instantiated";
  // The MTP layers' parameters are not in the model's total (DeepSeek-V3's 671B counts without
  // them, as account_full_model does); their FLOPs are.
  a.total_params = sp.dense + sp.global_experts - sp.mtp_total;
  a.active_params = sp.active - sp.mtp_active;
  // Megatron-Core's count, term by term as account_full_model has it for the same parts.
  a.flops_per_token =
      (w.attention ? static_cast<double>(w.transformer_layers()) * mla_flops_per_token(m, w.seq_len)
                   : 0.0) +
      static_cast<double>(run_dense_layers(c)) * dense_mlp_flops_per_token(m) +
      static_cast<double>(run_moe_layers(c)) * moe_layer_flops_per_token(m) +
      6.0 * static_cast<double>(w.mtp * pc.mtp_own) +
      (w.head ? 6.0 * h * static_cast<double>(m.vocab_size) * static_cast<double>(1 + w.mtp) : 0.0);
  // TorchTitan's: 6 x the active parameters without the input embedding, plus its attention
  // term over the decoder layers (it has no MTP).
  a.flops_per_token_torchtitan =
      6.0 * static_cast<double>(a.active_params - (w.head ? pc.embedding : 0)) +
      (w.attention ? torchtitan_attention_flops(m, w.layers, w.seq_len) : 0.0);
  a.tokens_per_step = static_cast<double>(tokens_per_step(c));
  a.flops_per_step = a.flops_per_token * a.tokens_per_step;
  const std::int64_t dense = run_dense_layers(c), moe = run_moe_layers(c);
  a.recompute_flops_per_token =
      static_cast<double>(dense) *
          recompute_flops_per_token(m, w.seq_len, w.recompute, w.attention, true) +
      static_cast<double>(moe) *
          recompute_flops_per_token(m, w.seq_len, w.recompute, w.attention, false);
  a.recompute_flops_per_step = a.recompute_flops_per_token * a.tokens_per_step;
  return a;
}

CollectiveBytes collective_bytes(const RunConfig& c, std::size_t bytes_per_element) {
  const ModelConfig& m = c.model;
  const Workload& w = c.workload;
  const double bpe = static_cast<double>(bytes_per_element);
  const StackParams sp = stack_params(c);
  CollectiveBytes b;
  // Each rank's send buffer holds top_k rows of h per token, the rows it keeps for its own experts
  // included (nccl-tests' size convention): exact for balanced routing, the expectation
  // otherwise. With ep == 1 the exchange is a local copy but is counted the same way, so bytes
  // per token do not depend on the layout. x2: the backward pass runs the reverse exchange. The
  // dispatch also carries each row's combine weight (FP32) forward and its gradient back.
  const double rows =
      static_cast<double>(w.tokens_per_rank()) * static_cast<double>(m.num_experts_per_tok);
  const double layers = static_cast<double>(run_moe_layers(c));
  b.combine = layers * 2.0 * rows * static_cast<double>(m.hidden_size) * bpe;
  b.dispatch = b.combine + layers * 2.0 * rows * 4.0;
  b.dense_grad_reduce = static_cast<double>(sp.dense) * bpe;
  b.expert_grad_reduce = static_cast<double>(sp.local_experts) * bpe;
  b.param_allgather = c.grad_reduce == GradReduce::reduce_scatter
                          ? static_cast<double>(sp.dense + sp.local_experts) * bpe
                          : 0.0;
  return b;
}

nlohmann::json to_json(const CollectiveBytes& b) {
  return nlohmann::json{{"dispatch", b.dispatch},
                        {"combine", b.combine},
                        {"dense_grad_reduce", b.dense_grad_reduce},
                        {"expert_grad_reduce", b.expert_grad_reduce},
                        {"param_allgather", b.param_allgather}};
}

nlohmann::json to_json(const StackAccounting& a) {
  nlohmann::json j;
  j["scope"] = a.scope;
  j["total_params"] = a.total_params;
  j["active_params"] = a.active_params;
  j["flops_per_token"] = a.flops_per_token;
  j["flops_per_token_torchtitan"] = a.flops_per_token_torchtitan;
  j["tokens_per_step"] = a.tokens_per_step;
  j["flops_per_step"] = a.flops_per_step;
  j["recompute_flops_per_token"] = a.recompute_flops_per_token;
  j["recompute_flops"] = a.recompute_flops_per_step;
  j["convention"] = "megatron-core num_floating_point_operations";
  return j;
}

}  // namespace moebench
