// The model's shapes, in the key names of a Hugging Face DeepSeek-V3-family config.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace moebench {

struct ModelConfig {
  std::string name;  // preset name, or the config file's path
  std::int64_t hidden_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t first_k_dense_replace = 0;
  std::int64_t intermediate_size = 0;      // dense MLP
  std::int64_t moe_intermediate_size = 0;  // each routed expert and each shared expert
  std::int64_t n_routed_experts = 0;
  std::int64_t n_shared_experts = 0;
  std::int64_t num_experts_per_tok = 0;  // top-k
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  // The router's own arithmetic (harness/math/route.hpp), DeepSeek-V3's unless the config says:
  // scoring_func sigmoid|softmax, topk_method noaux_tc|greedy|group_limited_greedy, and whether
  // the chosen scores are normalised to sum 1 (norm_topk_prob).
  std::string scoring_func = "sigmoid";
  std::string topk_method = "noaux_tc";
  bool norm_topk_prob = true;
  std::optional<std::int64_t> q_lora_rank;  // null: q is projected directly from the hidden state
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t vocab_size = 0;
  std::int64_t num_nextn_predict_layers = 0;  // MTP layers
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;

  std::int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  std::int64_t moe_layers() const { return num_hidden_layers - first_k_dense_replace; }
};

struct PresetInfo {
  std::string name;
  std::string description;
  std::int64_t default_seq_len = 4096;  // --seq-len when not given
};

// Names and one-line descriptions of the built-in presets.
std::vector<PresetInfo> preset_list();
// A preset by name; UsageError naming the valid presets otherwise.
ModelConfig preset(const std::string& name);

// Parses a Hugging Face config.json of the DeepSeek-V3 family. Unknown keys are ignored; a
// missing required key, a wrong type or an inconsistent value is a UsageError naming the file and
// the key. `source` names the file in messages. `warnings` (when given) gets one line per unknown
// key within kConfigKeyNearMiss edits of a key moebench reads (a misspelling: the run goes on).
inline constexpr std::size_t kConfigKeyNearMiss = 2;
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source,
                                   std::vector<std::string>* warnings = nullptr);
// The same from a file; a key given twice in any object is a UsageError naming it.
ModelConfig load_model_config(const std::string& path,
                              std::vector<std::string>* warnings = nullptr);

// Checks internal consistency (positive sizes, experts divisible into groups, top-k within the
// selected groups, ...). Throws UsageError naming `source` and the offending key.
void validate(const ModelConfig& m, const std::string& source);

nlohmann::json to_json(const ModelConfig& m);

}  // namespace moebench
