#include "workloads/params/parameters.hpp"

#include <algorithm>
#include <cmath>

#include "harness/math/random.hpp"

namespace moebench {

namespace {
constexpr int kKinds = static_cast<int>(ParamKind::count);
constexpr std::uint64_t kRouterBiasTensor = 100;

bool is_norm(ParamKind k) {
  return k == ParamKind::attn_norm || k == ParamKind::q_norm || k == ParamKind::kv_norm ||
         k == ParamKind::mlp_norm || k == ParamKind::final_norm || k == ParamKind::mtp_enorm ||
         k == ParamKind::mtp_hnorm || k == ParamKind::mtp_norm;
}

std::int64_t round_up(std::int64_t n, std::int64_t m) {
  return (n + m - 1) / m * m;
}
}  // namespace

const char* param_kind_name(ParamKind k) {
  static const char* names[] = {"attn_norm", "wq_a",           "q_norm",        "wq_b",
                                "wq",        "wkv_a",          "kv_norm",       "wkv_b",
                                "wo",        "mlp_norm",       "dense_gate_up", "dense_down",
                                "router",    "shared_gate_up", "shared_down",   "gate_up",
                                "down",      "embedding",      "final_norm",    "output_head",
                                "enorm",     "hnorm",          "eh_proj",       "mtp_norm"};
  static_assert(sizeof(names) / sizeof(names[0]) == kKinds);
  return names[static_cast<int>(k)];
}

std::string ParamInfo::name() const {
  if (kind == ParamKind::embedding || kind == ParamKind::final_norm ||
      kind == ParamKind::output_head) {
    return param_kind_name(kind);
  }
  std::string n = "layer" + std::to_string(layer) + ".";
  if (expert >= 0) n += "expert" + std::to_string(expert) + ".";
  return n + param_kind_name(kind);
}

namespace {
class LayoutBuilder {
 public:
  explicit LayoutBuilder(ParamLayout& out) : out_(out) {}
  void add(int layer, ParamKind kind, int expert, std::int64_t rows, std::int64_t cols) {
    ParamInfo info;
    info.layer = layer;
    info.kind = kind;
    info.expert = expert;
    info.group = expert >= 0 ? ParamGroup::expert : ParamGroup::dense;
    info.rows = rows;
    info.cols = cols;
    info.offset = out_.numel[static_cast<int>(info.group)];
    out_.numel[static_cast<int>(info.group)] += info.numel();
    out_.infos.push_back(info);
  }

 private:
  ParamLayout& out_;
};
}  // namespace

ParamLayout make_param_layout(const RunConfig& config, const Topology& topo) {
  const ModelConfig& m = config.model;
  const Workload& w = config.workload;
  const std::int64_t h = m.hidden_size, H = m.num_attention_heads;
  const std::int64_t dq = m.qk_head_dim(), dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim;
  const std::int64_t dv = m.v_head_dim, kvl = m.kv_lora_rank, mf = m.moe_intermediate_size;
  const int experts = static_cast<int>(m.n_routed_experts);
  ParamLayout layout;
  LayoutBuilder b(layout);
  const auto transformer = [&](int l) {
    if (w.attention) {
      b.add(l, ParamKind::attn_norm, -1, 1, h);
      if (m.q_lora_rank) {
        b.add(l, ParamKind::wq_a, -1, h, *m.q_lora_rank);
        b.add(l, ParamKind::q_norm, -1, 1, *m.q_lora_rank);
        b.add(l, ParamKind::wq_b, -1, *m.q_lora_rank, H * dq);
      } else {
        b.add(l, ParamKind::wq, -1, h, H * dq);
      }
      b.add(l, ParamKind::wkv_a, -1, h, kvl + dr);
      b.add(l, ParamKind::kv_norm, -1, 1, kvl);
      b.add(l, ParamKind::wkv_b, -1, kvl, H * (dn + dv));
      b.add(l, ParamKind::wo, -1, H * dv, h);
    }
    b.add(l, ParamKind::mlp_norm, -1, 1, h);
    if (is_dense_layer(config, l)) {
      b.add(l, ParamKind::dense_gate_up, -1, h, 2 * m.intermediate_size);
      b.add(l, ParamKind::dense_down, -1, m.intermediate_size, h);
      return;
    }
    b.add(l, ParamKind::router, -1, h, m.n_routed_experts);
    if (m.n_shared_experts > 0) {
      b.add(l, ParamKind::shared_gate_up, -1, h, 2 * m.n_shared_experts * mf);
      b.add(l, ParamKind::shared_down, -1, m.n_shared_experts * mf, h);
    }
    for (int e = 0; e < topo.local_experts(experts); ++e) {
      const int global = topo.first_local_expert(experts) + e;
      b.add(l, ParamKind::expert_gate_up, global, h, 2 * mf);
      b.add(l, ParamKind::expert_down, global, mf, h);
    }
  };
  // Only the layers of this rank's pipeline stages, in ascending layer order (chunk by chunk).
  const PipelineLayout pipeline = pipeline_layout(config);
  const int pp_rank = topo.group(Group::pipeline).rank;
  bool embeds = false, loss = false;
  for (int c = 0; c < pipeline.vp; ++c) {
    embeds = embeds || pipeline.stage(pp_rank, c).embedding;
    loss = loss || pipeline.stage(pp_rank, c).loss;
  }
  // The MTP layers embed the next tokens with the same table: the last stage holds a copy, which
  // the embedding group keeps equal (Megatron-Core builds the embedding where MTP runs too).
  if (embeds || (loss && w.mtp > 0))
    b.add(kEmbeddingLayer, ParamKind::embedding, -1, m.vocab_size, h);
  for (int l : pipeline.layers_of_rank(pp_rank)) transformer(l);
  if (!loss) return layout;
  b.add(final_norm_layer(w), ParamKind::final_norm, -1, 1, h);
  for (int k = 0; k < w.mtp; ++k) {
    const int l = mtp_layer(w, k);
    b.add(l, ParamKind::mtp_enorm, -1, 1, h);
    b.add(l, ParamKind::mtp_hnorm, -1, 1, h);
    b.add(l, ParamKind::mtp_eh_proj, -1, 2 * h, h);
    transformer(l);
    b.add(l, ParamKind::mtp_norm, -1, 1, h);
  }
  b.add(output_head_layer(w), ParamKind::output_head, -1, h, m.vocab_size);
  return layout;
}

ParamStore::ParamStore(Compute& compute, const RunConfig& config, const Topology& topo)
    : compute_(compute), config_(config) {
  const ModelConfig& m = config.model;
  layers_ = layer_count(config.workload);
  local_experts_ = topo.local_experts(static_cast<int>(m.n_routed_experts));
  first_expert_ = topo.first_local_expert(static_cast<int>(m.n_routed_experts));
  ParamLayout layout = make_param_layout(config, topo);
  infos_ = std::move(layout.infos);
  lookup_.assign(static_cast<std::size_t>(layers_ + 1) * kKinds, -1);
  expert_lookup_.resize(layers_);
  for (int i = 0; i < static_cast<int>(infos_.size()); ++i) {
    const ParamInfo& p = infos_[i];
    if (p.expert >= 0) {
      expert_lookup_[p.layer].push_back(i);  // gate_up, down per local expert, in order
    } else {
      lookup_[static_cast<std::size_t>(p.layer + 1) * kKinds + static_cast<int>(p.kind)] = i;
    }
  }

  // Padded to the size of the group each buffer is reduced over, so ZeRO-1 shards are equal.
  const std::int64_t group_size[2] = {topo.group(Group::data).size,
                                      topo.group(Group::expert_data).size};
  for (int g = 0; g < 2; ++g) {
    numel_[g] = layout.numel[g];
    padded_[g] = round_up(std::max<std::int64_t>(numel_[g], 1), group_size[g]);
    params_[g] = compute_.alloc(padded_[g], 1);
    // FP32 gradients, accumulated over the micro-batches (Megatron's main grads).
    grads_[g] = compute_.alloc(padded_[g], 1, DType::f32);
  }
  router_bias_ = compute_.alloc(std::max(layers_, 1), m.n_routed_experts, DType::f32);
}

int ParamStore::index(int layer, ParamKind kind, int local_expert) const {
  MB_CHECK(layer >= kEmbeddingLayer && layer < layers_, "layer " << layer << " of " << layers_);
  if (kind == ParamKind::expert_gate_up || kind == ParamKind::expert_down) {
    MB_CHECK(local_expert >= 0 && local_expert < local_experts_,
             "local expert " << local_expert << " of " << local_experts_);
    return expert_lookup_[layer][local_expert * 2 + (kind == ParamKind::expert_down ? 1 : 0)];
  }
  const int idx = lookup_[static_cast<std::size_t>(layer + 1) * kKinds + static_cast<int>(kind)];
  MB_CHECK(idx >= 0, "layer " << layer << " has no parameter " << param_kind_name(kind));
  return idx;
}

bool ParamStore::has(int layer, ParamKind kind) const {
  if (layer < kEmbeddingLayer || layer >= layers_) return false;
  if (kind == ParamKind::expert_gate_up || kind == ParamKind::expert_down) {
    return layer >= 0 && !expert_lookup_[layer].empty();
  }
  return lookup_[static_cast<std::size_t>(layer + 1) * kKinds + static_cast<int>(kind)] >= 0;
}

namespace {
Mat view_of(const Tensor& flat, const ParamInfo& p) {
  return flat.view().row_slice(p.offset, p.numel()).reshaped(p.rows, p.cols);
}
}  // namespace

Mat ParamStore::param(int layer, ParamKind kind, int local_expert) const {
  const ParamInfo& p = infos_[index(layer, kind, local_expert)];
  return view_of(params_[static_cast<int>(p.group)], p);
}

Mat ParamStore::grad(int layer, ParamKind kind, int local_expert) const {
  const ParamInfo& p = infos_[index(layer, kind, local_expert)];
  return view_of(grads_[static_cast<int>(p.group)], p);
}

Mat ParamStore::router_bias(int layer) const {
  return router_bias_.view().row_slice(layer, 1);
}

Mat ParamStore::flat_params(ParamGroup g) const {
  return params_[static_cast<int>(g)].view();
}
Mat ParamStore::flat_grads(ParamGroup g) const {
  return grads_[static_cast<int>(g)].view();
}
std::int64_t ParamStore::numel(ParamGroup g) const {
  return numel_[static_cast<int>(g)];
}
std::int64_t ParamStore::padded_numel(ParamGroup g) const {
  return padded_[static_cast<int>(g)];
}

void ParamStore::initialize(std::uint64_t seed) {
  for (Tensor& t : params_) compute_.zero(t);  // the padding stays zero
  Tensor ones;
  for (const ParamInfo& p : infos_) {
    const Mat w = view_of(params_[static_cast<int>(p.group)], p);
    const std::uint64_t stream =
        tensor_stream(static_cast<std::uint64_t>(p.layer), static_cast<std::uint64_t>(p.kind),
                      static_cast<std::uint64_t>(p.expert + 1));
    if (is_norm(p.kind)) {
      // 1 + small noise: a norm weight of exactly 1 would hide a missing weight in a gradient.
      if (ones.empty() || ones.cols() < p.cols) {
        ones = compute_.alloc(1, p.cols);
        compute_.fill(ones, 1.0f);
      }
      compute_.fill_random(w, seed, stream, 0.1f);
      compute_.axpby(1.0f, ones.view().col_slice(0, p.cols), 1.0f, w);
    } else if (p.kind == ParamKind::embedding) {
      // Rows of the scale of the seeded input that stands in for them with --head off.
      compute_.fill_random(w, seed, stream, 1.0f);
    } else {
      // Uniform with variance 1/(3 fan-in): activations keep their scale through the stack.
      compute_.fill_random(w, seed, stream, 1.0f / std::sqrt(static_cast<float>(p.rows)));
    }
  }
  for (int l = 0; l < layers_; ++l) {
    compute_.fill_random(router_bias(l), seed,
                         tensor_stream(static_cast<std::uint64_t>(l), kRouterBiasTensor, 0), 0.05f);
  }
  zero_grads();
}

void ParamStore::zero_grads() {
  for (Tensor& t : grads_) compute_.zero(t);
}

}  // namespace moebench
