// The parameters of the instantiated stack, their gradients, and where they live. Dense
// parameters (attention, norms, dense MLPs, routers, shared experts) are replicated over the
// data-parallel group;
// routed experts are split over the expert-parallel group. With pipeline parallelism a rank holds
// only its stages' layers (layer indices stay global). Each group lives in one flat buffer,
// as in Megatron's distributed optimizer, so gradient reduction is one collective per group and
// ZeRO-1 shards are plain ranges. Every value is a pure function of (seed, layer, tensor, global
// expert), so any rank and the --verify reference build the same weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/compute/compute.hpp"
#include "harness/parallel/topology.hpp"
#include "workloads/config/run_config.hpp"

namespace moebench {

enum class ParamKind : int {
  attn_norm,
  wq_a,
  q_norm,
  wq_b,
  wq,  // direct q projection (q_lora_rank null)
  wkv_a,
  kv_norm,
  wkv_b,
  wo,
  mlp_norm,
  dense_gate_up,
  dense_down,
  router,
  shared_gate_up,
  shared_down,
  expert_gate_up,
  expert_down,
  // The model's ends (--head on) and the MTP layers' own parameters.
  embedding,    // vocab x h, layer kEmbeddingLayer
  final_norm,   // 1 x h, layer final_norm_layer()
  output_head,  // h x vocab, layer output_head_layer()
  mtp_enorm,    // the next token's embedding's norm
  mtp_hnorm,    // the previous depth's hidden state's norm
  mtp_eh_proj,  // 2h x h: [enorm(e); hnorm(h)] -> h
  mtp_norm,     // the MTP layer's output norm, before the shared head
  count
};
const char* param_kind_name(ParamKind k);

enum class ParamGroup { dense, expert };

struct ParamInfo {
  int layer = 0;  // a decoder or MTP layer, or one of the ends' indices above
  ParamKind kind = ParamKind::attn_norm;
  int expert = -1;  // global expert id for routed experts
  ParamGroup group = ParamGroup::dense;
  std::int64_t rows = 0;  // weights are (in, out): y = x W
  std::int64_t cols = 0;
  std::int64_t offset = 0;  // elements into the group's flat buffer
  std::int64_t numel() const { return rows * cols; }
  std::string name() const;  // e.g. "layer2.expert5.gate_up"
};

// Where every parameter sits in its group's flat buffer: a pure function of the configuration
// and the rank's place, so the --verify reference's layout can be derived on any rank.
struct ParamLayout {
  std::vector<ParamInfo> infos;
  std::int64_t numel[2] = {0, 0};  // per ParamGroup, unpadded
};
ParamLayout make_param_layout(const RunConfig& config, const Topology& topo);

class ParamStore {
 public:
  // Lays out and allocates parameters and gradients (contents unset until initialize()).
  ParamStore(Compute& compute, const RunConfig& config, const Topology& topo);

  void initialize(std::uint64_t seed);
  void zero_grads();

  Mat param(int layer, ParamKind kind, int local_expert = -1) const;
  Mat grad(int layer, ParamKind kind, int local_expert = -1) const;
  Mat router_bias(int layer) const;  // selection bias (not trained by gradients)
  bool has(int layer, ParamKind kind) const;

  const std::vector<ParamInfo>& infos() const { return infos_; }
  // Flat buffers, padded to a multiple of the reducing group's size (the data group for dense,
  // the expert-data group for experts) so that reduce-scatter shards are equal.
  Mat flat_params(ParamGroup g) const;
  Mat flat_grads(ParamGroup g) const;
  std::int64_t numel(ParamGroup g) const;  // unpadded
  std::int64_t padded_numel(ParamGroup g) const;

  bool is_dense_layer(int layer) const { return moebench::is_dense_layer(config_, layer); }
  int layers() const { return layers_; }  // one past the highest layer index
  int local_experts() const { return local_experts_; }
  int first_expert() const { return first_expert_; }

 private:
  int index(int layer, ParamKind kind, int local_expert) const;

  Compute& compute_;
  RunConfig config_;  // a copy: what the layout was made from
  int layers_ = 0;
  int local_experts_ = 0;
  int first_expert_ = 0;
  std::vector<ParamInfo> infos_;  // of the layout
  // [layer + 1][kind] -> info index, -1 when absent (row 0: the embedding's layer).
  std::vector<int> lookup_;
  std::vector<std::vector<int>> expert_lookup_;  // [layer] -> [local expert * 2 + (0|1)]
  std::int64_t numel_[2] = {0, 0};
  std::int64_t padded_[2] = {0, 0};
  Tensor params_[2];
  Tensor grads_[2];
  Tensor router_bias_;  // layers x experts
};

}  // namespace moebench
