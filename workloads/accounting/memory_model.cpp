#include "workloads/accounting/memory_model.hpp"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "harness/core/human.hpp"
#include "workloads/accounting/accounting.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {

namespace {

// Bytes per token of a part of the step: `saved` elements are the routed experts' GEMM inputs
// (at 1 byte plus their scales under policy.fp8_saved_inputs, as moebench's step keeps them), `in`
// the other inputs of GEMMs or of core attention (in FP8 only under policy.fp8_all_inputs, as
// Transformer Engine keeps them), `el` other elements in storage precision, `b4` 4-byte values
// (FP32 and i32).
struct Bytes {
  double saved = 0, in = 0, el = 0, b4 = 0;
  Bytes& operator+=(const Bytes& o) {
    saved += o.saved;
    in += o.in;
    el += o.el;
    b4 += o.b4;
    return *this;
  }
};

// What one rank's step holds, per token of a micro-batch, part by part (the names are the layers'
// tensors and scratch buffers).
struct StepShape {
  StepShape(const RunConfig& c, const ActivationPolicy& p) : c(c), p(p), m(c.model) {}
  const RunConfig& c;
  const ActivationPolicy& p;
  const ModelConfig& m;
  double h = static_cast<double>(m.hidden_size);
  double heads = static_cast<double>(m.num_attention_heads);
  double dq = static_cast<double>(m.qk_head_dim());
  double dn = static_cast<double>(m.qk_nope_head_dim);
  double dr = static_cast<double>(m.qk_rope_head_dim);
  double dv = static_cast<double>(m.v_head_dim);
  double kvl = static_cast<double>(m.kv_lora_rank);
  double ql = static_cast<double>(m.q_lora_rank.value_or(0));
  double k = static_cast<double>(m.num_experts_per_tok);
  double E = static_cast<double>(m.n_routed_experts);
  double f = static_cast<double>(m.intermediate_size);
  double mf = static_cast<double>(m.moe_intermediate_size);
  double sf = static_cast<double>(m.n_shared_experts) * mf;
  const Recompute& r = p.recompute;

  // Kept by one layer for its backward (MlaAttention, TransformerLayer, SwigluMlp, MoeBlock), not
  // its output (the chunk's).
  Bytes layer_kept(bool dense) const {
    Bytes b;
    if (c.workload.attention) {
      if (!r.layernorm) b.in += h;  // xn
      b.b4 += 1;                    // rstd
      if (m.q_lora_rank) {
        b.el += ql;  // cq
        b.in += ql;  // cqn
        b.b4 += 1;
      }
      if (!r.mla_up_proj)
        b.in += heads * dq + (p.separate_k_v ? heads * (dq + dv) : heads * (dn + dv));
      b.el += kvl + dr;  // ckv, krope
      b.in += kvl;       // ckvn
      b.b4 += 1;
      if (!r.core_attn) {
        b.in += heads * dv;  // o
        b.b4 += heads;       // stats
      }
    }
    b.el += h;                    // x1
    if (!r.layernorm) b.in += h;  // xn2
    b.b4 += 1;
    if (dense) {
      if (!r.mlp) {
        b.el += 2 * f;  // gate_up
        b.in += f;      // act
      }
      return b;
    }
    b.b4 += E + 5 * k;   // scores; indices, row_token, row_slot, expert_source, expert_weight
    b.saved += k * h;    // xe
    b.el += 2 * k * mf;  // gate_up
    if (!r.moe_act) b.saved += k * mf;  // act
    if (sf > 0 && !r.shared_experts) {
      b.el += 2 * sf;
      b.in += sf;
    }
    return b;
  }

  // Shared scratch per token, by module; `comm` the all-to-all buffers among them.
  Bytes attention_scratch() const {
    Bytes b;
    b.el += 2 * (kvl + dr) + heads * dv + heads * dq + heads * (dn + dv) + dr + 2 * kvl + h;
    if (m.q_lora_rank) b.el += 2 * ql;
    if (r.layernorm) b.el += h;
    if (r.mla_up_proj) b.el += heads * dq + heads * (dn + dv);
    if (r.core_attn) {
      b.el += heads * dv;
      b.b4 += heads;
    }
    return b;
  }
  Bytes layer_scratch() const {
    Bytes b;
    b.el += 2 * h + (c.workload.attention ? h : 0) + (r.layernorm ? h : 0);  // y, dxn2, dx1, xn2
    return b;
  }
  Bytes mlp_scratch(double width, bool recomputed) const {
    Bytes b;
    b.el += 3 * width + (recomputed ? 3 * width : 0);  // dact, dgate_up; gate_up, act
    return b;
  }
  double moe_comm() const { return 6 * k * h; }  // send, recv, yr, dy_send, dyr, dx_send
  Bytes moe_scratch() const {
    Bytes b;
    // weights, row_weight, recv_weight, dwe, dwr, dw_rows, dweights, iota; logits, dlogits
    b.b4 += 8 * k + 2 * E;
    b.el += 4 * k * h;  // ye, dye, dxe, dxr
    // act_u, dact_w, dact, dgate_up; act where it is not kept; xe where its FP8 copy is.
    const bool fp8_saved = p.fp8_saved_inputs && c.precision == Precision::fp8;
    b.el += 5 * k * mf + (r.moe_act || fp8_saved ? k * mf : 0) + (fp8_saved ? k * h : 0);
    if (sf > 0) b.el += h;  // shared_out
    return b;
  }
};

// The most bytes of micro-batch chunks `pp_rank` holds at once (slot_bytes: one slot of each
// chunk), and how many slots it then holds: a chunk's slot is made by the receive of its input
// (or its forward, on the first stage) and freed after its backward, as TrainingStep does.
std::pair<double, int> slots_at_peak(const PipelineShape& shape, int pp_rank,
                                     const std::vector<double>& slot_bytes) {
  std::vector<std::set<int>> held(static_cast<std::size_t>(shape.vp));
  double now = 0, most = 0;
  int count = 0, at_most = 0;
  const auto take = [&](int chunk, int mb) {
    if (!held[static_cast<std::size_t>(chunk)].insert(mb).second) return;
    now += slot_bytes[static_cast<std::size_t>(chunk)];
    ++count;
    if (now > most) {
      most = now;
      at_most = count;
    }
  };
  const std::vector<PipelineOp> schedule = pipeline_schedule(shape, pp_rank);
  for (const P2PBatch& b : p2p_batches(shape, pp_rank)) {
    for (const PipelineTransfer& t : b.recv) {
      if (t.activation) take(t.to / shape.pp, t.microbatch);
    }
    for (std::size_t i = b.first_pass; i < b.first_pass + b.passes; ++i) {
      const PipelineOp& op = schedule[i];
      if (op.forward) {
        take(op.chunk, op.microbatch);
      } else if (held[static_cast<std::size_t>(op.chunk)].erase(op.microbatch) > 0) {
        now -= slot_bytes[static_cast<std::size_t>(op.chunk)];
        --count;
      }
    }
  }
  return {most, at_most};
}

}  // namespace

double fp8_saved_input_bytes(Fp8Recipe r, bool narrow_storage) {
  switch (r) {
    case Fp8Recipe::mxfp8:
      return 1.0 + (narrow_storage ? 1.0 : 4.0) / 32.0;
    case Fp8Recipe::blockwise:
      return 1.0 + 4.0 / 128.0;
    case Fp8Recipe::tensor:
      break;
  }
  return 1.0;
}

ActivationPolicy run_policy(const RunConfig& c) {
  ActivationPolicy p;
  p.recompute = c.workload.recompute;
  p.fp8_weight_copies = c.fp8_weight_copies != Fp8WeightCopies::per_gemm;
  p.fp8_saved_inputs = c.fp8_saved_inputs;
  return p;
}

ActivationPolicy transformer_engine_policy(const RunConfig& c) {
  ActivationPolicy te = run_policy(c);
  te.separate_k_v = true;
  te.fp8_saved_inputs = true;
  te.fp8_all_inputs = true;
  te.fp8_weight_copies = false;
  if (c.recipe && recipe(*c.recipe).main_grads_dtype == "bf16") te.main_grad_bytes = 2;
  return te;
}

Fp8WeightCopies resolve_fp8_weight_copies(const RunConfig& c, std::size_t bytes_per_element,
                                          double available_bytes) {
  if (c.fp8_weight_copies != Fp8WeightCopies::automatic) return c.fp8_weight_copies;
  if (c.precision != Precision::fp8) return Fp8WeightCopies::kept;
  RunConfig kept = c;
  kept.fp8_weight_copies = Fp8WeightCopies::kept;
  if (estimate_memory(kept, bytes_per_element).total() <= available_bytes) {
    return Fp8WeightCopies::kept;
  }
  RunConfig none = c;
  none.fp8_weight_copies = Fp8WeightCopies::per_gemm;
  return estimate_memory(none, bytes_per_element).total() <= available_bytes
             ? Fp8WeightCopies::per_gemm
             : Fp8WeightCopies::kept;
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
                                               const ActivationPolicy& policy) {
  const ModelConfig& m = c.model;
  const Workload& w = c.workload;
  const ParamCounts pc = param_counts(m);
  const double bpe = static_cast<double>(bytes_per_element);
  const StepShape s(c, policy);
  const double h = s.h;
  const double tokens = static_cast<double>(w.tokens_per_rank());  // one micro-batch
  const PipelineLayout layout = pipeline_layout(c);
  const PipelineShape shape = pipeline_shape(c);
  const double rows = tokens * static_cast<double>(shape.microbatches);
  const double experts_local = static_cast<double>(m.n_routed_experts / c.layout.ep);
  const bool fp8 = c.precision == Precision::fp8;
  const double in8 = fp8_saved_input_bytes(c.fp8_recipe, bytes_per_element < 4);
  const double gin = fp8 && policy.fp8_all_inputs ? in8 : bpe;
  const double gsaved = fp8 && (policy.fp8_saved_inputs || policy.fp8_all_inputs) ? in8 : bpe;
  const auto bytes = [&](const Bytes& b) {
    return b.saved * gsaved + b.in * gin + b.el * bpe + b.b4 * 4.0;
  };
  const double vocab = static_cast<double>(m.vocab_size);
  const auto layer_params = [&](int layer, double& dense, double& experts) {
    const bool is_dense = is_dense_layer(c, layer);
    dense += static_cast<double>(layer_attention_params(m, pc, w.attention)) +
             static_cast<double>(is_dense ? pc.dense_mlp_per_layer : pc.shared_experts + pc.router);
    if (!is_dense) experts += experts_local * static_cast<double>(pc.expert);
  };

  std::vector<StageMemory> out;
  for (int r = 0; r < shape.pp; ++r) {
    StageMemory st;
    st.pp_rank = r;
    double dense = 0, local_experts = 0;
    bool any_dense = false, any_moe = false;
    std::vector<double> slot_bytes;
    MemoryEstimate& e = st.memory;
    for (int ch = 0; ch < shape.vp; ++ch) {
      const PipelineStage& ps = layout.stage(r, ch);
      st.stages.push_back(layout.stage_index(r, ch));
      // One slot of this chunk: its input, and each layer's output and what it keeps.
      double slot = tokens * h * bpe;
      for (int l = ps.first_layer; l < ps.first_layer + ps.layers; ++l) {
        ++st.layers;
        const bool is_dense = is_dense_layer(c, l);
        (is_dense ? any_dense : any_moe) = true;
        layer_params(l, dense, local_experts);
        slot += tokens * (h * bpe + bytes(s.layer_kept(is_dense)));
      }
      if (ps.embedding && w.head) st.embedding = true;
      if (ps.loss && w.head) {
        st.loss = true;
        st.mtp = static_cast<int>(w.mtp);
        // The final norm, the output head's logits (overwritten by their gradient); per MTP
        // depth its embedded tokens, norms, projection, output and logits, and its layer's.
        slot += tokens * (h * bpe + 4 + vocab * bpe);
        for (int k = 0; k < w.mtp; ++k) {
          const int l = mtp_layer(w, k);
          const bool is_dense = is_dense_layer(c, l);
          (is_dense ? any_dense : any_moe) = true;
          slot += tokens * (6 * h * bpe + 3 * 4 + vocab * bpe + bytes(s.layer_kept(is_dense)));
        }
      }
      slot_bytes.push_back(slot);
    }
    std::tie(e.activations, st.in_flight) = slots_at_peak(shape, r, slot_bytes);
    // Parameters as ParamStore lays them out: the embedding where the first stage is, and a copy
    // where the MTP layers embed the next tokens; the final norm, the MTP layers and the output
    // head with the loss.
    if (w.head && (st.embedding || (st.loss && w.mtp > 0))) {
      st.embedding = true;
      dense += static_cast<double>(pc.embedding);
    }
    if (st.loss) {
      dense += static_cast<double>(pc.output_head);
      for (int k = 0; k < w.mtp; ++k) {
        dense += static_cast<double>(pc.mtp_own);
        layer_params(mtp_layer(w, k), dense, local_experts);
      }
    }
    st.params = dense + local_experts;
    e.weights = st.params * bpe +
                static_cast<double>(std::max(layer_count(w), 1)) * s.E * 4.0;  // router biases
    e.gradients = st.params * policy.main_grad_bytes;  // main gradients, over the micro-batches
    const bool zero1 = c.grad_reduce == GradReduce::reduce_scatter;
    const double dense_n = zero1 ? dense / static_cast<double>(c.layout.dp()) : dense;
    const double expert_n =
        zero1 ? local_experts / static_cast<double>(c.layout.edp()) : local_experts;
    if (zero1) e.optimizer += (dense_n + expert_n) * (4.0 + bpe);  // gradient and param shards
    if (c.optimizer == Optimizer::adamw) {
      // The moments (FP32, or with --optimizer-state-dtype bf16 the storage type), and FP32
      // master weights of narrower storage.
      const double moment =
          c.optimizer_state_dtype == OptimizerStateDtype::bf16 ? std::min(bpe, 4.0) : 4.0;
      e.optimizer += (dense_n + expert_n) * (2 * moment + (bytes_per_element < 4 ? 4.0 : 0.0));
    }

    // The scratch the layers share, at its largest use, and the step's own buffers.
    Bytes scratch;
    if (st.layers + (st.loss ? st.mtp : 0) > 0) {
      if (w.attention) scratch += s.attention_scratch();
      scratch += s.layer_scratch();
    }
    if (any_dense) scratch += s.mlp_scratch(s.f, policy.recompute.mlp);
    if (any_moe) {
      scratch += s.moe_scratch();
      if (s.sf > 0) scratch += s.mlp_scratch(s.sf, policy.recompute.shared_experts);
      e.communication += tokens * s.moe_comm() * bpe;
    }
    if (st.loss) scratch.el += 4 * h;  // the head's gradients
    e.workspace += tokens * (scratch.el * bpe + scratch.b4 * 4.0);
    e.workspace += 2 * tokens * h * bpe;                        // two gradients between layers
    if (shape.pp > 1) e.communication += 2 * tokens * h * bpe;  // received and sent gradients
    const bool first = r == 0, last = r == shape.pp - 1;
    if (w.head) {
      if (first || last) e.workspace += rows * static_cast<double>(w.mtp + 2) * 4.0;  // token ids
      if (last) e.workspace += rows * static_cast<double>(w.mtp + 1) * 4.0 + tokens * h * bpe;
    } else {
      const double per = rows * h * bpe * (c.verify ? 2.0 : 1.0);  // inputs (and their gradients)
      e.workspace += (first ? per : 0.0) + (last ? per : 0.0);
    }

    // The backend's own: attention's scores for one (sequence, head) at a time in FP32, and with
    // --precision fp8 the quantised operands of one GEMM and every weight's copies kept for the
    // step (two layouts; one byte each with narrow (GPU) storage, FP32 values with FP32 storage,
    // the cpu emulation). An upper bound: norms, the router and the embedding are counted
    // although not quantised.
    if (w.attention) {
      e.backend += static_cast<double>(w.seq_len) * static_cast<double>(w.seq_len) * 4.0;
    }
    if (c.precision == Precision::fp8) {
      e.backend += fp8_operand_bytes(c);
      if (policy.fp8_weight_copies) e.backend += st.params * (bytes_per_element < 4 ? 2.0 : 8.0);
    }
    out.push_back(std::move(st));
  }
  return out;
}

std::vector<StageMemory> estimate_stage_memory(const RunConfig& c, std::size_t bytes_per_element) {
  return estimate_stage_memory(c, bytes_per_element, run_policy(c));
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

std::vector<std::string> memory_gaps(const RunConfig& c, const std::vector<std::string>& offload) {
  std::vector<std::string> gaps;
  const auto largest = [&](const ActivationPolicy& p) {
    MemoryEstimate top;
    for (const StageMemory& s : estimate_stage_memory(c, 2, p)) {
      if (s.memory.total() > top.total()) top = s.memory;
    }
    return top;
  };
  const ActivationPolicy own = run_policy(c);
  const MemoryEstimate mine = largest(own);
  if (c.precision == Precision::fp8) {
    ActivationPolicy te = own;
    te.fp8_all_inputs = true;
    gaps.push_back(
        std::string("FP8 copies of GEMM inputs for the backward (Transformer Engine keeps every "
                    "linear layer's and core attention's in FP8; moebench ") +
        (own.fp8_saved_inputs ? "only the routed experts', the rest" : "none of them, all") +
        " in BF16): " + format_gib(mine.activations - largest(te).activations) +
        " of the largest rank's activations");
    te = own;
    te.fp8_weight_copies = false;
    if (own.fp8_weight_copies) {
      gaps.push_back(
          "FP8 primary weights (--fp8-param-gather; moebench keeps every weight's two "
          "quantised copies for the step besides its BF16 weights): " +
          format_gib(mine.backend - largest(te).backend));
    }
  }
  for (const std::string& o : offload) {
    gaps.push_back("offload of " + o +
                   " to host memory (refused by `moebench run`; this estimate keeps it on the "
                   "GPU)");
  }
  return gaps;
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
  j["backend_bytes"] = m.backend;
  j["tensors_bytes"] = m.tensors();
  j["total_bytes"] = m.total();
  return j;
}

}  // namespace moebench
