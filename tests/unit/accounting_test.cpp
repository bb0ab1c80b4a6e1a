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
  CHECK(collective_bytes(c, 2).dispatch == 5.0 * 2 * 2 * 4096 * 8 * 7168 * 2);
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
  // 3 MoE layers * 2 (fwd + bwd) * 128 tokens * top-4 * 256 * 4 bytes
  CHECK(b.dispatch == 3145728.0);
  CHECK(b.combine == 3145728.0);
  // (4*113312 + 393216 + 3*(98304 + 4112)) * 4
  CHECK(b.dense_grad_reduce == 4614848.0);
  CHECK(b.expert_grad_reduce == 4718592.0);  // 3 layers * 4 local experts * 98304 * 4
  CHECK(b.param_allgather == 0.0);
  c.grad_reduce = GradReduce::reduce_scatter;
  b = collective_bytes(c, 4);
  CHECK(b.param_allgather == 4614848.0 + 4718592.0);
}

TEST_CASE("accounting: memory of a dense-only slice") {
  // 1 dense layer, no attention, 2 ranks, 8 tokens each, FP32.
  RunConfig c = run_of("deepseek-v3-tiny", 1, 1, false);
  c.workload.seq_len = 8;
  c.layout.world = 2;
  const MemoryEstimate e = estimate_memory(c, 4);
  CHECK(e.weights == 1573888.0);  // (256 norm + 393216) * 4
  CHECK(e.gradients == 1573888.0);
  CHECK(e.optimizer == 3147776.0);  // 393472 * 8
  // per token: (2*256 + 3*512) * 4 bytes + one rstd (4 bytes) = 8196
  CHECK(e.activations == 65568.0);
  CHECK(e.communication == 0.0);
  // The first stage's inputs and the last stage's output gradients: 2 * 8 tokens * 256 * 4.
  CHECK(e.workspace == 16384.0);
  CHECK(e.total() == 1573888.0 * 2 + 3147776.0 + 65568.0 + 16384.0);
  c.optimizer = Optimizer::none;
  CHECK(estimate_memory(c, 4).optimizer == 0.0);
}

TEST_CASE("accounting: memory of an MoE slice with ZeRO-1, and its reference") {
  // 1 MoE layer, no attention, world 4, EP 2, 2 sequences of 4 tokens, BF16.
  RunConfig c = run_of("deepseek-v3-tiny", 1, 0, false);
  c.workload.seq_len = 4;
  c.workload.micro_batch = 2;
  c.layout.world = 4;
  c.layout.ep = 2;
  c.grad_reduce = GradReduce::reduce_scatter;
  MemoryEstimate e = estimate_memory(c, 2);
  // dense: 256 + 98304 + 4112 = 102672; local experts 8 * 98304 = 786432
  CHECK(e.weights == 1778208.0);    // 889104 * 2
  CHECK(e.gradients == 3556416.0);  // FP32 main gradients: 889104 * 4
  // moments and FP32 master weights of BF16 storage: 12 * (102672/4 + 786432/2)
  CHECK(e.optimizer == 5026608.0);
  // per token: elements 2*256 + 2*4*256 + 3*4*128 + 3*128 = 4480 at 2 bytes;
  // FP32 values 1 + 16 + 8 = 25 at 4 bytes: 9060 bytes * 8 tokens.
  CHECK(e.activations == 72480.0);
  CHECK(e.communication == 65536.0);  // 4 * 8 tokens * 4 * 256 * 2
  // router logits 8 * 16 * 4, the inputs and output gradients 2 * 8 * 256 * 2
  CHECK(e.workspace == 512.0 + 8192.0);

  const CollectiveBytes b = collective_bytes(c, 2);
  CHECK(b.dispatch == 32768.0);  // 1 * 2 * 8 * 4 * 256 * 2
  CHECK(b.dense_grad_reduce == 205344.0);
  CHECK(b.expert_grad_reduce == 1572864.0);
  CHECK(b.param_allgather == 1778208.0);

  // Reference: one process, 32 tokens, all 16 experts: 102672 + 1572864 = 1675536 params, no
  // optimizer step.
  e = estimate_reference_memory(c, 2);
  CHECK(e.weights == 3351072.0);
  CHECK(e.optimizer == 0.0);
  CHECK(e.activations == 289920.0);    // 9060 * 32
  CHECK(e.communication == 262144.0);  // 4 * 32 * 4 * 256 * 2
  CHECK(e.workspace == 2048.0 + 32768.0);
}

TEST_CASE("accounting: attention activations and workspace") {
  RunConfig c = run_of("deepseek-v3-tiny", 1, 1, true);
  c.workload.seq_len = 8;
  const MemoryEstimate e = estimate_memory(c, 4);
  CHECK(e.weights == 2026112.0);  // (113312 + 393216) * 4
  // per token elements: attention 2*256 + 2*96 + q 4*48 + kv 4*(32 + 32) + 80 + 64 + o 4*32 =
  // 1424, MLP 512, dense 1536, at 4 bytes; FP32: 3 rstd + 4 lse + 1 rstd = 8 values.
  // (3472*4 + 32) * 8 tokens.
  CHECK(e.activations == 111360.0);
  // Keeping k and v apart (Transformer Engine) instead of kv: 4*48 + 4*32 for 4*64, 1488 a token.
  ActivationPolicy te;
  te.separate_k_v = true;
  CHECK(estimate_stage_memory(c, 4, te).at(0).memory.activations == 113408.0);  // (3536*4+32)*8
  CHECK(e.workspace == 256.0 + 16384.0);  // 8 * 8 scores * 4 bytes, inputs and output gradients
}

TEST_CASE("accounting: memory per pipeline stage follows the schedule's peak") {
  // The whole tiny model (4 layers) over 2 stages, 4 micro-batches of 8 tokens, BF16.
  RunConfig c = run_of("deepseek-v3-tiny", 4, 1, true);
  c.workload.seq_len = 8;
  c.workload.head = true;
  c.workload.mtp = 1;
  c.layout.world = 2;
  c.layout.pp = 2;
  c.workload.global_batch = 4;
  const std::vector<StageMemory> st = estimate_stage_memory(c, 2);
  REQUIRE(st.size() == 2);
  CHECK(st[0].layers == 2);
  CHECK(st[1].layers == 2);
  // 1F1B: rank 0 keeps its warm-up forward and one more (P - r), rank 1 one.
  CHECK(st[0].in_flight == 2);
  CHECK(st[1].in_flight == 1);
  // The whole model: the embedding on the first stage; the head (+ final norm), the MTP layer and
  // the embedding's copy the MTP layer reads on the last (the even layout puts them there).
  CHECK(st[0].embedding);
  CHECK(st[1].loss);
  CHECK(st[1].mtp == 1);
  CHECK(st[1].embedding);
  const ParamCounts pc = param_counts(c.model);
  // Layer 0 dense and layer 1 MoE against layers 2 and 3 MoE; the tables cancel.
  CHECK(st[0].params - st[1].params ==
        doctest::Approx(static_cast<double>(pc.dense_mlp_per_layer) -
                        static_cast<double>(pc.output_head + pc.mtp + pc.shared_experts +
                                            pc.router + 16 * pc.expert)));
  // Two heads' logits (main and MTP) of one micro-batch, 8 tokens * 1024 * 2 bytes each, on top
  // of the layers'.
  CHECK(st[1].memory.activations > 2 * 8.0 * 1024 * 2);
  CHECK(estimate_memory(c, 2).total() == std::max(st[0].memory.total(), st[1].memory.total()));
  // The interleaved schedule keeps more in flight: (P - r - 1) * 2 + (V - 1) * P + 1 chunks.
  c.layout.vp = 2;
  const std::vector<StageMemory> iv = estimate_stage_memory(c, 2);
  CHECK(iv[0].in_flight == 5);
}

TEST_CASE("accounting: JSON keys") {
  const StackAccounting a = account_full_model(preset("deepseek-v3-tiny"), 128, 256.0);
  const nlohmann::json j = to_json(a);
  CHECK(j["scope"] == "full_model");
  CHECK(j["total_params"] == 6396848);
  CHECK(j["convention"] == "megatron-core num_floating_point_operations");
  for (const char* key : {"active_params", "flops_per_token", "flops_per_token_torchtitan",
                          "tokens_per_step", "flops_per_step"}) {
    CHECK(j.contains(key));
  }
  MemoryEstimate e;
  e.weights = 1;
  e.activations = 2;
  const nlohmann::json mj = to_json(e);
  CHECK(mj["weights_bytes"] == 1.0);
  CHECK(mj["activations_bytes"] == 2.0);
  CHECK(mj["total_bytes"] == 3.0);
  CHECK(mj.size() == 7);
}

}  // namespace moebench
