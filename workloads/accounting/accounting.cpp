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

// With attention off a layer keeps only its MLP's input norm (h); the attention block's
// projections and its own input norm go with it.
std::int64_t layer_attention_params(const ModelConfig& m, const ParamCounts& pc, bool attention) {
  return attention ? pc.attention_per_layer : m.hidden_size;
}

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
                                   double tokens_per_step) {
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
  // per token do not depend on the layout. x2: the backward pass runs the reverse exchange.
  const double rows =
      static_cast<double>(w.tokens_per_rank()) * static_cast<double>(m.num_experts_per_tok);
  b.dispatch = static_cast<double>(run_moe_layers(c)) * 2.0 * rows *
               static_cast<double>(m.hidden_size) * bpe;
  b.combine = b.dispatch;
  b.dense_grad_reduce = static_cast<double>(sp.dense) * bpe;
  b.expert_grad_reduce = static_cast<double>(sp.local_experts) * bpe;
  b.param_allgather = c.grad_reduce == GradReduce::reduce_scatter
                          ? static_cast<double>(sp.dense + sp.local_experts) * bpe
                          : 0.0;
  return b;
}

double fp8_operand_bytes(const RunConfig& c) {
  const ModelConfig& m = c.model;
  const double tokens = static_cast<double>(c.workload.tokens_per_rank());
  const double routed_rows =
      tokens * static_cast<double>(std::max<std::int64_t>(1, m.num_experts_per_tok));
  const double h = static_cast<double>(m.hidden_size);
  const double heads = static_cast<double>(m.num_attention_heads);
  const double q_out = heads * static_cast<double>(m.qk_head_dim());
  const double kv_a_out = static_cast<double>(m.kv_lora_rank + m.qk_rope_head_dim);
  const double kv_b_out = heads * static_cast<double>(m.qk_nope_head_dim + m.v_head_dim);
  const double q_lora = static_cast<double>(m.q_lora_rank.value_or(0));
  struct Linear {
    double in, out, rows;
  };
  const double ffn = static_cast<double>(m.intermediate_size);
  const double moe = static_cast<double>(m.moe_intermediate_size);
  const double shared = moe * static_cast<double>(m.n_shared_experts);
  const Linear linears[] = {
      {h, q_lora > 0 ? q_lora : q_out, tokens},
      {q_lora, q_out, tokens},
      {h, kv_a_out, tokens},
      {static_cast<double>(m.kv_lora_rank), kv_b_out, tokens},
      {heads * static_cast<double>(m.v_head_dim), h, tokens},
      {h, 2 * ffn, tokens},
      {ffn, h, tokens},
      {h, 2 * shared, tokens},
      {shared, h, tokens},
      {h, 2 * moe, routed_rows},
      {moe, h, routed_rows},
  };
  double largest = 0;
  for (const Linear& l : linears) {
    largest = std::max(largest, l.in * l.out + l.rows * std::max(l.in, l.out));
  }
  return largest;
}

std::vector<StageMemory> estimate_stage_memory(const RunConfig& c, std::size_t bytes_per_element,
                                               ActivationPolicy policy) {
  const ModelConfig& m = c.model;
  const Workload& w = c.workload;
  const ParamCounts pc = param_counts(m);
  const double bpe = static_cast<double>(bytes_per_element);
  const double h = static_cast<double>(m.hidden_size);
  const double heads = static_cast<double>(m.num_attention_heads);
  const double qk = static_cast<double>(m.qk_head_dim());
  const double vh = static_cast<double>(m.v_head_dim);
  const double nope = static_cast<double>(m.qk_nope_head_dim);
  const double kv_lora = static_cast<double>(m.kv_lora_rank);
  const double k = static_cast<double>(m.num_experts_per_tok);
  const double moe_ffn = static_cast<double>(m.moe_intermediate_size);
  const double tokens = static_cast<double>(w.tokens_per_rank());  // one micro-batch
  const PipelineLayout layout = pipeline_layout(c);
  const PipelineShape shape = pipeline_shape(c);
  const double experts_local = static_cast<double>(m.n_routed_experts / c.layout.ep);
  // The embedding, output head and MTP layers count where the layout places them when the run
  // has them (--head on, --mtp).
  const bool ends = w.head;

  // Activations kept for backward, per token and layer: `el` tensors at bpe, `in` the inputs of
  // GEMMs and of core attention (at bpe, or at 1 byte under fp8 with policy.fp8_saved_inputs),
  // `f32` 4-byte values (norm rstd, softmax
  // log-sum-exp, router scores, indices and weights).
  // Attention: block input (h, el) and its normed copy (h, in); with q_lora the latent (el) and its
  // normed copy (in); q (heads x qk), the kv up-projection (heads x (nope + v)) that attention
  // reads k_nope and v from, and the attention output (heads x v), all in; with separate_k_v, k
  // and v instead of the kv up-projection (heads x qk + heads x v); the kv latent with the rope
  // key (kv_lora + rope, el) and the normed latent (kv_lora, in); rstd per norm, lse per head.
  // MLP: input (h, el) and normed copy (h, in), rstd. Dense: gate and up (2 ffn, el), activation
  // (ffn, in). MoE: k dispatched rows (k h, in), per expert row gate/up (2 k moe_ffn, el) and
  // activation (k moe_ffn, in), k expert outputs (k h, el), the shared experts' likewise; router
  // scores (E), k indices, k weights.
  const double gin = policy.fp8_saved_inputs && c.precision == Precision::fp8 ? 1.0 : bpe;
  double el_attn = 0, in_attn = 0, f32_attn = 0;
  if (w.attention) {
    const double q_lora = m.q_lora_rank ? static_cast<double>(*m.q_lora_rank) : 0.0;
    el_attn = h + q_lora + kv_lora + static_cast<double>(m.qk_rope_head_dim);
    const double kv_up = policy.separate_k_v ? heads * (qk + vh) : heads * (nope + vh);
    in_attn = h + q_lora + kv_lora + heads * qk + kv_up + heads * vh;
    if (policy.recompute_mla_up_proj) in_attn -= heads * qk + kv_up;  // q, k and v
    f32_attn = 1 + (m.q_lora_rank ? 1 : 0) + 1 + heads;
  }
  const double el_mlp = h, in_mlp = h, f32_mlp = 1;
  const double ffn = static_cast<double>(m.intermediate_size);
  const double shared_ffn = static_cast<double>(m.n_shared_experts) * moe_ffn;
  const double el_moe = 2 * k * moe_ffn + k * h + 2 * shared_ffn;
  const double in_moe = k * h + k * moe_ffn + shared_ffn;
  const double f32_moe = static_cast<double>(m.n_routed_experts) + 2 * k;
  const auto layer_bytes_per_token = [&](int layer) {
    const bool dense = is_dense_layer(c, layer);
    return (el_attn + el_mlp) * bpe + (in_attn + in_mlp) * gin + (f32_attn + f32_mlp) * 4 +
           (dense ? 2 * ffn * bpe + ffn * gin : el_moe * bpe + in_moe * gin + f32_moe * 4);
  };
  // An MTP layer: one more layer of the last layer's kind, plus the embedded next token, its
  // norms and projection's inputs and the output norm (6h at bpe) and three rstd.
  const double mtp_bytes_per_token =
      layer_bytes_per_token(static_cast<int>(w.layers) + 1) + 6 * h * bpe + 3 * 4;
  // A head: its logits, overwritten by their gradient, kept from forward to backward (bpe).
  const double head_bytes_per_token = static_cast<double>(m.vocab_size) * bpe;

  std::vector<StageMemory> out;
  for (int r = 0; r < shape.pp; ++r) {
    StageMemory st;
    st.pp_rank = r;
    double dense = 0, local_experts = 0;
    std::vector<double> chunk_act(static_cast<std::size_t>(shape.vp), 0.0);
    for (int ch = 0; ch < shape.vp; ++ch) {
      const PipelineStage& ps = layout.stage(r, ch);
      st.stages.push_back(layout.stage_index(r, ch));
      for (int l = ps.first_layer; l < ps.first_layer + ps.layers; ++l) {
        ++st.layers;
        const bool is_dense = is_dense_layer(c, l);
        dense +=
            static_cast<double>(layer_attention_params(m, pc, w.attention)) +
            static_cast<double>(is_dense ? pc.dense_mlp_per_layer : pc.shared_experts + pc.router);
        if (!is_dense) local_experts += experts_local * static_cast<double>(pc.expert);
        chunk_act[static_cast<std::size_t>(ch)] += tokens * layer_bytes_per_token(l);
      }
      // The embedding's table: on the first stage, and a copy where the MTP layers embed the
      // next tokens on another rank.
      if (ends && (ps.embedding || (ps.mtp > 0 && !layout.stage(r, 0).embedding)) &&
          !st.embedding) {
        st.embedding = true;
        dense += static_cast<double>(pc.embedding);
      }
      if (ps.mtp > 0 && ends) {
        st.mtp = ps.mtp;
        const double experts = static_cast<double>(m.n_routed_experts * pc.expert);
        dense += (static_cast<double>(pc.mtp_layer) - experts) * ps.mtp;
        local_experts += experts / static_cast<double>(c.layout.ep) * ps.mtp;
        chunk_act[static_cast<std::size_t>(ch)] +=
            tokens * (mtp_bytes_per_token + head_bytes_per_token) * ps.mtp;
      }
      if (ps.loss && ends) {
        st.loss = true;
        dense += static_cast<double>(pc.output_head);
        chunk_act[static_cast<std::size_t>(ch)] += tokens * (head_bytes_per_token + h * bpe + 4);
      }
    }
    st.params = dense + local_experts;
    MemoryEstimate& e = st.memory;
    e.weights = st.params * bpe;
    // FP32 gradients, accumulated over the micro-batches (Megatron's main grads).
    e.gradients = st.params * 4.0;
    if (c.optimizer == Optimizer::adamw) {
      // FP32 first and second moments, and FP32 master weights when the storage is narrower
      // (BF16); ZeRO-1 shards them over the ranks that reduce each part.
      const double per_param = 2.0 * 4.0 + (bytes_per_element < 4 ? 4.0 : 0.0);
      const bool zero1 = c.grad_reduce == GradReduce::reduce_scatter;
      const double dense_shard = zero1 ? static_cast<double>(c.layout.dp()) : 1.0;
      const double expert_shard = zero1 ? static_cast<double>(c.layout.edp()) : 1.0;
      e.optimizer = per_param * (dense / dense_shard + local_experts / expert_shard);
    }
    // The schedule's peak: the micro-batches whose forward ran and backward has not, per chunk.
    std::vector<int> live(static_cast<std::size_t>(shape.vp), 0);
    double now = 0;
    for (const PipelineOp& op : pipeline_schedule(shape, r)) {
      const double a = chunk_act[static_cast<std::size_t>(op.chunk)];
      now += op.forward ? a : -a;
      live[static_cast<std::size_t>(op.chunk)] += op.forward ? 1 : -1;
      if (now > e.activations) {
        e.activations = now;
        st.in_flight = 0;
        for (int n : live) st.in_flight += n;
      }
    }

    // One layer's exchange at a time: dispatch send + receive, and the same for the combine;
    // pipeline transfers: a received gradient and the one to send.
    if (w.moe_layers() > 0) e.communication = 4.0 * tokens * k * h * bpe;
    if (shape.pp > 1) e.communication += 2.0 * tokens * h * bpe;
    // Attention scores for one (sequence, head) at a time in FP32; router logits of one layer;
    // the first stage's inputs and the last stage's output gradients of every micro-batch (with
    // --head on, their token ids).
    if (w.attention) {
      e.workspace += static_cast<double>(w.seq_len) * static_cast<double>(w.seq_len) * 4.0;
    }
    if (w.moe_layers() > 0) e.workspace += tokens * static_cast<double>(m.n_routed_experts) * 4.0;
    if (c.precision == Precision::fp8) {
      // The quantised operands of one GEMM, and every weight's copies kept for the step: two
      // layouts (forward and data gradient), one byte each with narrow (GPU) storage, FP32
      // values with FP32 storage (the cpu emulation). An upper bound: norms, the router and the
      // embedding are counted although not quantised.
      e.workspace += fp8_operand_bytes(c);
      if (policy.fp8_weight_copies) e.workspace += st.params * (bytes_per_element < 4 ? 2.0 : 8.0);
    }
    const double all_inputs =
        tokens * static_cast<double>(shape.microbatches) *
        (ends ? static_cast<double>(w.mtp + 2) * 4.0 + (r == shape.pp - 1 ? (w.mtp + 1) * 4.0 : 0)
              : h * bpe);
    if (r == 0) e.workspace += all_inputs;
    if (r == shape.pp - 1) e.workspace += all_inputs;  // the last stage is on the last rank
    out.push_back(std::move(st));
  }
  return out;
}

MemoryEstimate estimate_memory(const RunConfig& c, std::size_t bytes_per_element) {
  MemoryEstimate largest;
  for (const StageMemory& s : estimate_stage_memory(c, bytes_per_element)) {
    if (s.memory.total() > largest.total()) largest = s.memory;
  }
  return largest;
}

MemoryEstimate estimate_reference_memory(const RunConfig& c, std::size_t bytes_per_element) {
  return estimate_memory(single_process_reference(c), bytes_per_element);
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
  j["convention"] = "megatron-core num_floating_point_operations";
  return j;
}

nlohmann::json to_json(const StageMemory& s) {
  nlohmann::json j;
  j["pp_rank"] = s.pp_rank;
  j["stages"] = s.stages;
  j["layers"] = s.layers;
  j["embedding"] = s.embedding;
  j["mtp"] = s.mtp;
  j["loss"] = s.loss;
  j["params"] = s.params;
  j["microbatches_in_flight"] = s.in_flight;
  j["memory"] = to_json(s.memory);
  return j;
}

nlohmann::json to_json(const MemoryEstimate& m) {
  nlohmann::json j;
  j["weights_bytes"] = m.weights;
  j["gradients_bytes"] = m.gradients;
  j["optimizer_bytes"] = m.optimizer;
  j["activations_bytes"] = m.activations;
  j["communication_bytes"] = m.communication;
  j["workspace_bytes"] = m.workspace;
  j["total_bytes"] = m.total();
  return j;
}

}  // namespace moebench
