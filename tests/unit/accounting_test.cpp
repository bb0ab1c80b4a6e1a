#include "workloads/accounting/accounting.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include <nlohmann/json.hpp>

namespace moebench {
namespace {

// The expected values below were worked out by hand from the shapes (the arithmetic is in the
// comments), not by calling the functions under test. Integer counts compare exactly; FLOP and
// byte figures are doubles of integers below 2^53, so they compare exactly too unless noted.

RunConfig run_of(const char* model, std::int64_t layers, std::int64_t dense, bool attention) {
  RunConfig c;
  c.model = preset(model);
  c.workload.seq_len = 4096;
  c.workload.layers = layers;
  c.workload.dense_layers = dense;
  c.workload.attention = attention;
  return c;
}

}  // namespace

TEST_CASE("accounting: DeepSeek-V3 is 671B parameters, about 37.5B active") {
  const ModelConfig m = preset("deepseek-v3");
  const StackAccounting a = account_full_model(m, 4096, 1.0);
  CHECK(a.scope == "full_model");
  // The model card's 671B, to the 0.1B it is quoted at (our count: 671.026e9).
  CHECK(std::abs(static_cast<double>(a.total_params) - 671.0e9) < 0.05e9);
  CHECK(a.total_params == 671026419200);
  // The report's "37B activated"; the split it gives (36.7B + 0.9B embedding) rounds the same way.
  CHECK(a.active_params >= 37.4e9);
  CHECK(a.active_params <= 37.7e9);
  CHECK(a.active_params == 37552297472);
}

TEST_CASE("accounting: DeepSeek-V3 FLOPs per token match Megatron-Core and NVIDIA's row") {
  const ModelConfig m = preset("deepseek-v3");
  const StackAccounting a = account_full_model(m, 4096, 1000.0);
  // Megatron-Core num_floating_point_operations for 61 layers + 1 MTP layer at seq 4096; within
  // 1 FLOP because the 0.5 causal factors go through doubles.
  CHECK(std::abs(a.flops_per_token - 259992950784.0) <= 1.0);
  // NVIDIA: 1648 TFLOP/s/GPU <-> 6338 tokens/s/GPU.
  CHECK(std::floor(1648e12 / a.flops_per_token) == 6338.0);
  CHECK(a.tokens_per_step == 1000.0);
  CHECK(a.flops_per_step == doctest::Approx(a.flops_per_token * 1000.0).epsilon(1e-15));
  // TorchTitan: 6 x (37552297472 - 129280*7168) + 6 x 61 x 128 x (128+64+128) x 4096.
  CHECK(a.flops_per_token_torchtitan == 281158321152.0);
}

TEST_CASE("accounting: DeepSeek-V3 parameter parts") {
  const ParamCounts pc = param_counts(preset("deepseek-v3"));
  // q: 7168*1536 + 1536 + 1536*128*192 = 48760320; kv: 7168*576 + 512 + 512*128*256 = 20906496;
  // o: 128*128*7168 = 117440512; norms 2*7168.
  CHECK(pc.attention_per_layer == 187121664);
  CHECK(pc.dense_mlp_per_layer == 396361728);  // 3*7168*18432
  CHECK(pc.expert == 44040192);                // 3*7168*2048
  CHECK(pc.shared_experts == 44040192);
  CHECK(pc.router == 1835264);  // 7168*256 + 256
  CHECK(pc.embedding == 926679040);
  CHECK(pc.output_head == 926686208);
  // attention + 256 experts + shared + router + eh 2*7168^2 + 3 norms: ~11.6B (report: 11.5B).
  CHECK(pc.mtp == 11610068224);
}

TEST_CASE("accounting: the tiny preset's parameters, counted by hand") {
  const ModelConfig m = preset("deepseek-v3-tiny");
  const ParamCounts pc = param_counts(m);
  // q: 256*96 + 96 + 96*4*48 = 43104; kv: 256*80 + 64 + 64*4*64 = 36928; o: 4*32*256 = 32768;
  // norms 512.
  CHECK(pc.attention_per_layer == 113312);
  CHECK(pc.dense_mlp_per_layer == 393216);  // 3*256*512
  CHECK(pc.expert == 98304);                // 3*256*128
  CHECK(pc.shared_experts == 98304);
  CHECK(pc.router == 4112);  // 256*16 + 16
  CHECK(pc.embedding == 262144);
  CHECK(pc.output_head == 262400);
  CHECK(pc.mtp == 1920432);  // 113312 + 16*98304 + 98304 + 4112 + 2*65536 + 768
  const StackAccounting a = account_full_model(m, 128, 1.0);
  // 524544 + 4*113312 + 393216 + 3*(16*98304 + 98304 + 4112)
  CHECK(a.total_params == 6396848);
  // 524544 + 4*113312 + 393216 + 3*(4*98304 + 98304 + 4112)
  CHECK(a.active_params == 2857904);
}

TEST_CASE("accounting: a direct q projection without q_lora") {
  ModelConfig m = preset("deepseek-v3-tiny");
  m.q_lora_rank.reset();
  // q becomes 256*4*48 = 49152 instead of 43104.
  CHECK(param_counts(m).attention_per_layer == 119360);
  ModelConfig v3 = preset("deepseek-v3");
  v3.q_lora_rank.reset();
  CHECK(param_counts(v3).attention_per_layer == 314522112);  // q: 7168*128*192 = 176160768
  // Megatron's q term becomes h*heads*qk: 6*(176160768 - 1536*(7168 + 24576 + 1)) more.
  const ModelConfig with_lora = preset("deepseek-v3");
  CHECK(mla_flops_per_token(v3, 4096) - mla_flops_per_token(with_lora, 4096) == 764402688.0);
}

TEST_CASE("accounting: per-part FLOPs of one DeepSeek-V3 layer") {
  const ModelConfig m = preset("deepseek-v3");
  // Projections: 6*(1536*(7168+24576+1) + 512*(7168+32768+1) + 7168*64 + 128*128*7168)
  // = 1122643968; core: 6*(4096*128*192/2 + 4096*128*128/2) = 503316480.
  CHECK(core_attention_flops_per_token(m, 4096) == 503316480.0);
  CHECK(mla_flops_per_token(m, 4096) == 1625960448.0);
  CHECK(dense_mlp_flops_per_token(m) == 2378170368.0);       // 18*7168*18432
  CHECK(routed_experts_flops_per_token(m) == 2113929216.0);  // 18*7168*2048*8
  CHECK(shared_experts_flops_per_token(m) == 264241152.0);   // 18*7168*2048
  CHECK(router_flops_per_token(m) == 11010048.0);            // 6*7168*256
}

TEST_CASE("accounting: 4 instantiated DeepSeek-V3 MoE layers, attention on and off") {
  RunConfig c = run_of("deepseek-v3", 4, 0, true);
  c.layout.world = 8;
  c.layout.ep = 8;
  c.workload.micro_batch = 2;
  StackAccounting a = account_instantiated(c);
  CHECK(a.scope == "instantiated");
  // 4*(187121664 + 256*44040192 + 44040192 + 1835264)
  CHECK(a.total_params == 46029145088);
  CHECK(a.active_params == 2341274624);  // 4*(187121664 + 9*44040192 + 1835264)
  // 4*(1625960448 + 18*7168*2048*9)
  CHECK(a.flops_per_token == 16016523264.0);
  CHECK(a.flops_per_token_torchtitan == 18074179584.0);  // 6*active + 6*4*128*320*4096
  CHECK(a.tokens_per_step == 65536.0);                   // 8 ranks * 2 * 4096
  CHECK(a.flops_per_step == 16016523264.0 * 65536.0);

  c.workload.attention = false;
  a = account_instantiated(c);
  CHECK(a.total_params == 45280687104);      // the 7168 MLP norm replaces each attention block
  CHECK(a.flops_per_token == 9512681472.0);  // 4*18*7168*2048*9
}

TEST_CASE("accounting: the run's ends and MTP layer count as Megatron-Core counts them") {
  RunConfig c = run_of("deepseek-v3", 4, 0, true);
  c.layout.world = 8;
  c.layout.ep = 8;
  c.workload.micro_batch = 2;
  c.workload.head = true;
  c.workload.mtp = 1;
  const StackAccounting a = account_instantiated(c);
  // The 4 layers' 16016523264, one more MoE layer (4004130816), the MTP layer's norms and eh
  // projection 6*(3*7168 + 2*7168^2) = 616691712, two heads' logits 2*6*7168*129280 = 11120148480.
  CHECK(a.flops_per_token == 31757494272.0);
  // The embedding and the head (+ final norm): 2*129280*7168 + 7168; the MTP layer is not in the
  // model's parameter count.
  CHECK(a.total_params == 47882510336);
  CHECK(a.active_params == 4194639872);
  CHECK(a.flops_per_token_torchtitan == 23634296832.0);  // 6*(active - embedding) + attention
  // The MTP layer's all-to-alls: 4 MoE layers' exchanges and its own.
  // Each row also carries its FP32 combine weight (forward) and that weight's gradient (back).
  CHECK(collective_bytes(c, 2).combine == 5.0 * 2 * 2 * 4096 * 8 * 7168 * 2);
  CHECK(collective_bytes(c, 2).dispatch == 5.0 * 2 * 2 * 4096 * 8 * (7168 * 2 + 4));
}

TEST_CASE("accounting: with every layer, the ends and the MTP layer the run is the full model") {
  for (const char* model : {"deepseek-v3", "deepseek-v3-tiny"}) {
    CAPTURE(model);
    RunConfig c = run_of(model, 0, 0, true);
    c.workload.layers = c.model.num_hidden_layers;
    c.workload.dense_layers = c.model.first_k_dense_replace;
    c.workload.head = true;
    c.workload.mtp = c.model.num_nextn_predict_layers;
    c.layout.world = 16;
    c.layout.ep = 16;
    const StackAccounting run = account_instantiated(c);
    const StackAccounting full = account_full_model(c.model, 4096, run.tokens_per_step);
    CHECK(run.flops_per_token == full.flops_per_token);
    CHECK(run.total_params == full.total_params);
    CHECK(run.active_params == full.active_params);
    CHECK(run.flops_per_token_torchtitan == full.flops_per_token_torchtitan);
    CHECK(run.flops_per_step == full.flops_per_step);
    // What --recompute repeats, counted alike in both scopes when the stack is the whole model
    // (the full model's was 0 whatever the run recomputed).
    c.workload.recompute = parse_recompute("mla_up_proj,mlp,core_attn");
    const StackAccounting rerun = account_instantiated(c);
    const StackAccounting refull =
        account_full_model(c.model, 4096, rerun.tokens_per_step, c.workload.recompute);
    CHECK(rerun.recompute_flops_per_token > 0);
    CHECK(rerun.recompute_flops_per_token == doctest::Approx(refull.recompute_flops_per_token));
    CHECK(rerun.recompute_flops_per_step == doctest::Approx(refull.recompute_flops_per_step));
    CHECK(full.recompute_flops_per_token == 0.0);  // no recompute given: none counted
    c.workload.recompute = {};
    // Each missing part is missing from the count.
    c.workload.mtp = 0;
    CHECK(account_instantiated(c).flops_per_token < full.flops_per_token);
    c.workload.head = false;
    CHECK(account_instantiated(c).flops_per_token < full.flops_per_token);
  }
}

TEST_CASE("accounting: collective bytes of a small tiny-model run") {
  RunConfig c = run_of("deepseek-v3-tiny", 4, 1, true);
  c.workload.seq_len = 128;
  c.layout.world = 4;
  c.layout.ep = 4;
  CollectiveBytes b = collective_bytes(c, 4);
  // 3 MoE layers * 2 (fwd + bwd) * 128 tokens * top-4 * 256 * 4 bytes, and for the dispatch
  // each row's FP32 combine weight or its gradient: 3 * 2 * 128 * 4 * 4 bytes more.
  CHECK(b.combine == 3145728.0);
  CHECK(b.dispatch == 3145728.0 + 12288.0);
  // (4*113312 + 393216 + 3*(98304 + 4112)) * 4
  CHECK(b.dense_grad_reduce == 4614848.0);
  CHECK(b.expert_grad_reduce == 4718592.0);  // 3 layers * 4 local experts * 98304 * 4
  CHECK(b.param_allgather == 0.0);
  c.grad_reduce = GradReduce::reduce_scatter;
  b = collective_bytes(c, 4);
  CHECK(b.param_allgather == 4614848.0 + 4718592.0);
}

TEST_CASE("accounting: the FLOPs --recompute repeats, per module, outside Megatron's count") {
  // The tiny model at seq 8: h 256, 4 heads, q_lora 96, kv_lora 64, qk 32 + 16, v 32, ffn 512,
  // one shared expert of 128.
  RunConfig c = run_of("deepseek-v3-tiny", 2, 1, true);
  c.workload.seq_len = 8;
  const ModelConfig& m = c.model;
  const auto one = [&](const char* modules, bool dense) {
    return recompute_flops_per_token(m, 8, parse_recompute(modules), true, dense);
  };
  // Up-projections: 2 * 96 * 4*48 + 2 * 64 * 4*(32 + 32).
  CHECK(one("mla_up_proj", false) == 36864.0 + 32768.0);
  // Core attention's forward over the causal half: 2 * (8 * 4 * 48 + 8 * 4 * 32) / 2.
  CHECK(one("core_attn", true) == 2560.0);
  // The gate/up GEMM: dense 2 * 256 * 1024, shared experts 2 * 256 * 256; each only in its kind.
  CHECK(one("mlp", true) == 524288.0);
  CHECK(one("mlp", false) == 0.0);
  CHECK(one("shared_experts", false) == 131072.0);
  CHECK(one("shared_experts", true) == 0.0);
  // Norms and activations: no GEMM.
  CHECK(one("layernorm,moe_act", false) == 0.0);
  CHECK(recompute_flops_per_token(m, 8, parse_recompute("mla_up_proj,core_attn"), false, true) ==
        0.0);  // attention off

  // The stack (layer 0 dense, layer 1 MoE), every module: 596480 + 203264 per token.
  c.workload.recompute =
      parse_recompute("core_attn,layernorm,mla_up_proj,mlp,moe_act,shared_experts");
  const StackAccounting a = account_instantiated(c);
  CHECK(a.recompute_flops_per_token == 799744.0);
  CHECK(a.recompute_flops_per_step == 799744.0 * 8);
  c.workload.recompute = {};
  CHECK(account_instantiated(c).flops_per_token == a.flops_per_token);
  CHECK(account_instantiated(c).recompute_flops_per_token == 0.0);
}

TEST_CASE("accounting: JSON keys") {
  const StackAccounting a = account_full_model(preset("deepseek-v3-tiny"), 128, 256.0);
  const nlohmann::json j = to_json(a);
  CHECK(j["scope"] == "full_model");
  CHECK(j["total_params"] == 6396848);
  CHECK(j["convention"] == "megatron-core num_floating_point_operations");
  for (const char* key :
       {"active_params", "flops_per_token", "flops_per_token_torchtitan", "tokens_per_step",
        "flops_per_step", "recompute_flops_per_token", "recompute_flops"}) {
    CHECK(j.contains(key));
  }
}

}  // namespace moebench
