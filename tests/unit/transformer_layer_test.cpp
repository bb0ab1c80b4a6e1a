// TransformerLayer (dense and MoE, attention on and off) against central finite differences of
// L = sum(G .* out) (tolerances: tests/unit/layer_fixture.hpp). Routing is balanced, so the loss
// is smooth.
#include "workloads/layers/transformer_layer.hpp"

#include <doctest/doctest.h>

#include "tests/unit/layer_fixture.hpp"

namespace moebench {
namespace {

using namespace layer_test;

const std::vector<ParamKind> kAttentionKinds = {
    ParamKind::attn_norm, ParamKind::wq_a,    ParamKind::q_norm, ParamKind::wq_b,
    ParamKind::wkv_a,     ParamKind::kv_norm, ParamKind::wkv_b,  ParamKind::wo};

// Layer `index` of a 2-layer stack (layer 0 dense, layer 1 MoE).
void check_layer(const RunConfig& config, int index, std::vector<ParamKind> kinds,
                 const std::vector<int>& experts) {
  Harness hx(config);
  const std::int64_t n = hx.tokens(), h = hx.hidden();
  TransformerLayer layer(index);
  Tensor x = hx.random(n, h, 30);
  Tensor out = hx.compute->alloc(n, h);
  const Vec g = hx.read(hx.random(n, h, 31));
  Tensor gt = hx.compute->alloc(n, h);
  hx.write(gt, g);
  auto loss = [&] {
    layer.forward(hx.ctx, x, out);
    return dot(g, hx.read(out));
  };
  loss();
  hx.params.zero_grads();
  Tensor dx = hx.filled(n, h, 1000.0f);  // overwritten, so garbage must not leak
  layer.backward(hx.ctx, gt, dx);

  check_fd(hx, "x", x, hx.read(dx), loss, 32);
  for (ParamKind k : kinds) {
    check_fd(hx, param_kind_name(k), hx.params.param(index, k), hx.read(hx.params.grad(index, k)),
             loss, 16);
  }
  for (int e : experts) {
    for (ParamKind k : {ParamKind::expert_gate_up, ParamKind::expert_down}) {
      check_fd(hx, std::string(param_kind_name(k)) + std::to_string(e),
               hx.params.param(index, k, e), hx.read(hx.params.grad(index, k, e)), loss, 12);
    }
  }
  // The other layer's gradients are untouched (still zero).
  const int other = 1 - index;
  CHECK(max_abs_of(hx.read(hx.params.grad(other, ParamKind::mlp_norm))) == 0.0f);
}

TEST_CASE("TransformerLayer, dense: gradients of the input and every weight match") {
  std::vector<ParamKind> kinds = kAttentionKinds;
  kinds.insert(kinds.end(), {ParamKind::mlp_norm, ParamKind::dense_gate_up, ParamKind::dense_down});
  check_layer(tiny_run(2, 1), 0, kinds, {});
}

TEST_CASE("TransformerLayer, MoE: gradients of the input and every weight match") {
  std::vector<ParamKind> kinds = kAttentionKinds;
  kinds.insert(kinds.end(), {ParamKind::mlp_norm, ParamKind::router, ParamKind::shared_gate_up,
                             ParamKind::shared_down});
  check_layer(tiny_run(2, 1), 1, kinds, {2, 5});
}

TEST_CASE("TransformerLayer without attention: out = x + F(norm(x)), gradients match") {
  RunConfig c = tiny_run(2, 1);
  c.workload.attention = false;
  check_layer(c, 0, {ParamKind::mlp_norm, ParamKind::dense_gate_up, ParamKind::dense_down}, {});
  check_layer(c, 1, {ParamKind::mlp_norm, ParamKind::router, ParamKind::shared_down}, {0});
}

// Forward then backward of layer `index`; the output, the input gradient and every gradient of the
// layer, downloaded.
// kept_bytes: what the rank holds after the forward besides the shared scratch (the parameters,
// the inputs and what the layer keeps for its backward).
std::vector<Vec> layer_pass(const RunConfig& config, int index,
                            std::int64_t* kept_bytes = nullptr) {
  Harness hx(config);
  const std::int64_t n = hx.tokens(), h = hx.hidden();
  TransformerLayer layer(index);
  Tensor x = hx.random(n, h, 30);
  Tensor out = hx.compute->alloc(n, h);
  Tensor gt = hx.random(n, h, 31);
  layer.forward(hx.ctx, x, out);
  if (kept_bytes != nullptr) {
    *kept_bytes = hx.compute->allocation_stats().live_bytes - hx.scratch.bytes();
  }
  hx.params.zero_grads();
  Tensor dx = hx.filled(n, h, 1000.0f);
  layer.backward(hx.ctx, gt, dx);
  std::vector<Vec> got = {hx.read(out), hx.read(dx)};
  got.push_back(hx.read(hx.params.flat_grads(ParamGroup::dense)));
  got.push_back(hx.read(hx.params.flat_grads(ParamGroup::expert)));
  return got;
}

TEST_CASE(
    "TransformerLayer with every module recomputed: the same output and gradients, bit for "
    "bit, dense and MoE") {
  for (int index : {0, 1}) {
    RunConfig kept = tiny_run(2, 1);
    RunConfig recomputed = kept;
    recomputed.workload.recompute =
        parse_recompute("core_attn,layernorm,mla_up_proj,mlp,moe_act,shared_experts");
    const std::vector<Vec> a = layer_pass(kept, index), b = layer_pass(recomputed, index);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CAPTURE(index);
      CAPTURE(i);
      CHECK(a[i] == b[i]);
    }
  }
}

TEST_CASE(
    "TransformerLayer, MoE, fp8: the experts' inputs kept as FP8 copies give the same output and "
    "gradients, bit for bit, in less memory") {
  for (Fp8Recipe recipe : {Fp8Recipe::tensor, Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    for (const char* recompute : {"", "moe_act"}) {
      CAPTURE(to_string(recipe));
      CAPTURE(recompute);
      RunConfig storage = tiny_run(2, 1);
      storage.precision = Precision::fp8;
      storage.fp8_recipe = recipe;
      storage.workload.recompute = parse_recompute(recompute);
      storage.fp8_saved_inputs = false;
      RunConfig saved = storage;
      saved.fp8_saved_inputs = true;
      std::int64_t kept_storage = 0, kept_saved = 0;
      const std::vector<Vec> a = layer_pass(storage, 1, &kept_storage);
      const std::vector<Vec> b = layer_pass(saved, 1, &kept_saved);
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        CAPTURE(i);
        CHECK(a[i] == b[i]);
      }
      // fp8 changes the result at all (the comparison above is not between two FP32 runs).
      RunConfig fp32 = storage;
      fp32.precision = Precision::fp32;
      CHECK(layer_pass(fp32, 1)[3] != a[3]);
      // The rows (12 tokens x top-2 x hidden 16) and, without the recompute, the weighted
      // activation (x 8) kept as one byte an element and the scales instead of four. Per tensor
      // each expert's copy adds one FP32 descale and at most 3 bytes of word rounding; the block
      // recipes add a descale per tile, many for so few rows, but still less than they save.
      const std::int64_t elements = 12 * 2 * (16 + (recompute[0] == 0 ? 8 : 0));
      const std::int64_t copies = 8 * (recompute[0] == 0 ? 2 : 1);
      CHECK(kept_storage - kept_saved <= elements * 3);
      if (recipe == Fp8Recipe::tensor) {
        CHECK(kept_storage - kept_saved >= elements * 3 - copies * (4 + 3));
      } else {
        CHECK(kept_saved < kept_storage);
      }
    }
  }
}

}  // namespace
}  // namespace moebench
