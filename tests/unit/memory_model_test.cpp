// The memory model by hand on small shapes (the arithmetic is in the comments, not computed by the
// functions under test), and how recompute, the pipeline schedule and ZeRO-1 move its terms. That
// it equals what the step allocates is tests/e2e/test_memory.py's check, against the measured peak.
#include "workloads/accounting/memory_model.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "workloads/accounting/accounting.hpp"

namespace moebench {
namespace {

// The tiny model: h 256, 4 heads, q_lora 96, kv_lora 64, qk 32 + 16, v 32, ffn 512, experts of
// 128 (16, top 4, one shared), vocabulary 1024.
RunConfig tiny(std::int64_t layers, std::int64_t dense, bool attention, std::int64_t seq) {
  RunConfig c;
  c.model = preset("deepseek-v3-tiny");
  c.workload.seq_len = seq;
  c.workload.layers = layers;
  c.workload.dense_layers = dense;
  c.workload.attention = attention;
  return c;
}

TEST_CASE("memory model: a dense-only slice, term by term") {
  // 1 dense layer, no attention, 2 ranks, 8 tokens each, FP32, AdamW.
  RunConfig c = tiny(1, 1, false, 8);
  c.layout.world = 2;
  const MemoryEstimate e = estimate_memory(c, 4);
  // (256 norm + 3 * 256 * 512) params at 4 bytes, and one router's bias row (16 FP32).
  CHECK(e.weights == 393472.0 * 4 + 64);
  CHECK(e.gradients == 393472.0 * 4);
  CHECK(e.optimizer == 393472.0 * 8);  // FP32 moments, no master copy of FP32 storage
  // One micro-batch in flight: its input and output (2h), and the layer's x1, norm output, rstd,
  // gate/up and activation: (2*256 + 256 + 256 + 1024 + 512) * 4 + 4 = 10244 bytes a token.
  CHECK(e.activations == 10244.0 * 8);
  CHECK(e.communication == 0.0);
  // Scratch: the layer's y and dxn2, the MLP's dact and dgate_up (512 + 1536 elements); two
  // gradients between layers (512); the inputs and the output gradients (512): all FP32.
  CHECK(e.workspace == (2048.0 + 512 + 512) * 4 * 8);
  CHECK(e.backend == 0.0);  // no attention, no fp8
  CHECK(e.tensors() == e.total());
  c.optimizer = Optimizer::none;
  CHECK(estimate_memory(c, 4).optimizer == 0.0);
}

TEST_CASE("memory model: recompute moves exactly its tensors from the kept to the scratch") {
  // 1 MoE layer with attention, 16 tokens, BF16: one micro-batch in flight.
  RunConfig c = tiny(1, 0, true, 16);
  const MemoryEstimate kept = estimate_memory(c, 2);
  const auto with = [&](const char* modules) {
    RunConfig r = c;
    r.workload.recompute = parse_recompute(modules);
    return estimate_memory(r, 2);
  };
  // mla_up_proj: q (4 * 48) and the kv up-projection (4 * 64) of every token, at 2 bytes.
  const MemoryEstimate up = with("mla_up_proj");
  CHECK(kept.activations - up.activations == 16.0 * (192 + 256) * 2);
  CHECK(up.workspace - kept.workspace == 16.0 * (192 + 256) * 2);
  // core_attn: the output (4 * 32 at 2 bytes) and the statistics (4 FP32).
  const MemoryEstimate core = with("core_attn");
  CHECK(kept.activations - core.activations == 16.0 * (128 * 2 + 4 * 4));
  // layernorm: both norms' outputs (2 * 256), kept once in scratch each.
  CHECK(kept.activations - with("layernorm").activations == 16.0 * 512 * 2);
  // moe_act: the routed experts' activation, top 4 rows of 128 a token.
  CHECK(kept.activations - with("moe_act").activations == 16.0 * 4 * 128 * 2);
  // shared_experts: gate/up and activation of the shared expert (3 * 128).
  CHECK(kept.activations - with("shared_experts").activations == 16.0 * 384 * 2);
  // mlp: no dense layer here, nothing moves.
  CHECK(with("mlp").activations == kept.activations);
  // Weights and optimizer state do not move.
  CHECK(up.weights == kept.weights);
  CHECK(up.optimizer == kept.optimizer);
}

TEST_CASE("memory model: the micro-batches in flight follow the schedule, receives included") {
  // The whole tiny model (4 layers) over 2 stages, 4 micro-batches of 8 tokens, BF16.
  RunConfig c = tiny(4, 1, true, 8);
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
  CHECK(st[0].embedding);
  CHECK(st[1].loss);
  CHECK(st[1].mtp == 1);
  CHECK(st[1].embedding);  // the MTP layer's copy
  const ParamCounts pc = param_counts(c.model);
  // Layer 0 dense and layer 1 MoE against layers 2 and 3 MoE, the head and the MTP layer; the
  // embedding tables cancel.
  CHECK(st[0].params - st[1].params ==
        doctest::Approx(static_cast<double>(pc.dense_mlp_per_layer) -
                        static_cast<double>(pc.output_head + pc.mtp + pc.shared_experts +
                                            pc.router + 16 * pc.expert)));
  // Two heads' logits (main and MTP) of one micro-batch, 8 tokens * 1024 * 2 bytes each.
  CHECK(st[1].memory.activations > 2 * 8.0 * 1024 * 2);
  CHECK(estimate_memory(c, 2).total() == std::max(st[0].memory.total(), st[1].memory.total()));
  // Interleaved (V 2): Megatron's (P - r - 1) * 2 + (V - 1) * P + 1 chunks, 5 on rank 0 and 3
  // on rank 1 (a receive lands before the block that would free a slot, never past the peak).
  c.layout.vp = 2;
  const std::vector<StageMemory> iv = estimate_stage_memory(c, 2);
  CHECK(iv[0].in_flight == 5);
  CHECK(iv[1].in_flight == 3);
}

TEST_CASE("memory model: ZeRO-1 shards the optimizer and holds gradient and parameter shards") {
  // 1 MoE layer without attention, world 4, EP 2 (dp 4, edp 2), BF16.
  RunConfig c = tiny(1, 0, false, 4);
  c.layout.world = 4;
  c.layout.ep = 2;
  const MemoryEstimate all = estimate_memory(c, 2);
  c.grad_reduce = GradReduce::reduce_scatter;
  const MemoryEstimate z = estimate_memory(c, 2);
  // dense: norm 256 + router 16 * 256 + 16 + shared 3 * 256 * 128 = 102672; 8 local experts of
  // 98304. Moments and master: 12 bytes each; shards: an FP32 gradient and a BF16 parameter.
  CHECK(all.optimizer == 12.0 * (102672 + 786432));
  CHECK(z.optimizer == (12.0 + 6.0) * (102672.0 / 4 + 786432.0 / 2));
  CHECK(z.weights == all.weights);
  CHECK(z.activations == all.activations);
}

TEST_CASE("memory model: FP8 saved inputs, moebench's and Transformer Engine's, k and v apart") {
  RunConfig c = tiny(1, 0, true, 16);
  c.precision = Precision::fp8;
  c.fp8_recipe = Fp8Recipe::mxfp8;
  const MemoryEstimate own = estimate_memory(c, 2);  // --fp8-saved-inputs on, the default
  RunConfig off = c;
  off.fp8_saved_inputs = false;
  const MemoryEstimate storage = estimate_memory(off, 2);
  // moebench's: the routed experts' rows 4 * 256 and weighted activation 4 * 128 a token at 1
  // byte and 1/32 of E8M0 scales instead of 2 bytes; their BF16 values move to the shared
  // scratch.
  CHECK(storage.activations - own.activations == doctest::Approx(16.0 * 1536 * (2 - 1 - 1.0 / 32)));
  CHECK(own.workspace - storage.workspace == doctest::Approx(16.0 * 1536 * 2));
  ActivationPolicy te;
  te.fp8_saved_inputs = true;
  te.fp8_all_inputs = true;
  te.fp8_weight_copies = false;
  const MemoryEstimate fp8 = estimate_stage_memory(c, 2, te).at(0).memory;
  // Transformer Engine's: every GEMM and attention input a token: xn 256, cqn 96, q 192, ckvn
  // 64, kv 256, o 128, xn2 256, xe 4 * 256, experts' act 4 * 128, shared act 128 = 2912.
  CHECK(storage.activations - fp8.activations == doctest::Approx(16.0 * 2912 * (2 - 1 - 1.0 / 32)));
  // No kept weight copies: the backend holds one GEMM's operands only.
  CHECK(fp8.backend == doctest::Approx(16.0 * 16 * 4 + fp8_operand_bytes(c)));
  te.separate_k_v = true;
  // k and v apart (4 * 48 + 4 * 32) instead of the kv up-projection (4 * 64), FP8.
  CHECK(estimate_stage_memory(c, 2, te).at(0).memory.activations - fp8.activations ==
        doctest::Approx(16.0 * 64 * (1 + 1.0 / 32)));
  // The host backend keeps an FP32 descale per 32 elements.
  CHECK(estimate_memory(off, 4).activations - estimate_memory(c, 4).activations ==
        doctest::Approx(16.0 * 1536 * (4 - 1 - 4.0 / 32)));
}

TEST_CASE("memory model: fp8 weight copies kept where they fit, else made at every GEMM") {
  RunConfig c = tiny(2, 0, true, 16);
  c.precision = Precision::fp8;
  RunConfig kept = c, none = c;
  kept.fp8_weight_copies = Fp8WeightCopies::kept;
  none.fp8_weight_copies = Fp8WeightCopies::per_gemm;
  const double with = estimate_memory(kept, 2).total(), without = estimate_memory(none, 2).total();
  // Two layouts of every parameter, a byte each (BF16 storage), the rest the same.
  CHECK(with - without == doctest::Approx(estimate_stage_memory(kept, 2)[0].params * 2));
  CHECK(estimate_memory(kept, 2).tensors() == estimate_memory(none, 2).tensors());
  // auto: kept with room for them, per-gemm when only that fits, kept when neither does (the
  // check then refuses); as given otherwise; kept without fp8.
  CHECK(resolve_fp8_weight_copies(c, 2, with) == Fp8WeightCopies::kept);
  CHECK(resolve_fp8_weight_copies(c, 2, with - 1) == Fp8WeightCopies::per_gemm);
  CHECK(resolve_fp8_weight_copies(c, 2, without - 1) == Fp8WeightCopies::kept);
  CHECK(resolve_fp8_weight_copies(none, 2, with) == Fp8WeightCopies::per_gemm);
  RunConfig bf16 = c;
  bf16.precision = Precision::bf16;
  CHECK(resolve_fp8_weight_copies(bf16, 2, 0) == Fp8WeightCopies::kept);
  // The optimizer's moments in BF16 storage: 2 bytes each instead of 4.
  RunConfig moments = c;
  moments.optimizer_state_dtype = OptimizerStateDtype::bf16;
  const StageMemory st = estimate_stage_memory(c, 2)[0];
  CHECK(estimate_stage_memory(c, 2)[0].memory.optimizer -
            estimate_stage_memory(moments, 2)[0].memory.optimizer ==
        doctest::Approx(st.params * 4));
  // FP32 storage (the cpu backend) keeps FP32 moments either way.
  CHECK(estimate_stage_memory(moments, 4)[0].memory.optimizer ==
        estimate_stage_memory(c, 4)[0].memory.optimizer);
}

TEST_CASE("memory model: a trainer's main gradients in its recipe's precision") {
  // The dense-only slice above (393472 parameters): FP32 main gradients in moebench's step and in
  // a Megatron-LM recipe's (main_grads_dtype fp32), BF16 in a Megatron-Bridge recipe's
  // (grad_reduce_in_fp32 = False): 2 bytes a parameter; nothing else moves.
  RunConfig c = tiny(1, 1, false, 8);
  c.layout.world = 2;
  const auto grads = [&](const ActivationPolicy& p) {
    return estimate_stage_memory(c, 2, p).front().memory;
  };
  CHECK(grads(run_policy(c)).gradients == 393472.0 * 4);
  c.recipe = "mlm-gb300-mxfp8-256";
  CHECK(transformer_engine_policy(c).main_grad_bytes == 4.0);
  const MemoryEstimate fp32 = grads(transformer_engine_policy(c));
  CHECK(fp32.gradients == 393472.0 * 4);
  c.recipe = "gb300-mxfp8-256";
  const MemoryEstimate bf16 = grads(transformer_engine_policy(c));
  CHECK(bf16.gradients == 393472.0 * 2);
  CHECK(bf16.total() == fp32.total() - 393472.0 * 2);
  CHECK(run_policy(c).main_grad_bytes == 4.0);  // moebench's own step keeps FP32 either way
}

TEST_CASE("memory model: JSON keys") {
  MemoryEstimate e;
  e.weights = 1;
  e.activations = 2;
  e.backend = 4;
  const nlohmann::json j = to_json(e);
  CHECK(j["weights_bytes"] == 1.0);
  CHECK(j["activations_bytes"] == 2.0);
  CHECK(j["backend_bytes"] == 4.0);
  CHECK(j["tensors_bytes"] == 3.0);
  CHECK(j["total_bytes"] == 7.0);
  CHECK(j.size() == 9);
}

TEST_CASE("memory model: an FP8 saved input's bytes per element, its scales included") {
  // One byte an element, plus one scale a tile: E8M0 (1 byte) or FP32 (4) per 32 with mxfp8,
  // FP32 per 128 blockwise, none per tensor.
  CHECK(fp8_saved_input_bytes(Fp8Recipe::mxfp8, true) == 1.0 + 1.0 / 32);
  CHECK(fp8_saved_input_bytes(Fp8Recipe::mxfp8, false) == 1.0 + 4.0 / 32);
  CHECK(fp8_saved_input_bytes(Fp8Recipe::blockwise, true) == 1.0 + 4.0 / 128);
  CHECK(fp8_saved_input_bytes(Fp8Recipe::tensor, true) == 1.0);
}

}  // namespace
}  // namespace moebench
