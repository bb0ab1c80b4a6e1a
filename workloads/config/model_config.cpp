#include "workloads/config/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"
#include "harness/core/json_excerpt.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/math/route.hpp"

namespace moebench {
namespace {

ModelConfig deepseek_v3() {
  ModelConfig m;
  m.name = "deepseek-v3";
  m.hidden_size = 7168;
  m.num_hidden_layers = 61;
  m.first_k_dense_replace = 3;
  m.intermediate_size = 18432;
  m.moe_intermediate_size = 2048;
  m.n_routed_experts = 256;
  m.n_shared_experts = 1;
  m.num_experts_per_tok = 8;
  m.n_group = 8;
  m.topk_group = 4;
  m.routed_scaling_factor = 2.5;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_nope_head_dim = 128;
  m.qk_rope_head_dim = 64;
  m.v_head_dim = 128;
  m.num_attention_heads = 128;
  m.vocab_size = 129280;
  m.num_nextn_predict_layers = 1;
  m.rms_norm_eps = 1e-6;
  m.rope_theta = 10000.0;
  return m;
}

// Same structure (dense prefix, shared expert, group-limited top-k, MLA with q_lora, MTP) at a
// size where a whole training step takes well under a second per rank on one CPU core.
ModelConfig deepseek_v3_tiny() {
  ModelConfig m;
  m.name = "deepseek-v3-tiny";
  m.hidden_size = 256;
  m.num_hidden_layers = 4;
  m.first_k_dense_replace = 1;
  m.intermediate_size = 512;
  m.moe_intermediate_size = 128;
  m.n_routed_experts = 16;
  m.n_shared_experts = 1;
  m.num_experts_per_tok = 4;
  m.n_group = 4;
  m.topk_group = 2;
  m.routed_scaling_factor = 2.5;
  m.q_lora_rank = 96;
  m.kv_lora_rank = 64;
  m.qk_nope_head_dim = 32;
  m.qk_rope_head_dim = 16;
  m.v_head_dim = 32;
  m.num_attention_heads = 4;
  m.vocab_size = 1024;
  m.num_nextn_predict_layers = 1;
  m.rms_norm_eps = 1e-6;
  m.rope_theta = 10000.0;
  return m;
}

std::string valid_preset_names() {
  std::string names;
  for (const auto& p : preset_list()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

// Parsing one config.json: each getter names the file and key, and says what is expected.
class Reader {
 public:
  Reader(const nlohmann::json& j, const std::string& source) : j_(j), source_(source) {}

  const nlohmann::json* find(const char* key) const {
    read_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  // Every key a getter asked for, found or not.
  const std::set<std::string>& read_keys() const { return read_; }

  // The missing-key hint quotes the DeepSeek-V3 value so the user knows what kind of value it is.
  [[noreturn]] void missing(const char* key, const std::string& example) const {
    throw UsageError(source_ + ": missing required key '" + key +
                     "' (the DeepSeek-V3 family's config.json has it; e.g. " + example + ")");
  }

  [[noreturn]] void wrong(const char* key, const char* expected, const nlohmann::json& v) const {
    throw UsageError(source_ + ": key '" + key + "' must be " + expected + ", got " +
                     json_excerpt(v));
  }

  std::int64_t integer(const char* key, std::int64_t example, bool allow_zero) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) missing(key, std::to_string(example));
    return integer_value(key, *v, allow_zero);
  }

  std::int64_t integer_or(const char* key, std::int64_t fallback, bool allow_zero) const {
    const nlohmann::json* v = find(key);
    return v == nullptr ? fallback : integer_value(key, *v, allow_zero);
  }

  std::int64_t integer_value(const char* key, const nlohmann::json& v, bool allow_zero) const {
    const char* expected = allow_zero ? "a non-negative integer" : "a positive integer";
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) wrong(key, expected, v);
    } else if (!v.is_number_integer()) {
      wrong(key, expected, v);
    }
    const auto x = v.get<std::int64_t>();
    if (x < 0 || (x == 0 && !allow_zero)) wrong(key, expected, v);
    return x;
  }

  double positive_number(const char* key, const std::string& example) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) missing(key, example);
    return positive_number_value(key, *v);
  }

  double positive_number_or(const char* key, double fallback) const {
    const nlohmann::json* v = find(key);
    return v == nullptr ? fallback : positive_number_value(key, *v);
  }

  // A string among `valid` (the first is the default when the key is absent).
  std::string choice_or(const char* key, const std::vector<std::string>& valid) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return valid.front();
    std::string names;
    for (const std::string& n : valid) names += (names.empty() ? "" : ", ") + n;
    if (!v->is_string()) wrong(key, ("one of " + names).c_str(), *v);
    const std::string x = v->get<std::string>();
    for (const std::string& n : valid) {
      if (x == n) return x;
    }
    throw UsageError(source_ + ": key '" + key + "' is '" + x +
                     "', which moebench does not run; valid: " + names);
  }

  bool boolean_or(const char* key, bool fallback) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) wrong(key, "true or false", *v);
    return v->get<bool>();
  }

  double positive_number_value(const char* key, const nlohmann::json& v) const {
    if (!v.is_number()) wrong(key, "a positive number", v);
    const auto x = v.get<double>();
    if (!(x > 0) || !std::isfinite(x)) wrong(key, "a positive number", v);
    return x;
  }

 private:
  const nlohmann::json& j_;
  const std::string& source_;
  mutable std::set<std::string> read_;
};

// Levenshtein distance, stopping early: anything past `limit` is limit + 1.
std::size_t edit_distance(const std::string& a, const std::string& b, std::size_t limit) {
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) return limit + 1;
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    std::size_t best = row[0];
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
      best = std::min(best, row[j]);
    }
    if (best > limit) return limit + 1;
  }
  return std::min(row[b.size()], limit + 1);
}

// A key moebench does not read that is a near miss of one it does: a misspelling that would
// otherwise be ignored without a word (a misspelt num_nextn_predict_layers drops the MTP layer).
std::vector<std::string> near_misses(const nlohmann::json& j, const Reader& r,
                                     const std::string& source) {
  std::vector<std::string> out;
  for (const auto& [key, value] : j.items()) {
    if (r.read_keys().count(key) > 0) continue;
    for (const std::string& known : r.read_keys()) {
      const std::size_t d = edit_distance(key, known, kConfigKeyNearMiss);
      if (d <= kConfigKeyNearMiss) {
        out.push_back(source + ": unknown key '" + key + "' is " + std::to_string(d) + " edit" +
                      (d == 1 ? "" : "s") + " from '" + known +
                      "', which moebench reads; it is ignored (did you mean '" + known + "'?)");
        break;
      }
    }
  }
  return out;
}

[[noreturn]] void invalid(const std::string& source, const std::string& what) {
  throw UsageError(source + ": " + what);
}

void require_positive(const std::string& source, const char* key, std::int64_t v) {
  if (v < 1)
    invalid(source, "key '" + std::string(key) + "' must be >= 1, got " + std::to_string(v));
}

void require_non_negative(const std::string& source, const char* key, std::int64_t v) {
  if (v < 0)
    invalid(source, "key '" + std::string(key) + "' must be >= 0, got " + std::to_string(v));
}

}  // namespace

std::vector<PresetInfo> preset_list() {
  return {
      {"deepseek-v3",
       "DeepSeek-V3 671B: hidden 7168, 61 layers (3 dense + 58 MoE), 256 routed experts top-8 in "
       "8 groups (4 selected) + 1 shared, MLA with 128 heads, 1 MTP layer",
       4096},
      {"deepseek-v3-tiny",
       "DeepSeek-V3's structure scaled down for CPU tests: hidden 256, 4 layers (1 dense + 3 MoE), "
       "16 routed experts top-4 in 4 groups (2 selected) + 1 shared, MLA with 4 heads; "
       "seq 128 by default",
       128},
  };
}

ModelConfig preset(const std::string& name) {
  if (name == "deepseek-v3") return deepseek_v3();
  if (name == "deepseek-v3-tiny") return deepseek_v3_tiny();
  throw UsageError("unknown model preset '" + name + "'; valid: " + valid_preset_names());
}

ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source,
                                   std::vector<std::string>* warnings) {
  if (!j.is_object()) {
    throw UsageError(source + ": expected a JSON object (a Hugging Face config.json), got " +
                     std::string(j.type_name()));
  }
  const ModelConfig ex = deepseek_v3();  // example values for messages
  const Reader r(j, source);
  ModelConfig m;
  m.name = source;
  m.hidden_size = r.integer("hidden_size", ex.hidden_size, false);
  m.num_hidden_layers = r.integer("num_hidden_layers", ex.num_hidden_layers, false);
  m.first_k_dense_replace = r.integer("first_k_dense_replace", ex.first_k_dense_replace, true);
  m.intermediate_size = r.integer("intermediate_size", ex.intermediate_size, false);
  m.moe_intermediate_size = r.integer("moe_intermediate_size", ex.moe_intermediate_size, false);
  m.n_routed_experts = r.integer("n_routed_experts", ex.n_routed_experts, false);
  m.n_shared_experts = r.integer("n_shared_experts", ex.n_shared_experts, true);
  m.num_experts_per_tok = r.integer("num_experts_per_tok", ex.num_experts_per_tok, false);
  m.n_group = r.integer("n_group", ex.n_group, false);
  m.topk_group = r.integer("topk_group", ex.topk_group, false);
  m.routed_scaling_factor = r.positive_number("routed_scaling_factor", "2.5");
  // DeepSeek-V3's routing unless the config names another (V2: softmax, group_limited_greedy, no
  // normalisation; V2-Lite: softmax, greedy, no normalisation).
  m.scoring_func = r.choice_or("scoring_func", {"sigmoid", "softmax"});
  m.topk_method = r.choice_or("topk_method", {"noaux_tc", "greedy", "group_limited_greedy"});
  m.norm_topk_prob = r.boolean_or("norm_topk_prob", true);
  const nlohmann::json* q_lora = r.find("q_lora_rank");
  if (q_lora == nullptr) r.missing("q_lora_rank", "1536, or null for a direct q projection");
  if (!q_lora->is_null()) m.q_lora_rank = r.integer_value("q_lora_rank", *q_lora, false);
  m.kv_lora_rank = r.integer("kv_lora_rank", ex.kv_lora_rank, false);
  m.qk_nope_head_dim = r.integer("qk_nope_head_dim", ex.qk_nope_head_dim, false);
  m.qk_rope_head_dim = r.integer("qk_rope_head_dim", ex.qk_rope_head_dim, false);
  m.v_head_dim = r.integer("v_head_dim", ex.v_head_dim, false);
  m.num_attention_heads = r.integer("num_attention_heads", ex.num_attention_heads, false);
  m.vocab_size = r.integer("vocab_size", ex.vocab_size, false);
  m.num_nextn_predict_layers = r.integer_or("num_nextn_predict_layers", 0, true);
  m.rms_norm_eps = r.positive_number_or("rms_norm_eps", m.rms_norm_eps);
  m.rope_theta = r.positive_number_or("rope_theta", m.rope_theta);
  validate(m, source);
  if (warnings != nullptr) *warnings = near_misses(j, r, source);
  return m;
}

ModelConfig load_model_config(const std::string& path, std::vector<std::string>* warnings) {
  // Opened once, without blocking on a FIFO or device, and refused unless a regular file.
  const std::string text = read_regular_file(
      path, "give the path of a config.json, or a preset: " + valid_preset_names());
  nlohmann::json j;
  // A key given twice would silently take its last value: refused, naming it. The parser's
  // callback sees each object's keys in order, one set per open object.
  std::vector<std::set<std::string>> open;
  std::string twice;
  const nlohmann::json::parser_callback_t keys = [&](int, nlohmann::json::parse_event_t event,
                                                     nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open.emplace_back();
    if (event == E::object_end && !open.empty()) open.pop_back();
    if (event == E::key && !open.empty() && !open.back().insert(parsed.get<std::string>()).second &&
        twice.empty()) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  try {
    j = nlohmann::json::parse(text, keys);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() starts with "[json.exception.parse_error.101] "; the rest has the position.
    std::string what = e.what();
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    throw UsageError(path + ": invalid JSON: " + what);
  } catch (const nlohmann::json::exception& e) {
    // A number beyond double's range (out_of_range.406), and the like.
    std::string what = e.what();
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    throw UsageError(path + ": invalid JSON: " + what.substr(0, 200));
  } catch (const std::ios_base::failure& e) {
    throw UsageError(path + ": cannot read the model config file: " + e.what());
  }
  if (!twice.empty()) {
    throw UsageError(path + ": key '" + twice +
                     "' is given twice (JSON readers differ on which value wins); give each key "
                     "once");
  }
  return model_config_from_json(j, path, warnings);
}

void validate(const ModelConfig& m, const std::string& source) {
  require_positive(source, "hidden_size", m.hidden_size);
  require_positive(source, "num_hidden_layers", m.num_hidden_layers);
  require_non_negative(source, "first_k_dense_replace", m.first_k_dense_replace);
  require_positive(source, "intermediate_size", m.intermediate_size);
  require_positive(source, "moe_intermediate_size", m.moe_intermediate_size);
  require_positive(source, "n_routed_experts", m.n_routed_experts);
  require_non_negative(source, "n_shared_experts", m.n_shared_experts);
  require_positive(source, "num_experts_per_tok", m.num_experts_per_tok);
  require_positive(source, "n_group", m.n_group);
  require_positive(source, "topk_group", m.topk_group);
  if (m.q_lora_rank) require_positive(source, "q_lora_rank", *m.q_lora_rank);
  require_positive(source, "kv_lora_rank", m.kv_lora_rank);
  require_positive(source, "qk_nope_head_dim", m.qk_nope_head_dim);
  require_positive(source, "qk_rope_head_dim", m.qk_rope_head_dim);
  require_positive(source, "v_head_dim", m.v_head_dim);
  require_positive(source, "num_attention_heads", m.num_attention_heads);
  require_positive(source, "vocab_size", m.vocab_size);
  require_non_negative(source, "num_nextn_predict_layers", m.num_nextn_predict_layers);
  if (!(m.routed_scaling_factor > 0) || !std::isfinite(m.routed_scaling_factor)) {
    invalid(source, "key 'routed_scaling_factor' must be a positive number");
  }
  if (!(m.rms_norm_eps > 0) || !std::isfinite(m.rms_norm_eps)) {
    invalid(source, "key 'rms_norm_eps' must be a positive number");
  }
  if (!(m.rope_theta > 0) || !std::isfinite(m.rope_theta)) {
    invalid(source, "key 'rope_theta' must be a positive number");
  }

  const auto s = [](std::int64_t v) { return std::to_string(v); };
  // What a model of this family can mean, and what keeps every count moebench derives (parameters,
  // FLOPs, bytes, tensor elements) far inside int64: the largest published models are 2-10x
  // below each bound.
  const struct {
    const char* key;
    std::int64_t value, limit;
  } bounds[] = {{"hidden_size", m.hidden_size, 1 << 20},
                {"num_hidden_layers", m.num_hidden_layers, 10000},
                {"intermediate_size", m.intermediate_size, 1 << 22},
                {"moe_intermediate_size", m.moe_intermediate_size, 1 << 22},
                {"n_shared_experts", m.n_shared_experts, 1024},
                {"q_lora_rank", m.q_lora_rank.value_or(1), 1 << 20},
                {"kv_lora_rank", m.kv_lora_rank, 1 << 20},
                {"qk_nope_head_dim", m.qk_nope_head_dim, 1 << 16},
                {"qk_rope_head_dim", m.qk_rope_head_dim, 1 << 16},
                {"v_head_dim", m.v_head_dim, 1 << 16},
                {"num_attention_heads", m.num_attention_heads, 1 << 16},
                {"vocab_size", m.vocab_size, 1 << 26},
                {"num_nextn_predict_layers", m.num_nextn_predict_layers, 64}};
  for (const auto& b : bounds) {
    if (b.value > b.limit) {
      invalid(source, "key '" + std::string(b.key) + "' (" + s(b.value) + ") exceeds the limit " +
                          s(b.limit) + " moebench accepts; valid: up to " + s(b.limit));
    }
  }
  {
    // Every parameter, in double: with the bounds above a product of two or three of them fits
    // int64, but the whole model's count must too (with room for FLOPs x tokens in double).
    const double h = static_cast<double>(m.hidden_size);
    const double heads = static_cast<double>(m.num_attention_heads);
    const double layer = heads * static_cast<double>(m.qk_head_dim() + m.v_head_dim) * 4 * h +
                         3 * h * static_cast<double>(m.intermediate_size) +
                         3 * h * static_cast<double>(m.moe_intermediate_size) *
                             static_cast<double>(m.n_routed_experts + m.n_shared_experts);
    const double total =
        static_cast<double>(m.num_hidden_layers + m.num_nextn_predict_layers) * layer +
        2 * h * static_cast<double>(m.vocab_size);
    if (total > 1e15) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.3g", total);
      invalid(source, std::string("the model would have about ") + buf +
                          " parameters, beyond the 1e15 moebench counts; give smaller sizes");
    }
  }
  if (m.first_k_dense_replace > m.num_hidden_layers) {
    invalid(source, "key 'first_k_dense_replace' (" + s(m.first_k_dense_replace) +
                        ") exceeds num_hidden_layers (" + s(m.num_hidden_layers) + "); valid: 0.." +
                        s(m.num_hidden_layers));
  }
  if (m.qk_rope_head_dim % 2 != 0) {
    invalid(source, "key 'qk_rope_head_dim' must be even (RoPE rotates pairs), got " +
                        s(m.qk_rope_head_dim));
  }
  if (m.n_routed_experts > kMaxExperts) {
    invalid(source, "key 'n_routed_experts' (" + s(m.n_routed_experts) + ") exceeds the limit " +
                        s(kMaxExperts) + "; valid: 1.." + s(kMaxExperts));
  }
  if (m.n_group > kMaxGroups) {
    invalid(source, "key 'n_group' (" + s(m.n_group) + ") exceeds the limit " + s(kMaxGroups) +
                        "; valid: 1.." + s(kMaxGroups));
  }
  if (m.num_experts_per_tok > kMaxTopK) {
    invalid(source, "key 'num_experts_per_tok' (" + s(m.num_experts_per_tok) +
                        ") exceeds the limit " + s(kMaxTopK) + "; valid: 1.." + s(kMaxTopK));
  }
  if (m.n_routed_experts % m.n_group != 0) {
    invalid(source, "key 'n_routed_experts' (" + s(m.n_routed_experts) +
                        ") must be divisible by n_group (" + s(m.n_group) +
                        "); valid: a multiple of " + s(m.n_group));
  }
  const std::int64_t per_group = m.n_routed_experts / m.n_group;
  // A group is scored by the sum of its two best experts (noaux_tc), so groups need two.
  if (m.n_group > 1 && per_group < 2) {
    invalid(source, "key 'n_group' (" + s(m.n_group) + ") leaves fewer than 2 experts per group (" +
                        s(m.n_routed_experts) + " routed experts); valid: n_group <= " +
                        s(m.n_routed_experts / 2) + " dividing n_routed_experts, or 1");
  }
  if (m.topk_group > m.n_group) {
    invalid(source, "key 'topk_group' (" + s(m.topk_group) + ") exceeds n_group (" + s(m.n_group) +
                        "); valid: 1.." + s(m.n_group));
  }
  if (m.num_experts_per_tok > m.n_routed_experts) {
    invalid(source, "key 'num_experts_per_tok' (" + s(m.num_experts_per_tok) +
                        ") exceeds n_routed_experts (" + s(m.n_routed_experts) + "); valid: 1.." +
                        s(m.n_routed_experts));
  }
  const std::int64_t selectable = m.topk_group * per_group;
  if (m.num_experts_per_tok > selectable) {
    invalid(source, "key 'num_experts_per_tok' (" + s(m.num_experts_per_tok) +
                        ") exceeds the experts in the selected groups (topk_group " +
                        s(m.topk_group) + " x " + s(per_group) + " experts per group = " +
                        s(selectable) + "); valid: 1.." + s(selectable) + ", or raise topk_group");
  }
}

nlohmann::json to_json(const ModelConfig& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["hidden_size"] = m.hidden_size;
  j["num_hidden_layers"] = m.num_hidden_layers;
  j["first_k_dense_replace"] = m.first_k_dense_replace;
  j["intermediate_size"] = m.intermediate_size;
  j["moe_intermediate_size"] = m.moe_intermediate_size;
  j["n_routed_experts"] = m.n_routed_experts;
  j["n_shared_experts"] = m.n_shared_experts;
  j["num_experts_per_tok"] = m.num_experts_per_tok;
  j["n_group"] = m.n_group;
  j["topk_group"] = m.topk_group;
  j["routed_scaling_factor"] = m.routed_scaling_factor;
  j["scoring_func"] = m.scoring_func;
  j["topk_method"] = m.topk_method;
  j["norm_topk_prob"] = m.norm_topk_prob;
  j["q_lora_rank"] = m.q_lora_rank ? nlohmann::json(*m.q_lora_rank) : nlohmann::json(nullptr);
  j["kv_lora_rank"] = m.kv_lora_rank;
  j["qk_nope_head_dim"] = m.qk_nope_head_dim;
  j["qk_rope_head_dim"] = m.qk_rope_head_dim;
  j["v_head_dim"] = m.v_head_dim;
  j["num_attention_heads"] = m.num_attention_heads;
  j["vocab_size"] = m.vocab_size;
  j["num_nextn_predict_layers"] = m.num_nextn_predict_layers;
  j["rms_norm_eps"] = m.rms_norm_eps;
  j["rope_theta"] = m.rope_theta;
  return j;
}

}  // namespace moebench
