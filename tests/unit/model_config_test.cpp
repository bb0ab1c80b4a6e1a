#include "workloads/config/model_config.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

// The UsageError message a call throws; "" when it throws none, so a missing throw fails the
// CHECKs on the message too.
template <typename F>
std::string usage_message(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string data_file() {
  return std::string(MOEBENCH_TEST_DATA_DIR) + "/deepseek-v3.config.json";
}

nlohmann::json tiny_json() {
  return to_json(preset("deepseek-v3-tiny"));
}

void check_same_shapes(const ModelConfig& a, const ModelConfig& b) {
  CHECK(a.hidden_size == b.hidden_size);
  CHECK(a.num_hidden_layers == b.num_hidden_layers);
  CHECK(a.first_k_dense_replace == b.first_k_dense_replace);
  CHECK(a.intermediate_size == b.intermediate_size);
  CHECK(a.moe_intermediate_size == b.moe_intermediate_size);
  CHECK(a.n_routed_experts == b.n_routed_experts);
  CHECK(a.n_shared_experts == b.n_shared_experts);
  CHECK(a.num_experts_per_tok == b.num_experts_per_tok);
  CHECK(a.n_group == b.n_group);
  CHECK(a.topk_group == b.topk_group);
  CHECK(a.routed_scaling_factor == b.routed_scaling_factor);
  CHECK(a.q_lora_rank == b.q_lora_rank);
  CHECK(a.kv_lora_rank == b.kv_lora_rank);
  CHECK(a.qk_nope_head_dim == b.qk_nope_head_dim);
  CHECK(a.qk_rope_head_dim == b.qk_rope_head_dim);
  CHECK(a.v_head_dim == b.v_head_dim);
  CHECK(a.num_attention_heads == b.num_attention_heads);
  CHECK(a.vocab_size == b.vocab_size);
  CHECK(a.num_nextn_predict_layers == b.num_nextn_predict_layers);
  CHECK(a.rms_norm_eps == b.rms_norm_eps);
  CHECK(a.rope_theta == b.rope_theta);
}

}  // namespace

TEST_CASE("model_config: presets have the published and the tiny shapes") {
  const auto list = preset_list();
  REQUIRE(list.size() == 2);
  CHECK(list[0].name == "deepseek-v3");
  CHECK(list[1].name == "deepseek-v3-tiny");

  const ModelConfig v3 = preset("deepseek-v3");
  CHECK(v3.name == "deepseek-v3");
  CHECK(v3.hidden_size == 7168);
  CHECK(v3.num_hidden_layers == 61);
  CHECK(v3.moe_layers() == 58);
  CHECK(v3.n_routed_experts == 256);
  CHECK(v3.num_experts_per_tok == 8);
  CHECK(v3.q_lora_rank == 1536);
  CHECK(v3.qk_head_dim() == 192);
  CHECK(v3.vocab_size == 129280);

  const ModelConfig tiny = preset("deepseek-v3-tiny");
  CHECK(tiny.hidden_size == 256);
  CHECK(tiny.num_hidden_layers == 4);
  CHECK(tiny.moe_layers() == 3);
  CHECK(tiny.n_routed_experts == 16);
  CHECK(tiny.n_group == 4);
  CHECK(tiny.topk_group == 2);
  CHECK(tiny.num_experts_per_tok == 4);
  CHECK(tiny.q_lora_rank == 96);
  CHECK(tiny.num_nextn_predict_layers == 1);
  CHECK_NOTHROW(validate(v3, v3.name));
  CHECK_NOTHROW(validate(tiny, tiny.name));
}

TEST_CASE("model_config: an unknown preset lists the valid names") {
  const std::string msg = usage_message([] { preset("deepseek-v4"); });
  CHECK(msg.find("'deepseek-v4'") != std::string::npos);
  CHECK(msg.find("deepseek-v3, deepseek-v3-tiny") != std::string::npos);
}

TEST_CASE("model_config: the published config.json equals the preset field by field") {
  const ModelConfig m = load_model_config(data_file());
  CHECK(m.name == data_file());
  check_same_shapes(m, preset("deepseek-v3"));
}

TEST_CASE("model_config: to_json round-trips through the parser") {
  const ModelConfig tiny = preset("deepseek-v3-tiny");
  const nlohmann::json j = to_json(tiny);
  CHECK(j["name"] == "deepseek-v3-tiny");
  CHECK(j["q_lora_rank"] == 96);
  check_same_shapes(model_config_from_json(j, "x.json"), tiny);
}

TEST_CASE("model_config: q_lora_rank null means a direct q projection") {
  nlohmann::json j = tiny_json();
  j["q_lora_rank"] = nullptr;
  const ModelConfig m = model_config_from_json(j, "lite.json");
  CHECK_FALSE(m.q_lora_rank.has_value());
  CHECK(to_json(m)["q_lora_rank"].is_null());
}

TEST_CASE("model_config: unknown keys are ignored, optional keys defaulted") {
  nlohmann::json j = tiny_json();
  j["quantization_config"] = {{"fmt", "e4m3"}};
  j["some_future_key"] = nlohmann::json::array({1, 2, 3});
  j.erase("num_nextn_predict_layers");
  j.erase("rms_norm_eps");
  j.erase("rope_theta");
  const ModelConfig m = model_config_from_json(j, "x.json");
  CHECK(m.num_nextn_predict_layers == 0);
  CHECK(m.rms_norm_eps == 1e-6);
  CHECK(m.rope_theta == 10000.0);
  CHECK(m.hidden_size == 256);
}

TEST_CASE("model_config: a key given twice is refused, naming it, in any object") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "mb_config_dup";
  std::filesystem::create_directories(dir);
  const std::string text = tiny_json().dump();
  const auto write = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir / name) << body;
    return (dir / name).string();
  };
  // The last key again at the top level, and a nested object with a key twice.
  const std::string top =
      write("top.json", text.substr(0, text.size() - 1) + R"(, "hidden_size": 1024})");
  CHECK(usage_message([&] { load_model_config(top); }) ==
        top +
            ": key 'hidden_size' is given twice (JSON readers differ on which value wins); give "
            "each key once");
  const std::string nested =
      write("nested.json", text.substr(0, text.size() - 1) +
                               R"(, "quantization_config": {"fmt": "e4m3", "fmt": "e5m2"}})");
  CHECK(usage_message([&] { load_model_config(nested); }).find("key 'fmt' is given twice") !=
        std::string::npos);
  // The same key in two different objects is no duplicate.
  const std::string apart =
      write("apart.json", text.substr(0, text.size() - 1) + R"(, "a": {"x": 1}, "b": {"x": 2}})");
  CHECK(load_model_config(apart).hidden_size == 256);
  std::filesystem::remove_all(dir);
}

TEST_CASE("model_config: an unknown key two edits or fewer from a known one is a warning") {
  // The published config has many keys moebench does not read, none a near miss.
  std::vector<std::string> warnings = {"stale"};
  load_model_config(data_file(), &warnings);
  CHECK(warnings.empty());
  // num_nextn_predict_layer (1 edit) drops the MTP layer: said, naming both keys.
  nlohmann::json j = tiny_json();
  j["num_nextn_predict_layer"] = j["num_nextn_predict_layers"];
  j.erase("num_nextn_predict_layers");
  j["rope_theat"] = 10000.0;  // 2 edits (a transposition)
  j["hiden_sizes"] = 1;       // 2 edits from hidden_size
  j["hidden_sizes_all"] = 1;  // 5: too far, not a misspelling
  j["some_future_key"] = 1;   // nothing like any
  const ModelConfig m = model_config_from_json(j, "x.json", &warnings);
  CHECK(m.num_nextn_predict_layers == 0);  // ignored, as the warning says
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[0] ==
        "x.json: unknown key 'hiden_sizes' is 2 edits from 'hidden_size', which moebench reads; it "
        "is ignored (did you mean 'hidden_size'?)");
  CHECK(warnings[1].find("'num_nextn_predict_layer' is 1 edit from 'num_nextn_predict_layers'") !=
        std::string::npos);
  CHECK(warnings[2].find("'rope_theat' is 2 edits from 'rope_theta'") != std::string::npos);
  // Without a place for warnings, the same config still loads.
  CHECK(model_config_from_json(j, "x.json").hidden_size == 256);
}

TEST_CASE("model_config: a missing required key names the file and the key") {
  for (const char* key : {"n_group", "hidden_size", "q_lora_rank", "routed_scaling_factor"}) {
    nlohmann::json j = tiny_json();
    j.erase(key);
    const std::string msg = usage_message([&] { model_config_from_json(j, "cfg.json"); });
    CHECK(msg.rfind("cfg.json: missing required key '" + std::string(key) + "'", 0) == 0);
  }
  nlohmann::json j = tiny_json();
  j.erase("n_group");
  CHECK(usage_message([&] { model_config_from_json(j, "cfg.json"); }) ==
        "cfg.json: missing required key 'n_group' (the DeepSeek-V3 family's config.json has it; "
        "e.g. 8)");
}

TEST_CASE("model_config: a value of the wrong type names the key and the value") {
  nlohmann::json j = tiny_json();
  j["hidden_size"] = "abc";
  CHECK(usage_message([&] { model_config_from_json(j, "cfg.json"); }) ==
        "cfg.json: key 'hidden_size' must be a positive integer, got \"abc\"");
  j = tiny_json();
  j["num_attention_heads"] = 4.5;
  CHECK(usage_message([&] {
          model_config_from_json(j, "cfg.json");
        }).find("'num_attention_heads'") != std::string::npos);
  j = tiny_json();
  j["n_routed_experts"] = 0;
  CHECK(usage_message([&] { model_config_from_json(j, "cfg.json"); }) ==
        "cfg.json: key 'n_routed_experts' must be a positive integer, got 0");
  j = tiny_json();
  j["first_k_dense_replace"] = -1;
  CHECK(usage_message([&] {
          model_config_from_json(j, "cfg.json");
        }).find("'first_k_dense_replace' must be a non-negative integer") != std::string::npos);
  j = tiny_json();
  j["routed_scaling_factor"] = "2.5";
  CHECK(usage_message([&] {
          model_config_from_json(j, "cfg.json");
        }).find("'routed_scaling_factor' must be a positive number") != std::string::npos);
  CHECK(usage_message([] {
          model_config_from_json(nlohmann::json::array(), "cfg.json");
        }).find("expected a JSON object") != std::string::npos);
}

TEST_CASE("model_config: inconsistent values name the key and what would be valid") {
  const auto msg_for = [](auto&& edit) {
    nlohmann::json j = tiny_json();
    edit(j);
    return usage_message([&] { model_config_from_json(j, "cfg.json"); });
  };
  std::string msg = msg_for([](nlohmann::json& j) { j["n_routed_experts"] = 18; });
  CHECK(msg.find("'n_routed_experts' (18) must be divisible by n_group (4)") != std::string::npos);
  msg = msg_for([](nlohmann::json& j) { j["topk_group"] = 5; });
  CHECK(msg.find("'topk_group' (5) exceeds n_group (4); valid: 1..4") != std::string::npos);
  // 2 selected groups of 16 / 4 = 4 experts hold 8 candidates, so top-9 is impossible.
  msg = msg_for([](nlohmann::json& j) { j["num_experts_per_tok"] = 9; });
  CHECK(msg.find("'num_experts_per_tok' (9) exceeds the experts in the selected groups") !=
        std::string::npos);
  CHECK(msg.find("valid: 1..8") != std::string::npos);
  msg = msg_for([](nlohmann::json& j) {
    j["n_group"] = 1;
    j["topk_group"] = 1;
    j["num_experts_per_tok"] = 17;
  });
  CHECK(msg.find("'num_experts_per_tok' (17) exceeds n_routed_experts (16)") != std::string::npos);
  msg = msg_for([](nlohmann::json& j) { j["first_k_dense_replace"] = 5; });
  CHECK(msg.find("'first_k_dense_replace' (5) exceeds num_hidden_layers (4)") != std::string::npos);
  msg = msg_for([](nlohmann::json& j) { j["qk_rope_head_dim"] = 15; });
  CHECK(msg.find("'qk_rope_head_dim' must be even") != std::string::npos);
  msg = msg_for([](nlohmann::json& j) { j["n_routed_experts"] = 2048; });
  CHECK(msg.find("'n_routed_experts' (2048) exceeds the limit 1024") != std::string::npos);
  msg = msg_for([](nlohmann::json& j) { j["n_group"] = 16; });  // one expert per group
  CHECK(msg.find("fewer than 2 experts per group") != std::string::npos);
}

TEST_CASE("model_config: unreadable files and invalid JSON name the file") {
  CHECK(usage_message([] {
          load_model_config("/nonexistent/config.json");
        }).rfind("/nonexistent/config.json: does not exist; give the path of a config.json", 0) ==
        0);

  const auto dir = std::filesystem::temp_directory_path() / "moebench_model_config_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "broken.json").string();
  {
    std::ofstream out(path);
    out << "{\n  \"hidden_size\": 7168,\n  \"vocab_size\": \n}\n";
  }
  const std::string msg = usage_message([&] { load_model_config(path); });
  CHECK(msg.rfind(path + ": invalid JSON: ", 0) == 0);
  CHECK(msg.find("line 4") != std::string::npos);  // the position of the parse error
  std::filesystem::remove_all(dir);
}

TEST_CASE("model_config: hostile values get one short line, not a crash or a flood") {
  const auto msg_for = [](auto&& edit) {
    nlohmann::json j = tiny_json();
    edit(j);
    return usage_message([&] { model_config_from_json(j, "cfg.json"); });
  };
  // Nested 100,000 deep: quoted by kind, never dumped (which would recurse that deep).
  std::string msg = msg_for([](nlohmann::json& j) {
    nlohmann::json deep = nlohmann::json::array();
    for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
    j["hidden_size"] = std::move(deep);
  });
  CHECK(msg == "cfg.json: key 'hidden_size' must be a positive integer, got an array of 1 values");
  // 10 MB of string: an excerpt of 60 characters and the length.
  msg = msg_for([](nlohmann::json& j) { j["vocab_size"] = std::string(10000000, 'x'); });
  CHECK(msg.size() < 200);
  CHECK(msg.find("(10000002 characters)") != std::string::npos);
  // Each size beyond what the family means, and a whole model beyond what moebench counts.
  msg = msg_for([](nlohmann::json& j) { j["hidden_size"] = INT64_MAX; });
  CHECK(msg.find("'hidden_size' (9223372036854775807) exceeds the limit 1048576") !=
        std::string::npos);
  msg = msg_for([](nlohmann::json& j) { j["vocab_size"] = std::int64_t{1} << 62; });
  CHECK(msg.find("'vocab_size' (4611686018427387904) exceeds the limit 67108864") !=
        std::string::npos);
  msg = msg_for([](nlohmann::json& j) {
    j["hidden_size"] = 1 << 20;
    j["moe_intermediate_size"] = 1 << 22;
    j["num_hidden_layers"] = 10000;
  });
  CHECK(msg.find("parameters, beyond the 1e15 moebench counts") != std::string::npos);
}

TEST_CASE("model_config: a number beyond double and a directory are bad input too") {
  const auto dir = std::filesystem::temp_directory_path() / "moebench_model_config_hostile";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "big.json").string();
  {
    std::ofstream out(path);
    out << "{\"hidden_size\": 1e400}\n";
  }
  std::string msg = usage_message([&] { load_model_config(path); });
  CHECK(msg.rfind(path + ": invalid JSON: number overflow", 0) == 0);
  msg = usage_message([&] { load_model_config(dir.string()); });
  CHECK(msg.rfind(dir.string() + ": is a directory, not a regular file; give the path of a "
                                 "config.json, or a preset: ",
                  0) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("model_config: the routing keys, DeepSeek-V3's when absent, refused when unknown") {
  nlohmann::json j = tiny_json();
  j.erase("scoring_func");
  j.erase("topk_method");
  j.erase("norm_topk_prob");
  const ModelConfig v3 = model_config_from_json(j, "c.json");
  CHECK(v3.scoring_func == "sigmoid");
  CHECK(v3.topk_method == "noaux_tc");
  CHECK(v3.norm_topk_prob);
  j["scoring_func"] = "softmax";
  j["topk_method"] = "group_limited_greedy";
  j["norm_topk_prob"] = false;
  const ModelConfig v2 = model_config_from_json(j, "c.json");
  CHECK(v2.scoring_func == "softmax");
  CHECK(v2.topk_method == "group_limited_greedy");
  CHECK_FALSE(v2.norm_topk_prob);
  CHECK(to_json(v2)["topk_method"] == "group_limited_greedy");  // the report records it
  j["topk_method"] = "gready";
  CHECK(usage_message([&] { model_config_from_json(j, "c.json"); }) ==
        "c.json: key 'topk_method' is 'gready', which moebench does not run; valid: noaux_tc, "
        "greedy, group_limited_greedy");
  j["topk_method"] = "greedy";
  j["norm_topk_prob"] = "no";
  CHECK(usage_message([&] { model_config_from_json(j, "c.json"); }) ==
        "c.json: key 'norm_topk_prob' must be true or false, got \"no\"");
}

}  // namespace moebench
