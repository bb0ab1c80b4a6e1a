// MlaAttention against central finite differences of L = sum(G .* x1), on the tiny model
// (tolerances: tests/unit/layer_fixture.hpp).
#include "workloads/layers/attention.hpp"

#include <doctest/doctest.h>

#include "tests/unit/layer_fixture.hpp"

namespace moebench {
namespace {

using namespace layer_test;

void check_attention(const RunConfig& config, const std::vector<ParamKind>& kinds) {
  Harness hx(config);
  const std::int64_t n = hx.tokens(), h = hx.hidden();
  Tensor x = hx.random(n, h, 1);
  Tensor x1 = hx.compute->alloc(n, h);
  const Vec g = hx.read(hx.random(n, h, 2));
  Tensor gt = hx.compute->alloc(n, h);
  hx.write(gt, g);
  MlaAttention attn;
  auto loss = [&] {
    attn.forward(hx.ctx, 0, x, x1);
    return dot(g, hx.read(x1));
  };
  loss();
  hx.params.zero_grads();  // the norms' weight gradients accumulate
  // dx is overwritten, so stale contents must not leak into it.
  Tensor dx = hx.filled(n, h, 1000.0f);
  attn.backward(hx.ctx, 0, gt, dx);

  check_fd(hx, "x", x, hx.read(dx), loss, 32);
  for (ParamKind k : kinds) {
    check_fd(hx, param_kind_name(k), hx.params.param(0, k), hx.read(hx.params.grad(0, k)), loss);
  }
  CHECK(hx.sample.flops[static_cast<std::size_t>(Phase::attention)] > 0);
  CHECK(hx.timer.times()[static_cast<std::size_t>(Phase::attention)] > 0);
}

TEST_CASE("MlaAttention with the q_lora bottleneck: gradients match finite differences") {
  check_attention(tiny_run(1, 1),
                  {ParamKind::attn_norm, ParamKind::wq_a, ParamKind::q_norm, ParamKind::wq_b,
                   ParamKind::wkv_a, ParamKind::kv_norm, ParamKind::wkv_b, ParamKind::wo});
}

TEST_CASE("MlaAttention with a direct q projection (q_lora_rank null): gradients match") {
  RunConfig c = tiny_run(1, 1);
  c.model.q_lora_rank.reset();
  check_attention(c, {ParamKind::attn_norm, ParamKind::wq, ParamKind::wkv_a, ParamKind::kv_norm,
                      ParamKind::wkv_b, ParamKind::wo});
}

TEST_CASE("MlaAttention is causal: a later token does not change an earlier output") {
  Harness hx(tiny_run(1, 1));
  const std::int64_t n = hx.tokens(), h = hx.hidden(), seq = hx.config.workload.seq_len;
  Tensor x = hx.random(n, h, 3);
  Tensor x1 = hx.compute->alloc(n, h);
  MlaAttention attn;
  attn.forward(hx.ctx, 0, x, x1);
  const Vec before = hx.read(x1);
  // Change the last token of the first sequence.
  Vec xv = hx.read(x);
  for (std::int64_t c = 0; c < h; ++c) xv[static_cast<std::size_t>((seq - 1) * h + c)] += 0.5f;
  hx.write(x, xv);
  attn.forward(hx.ctx, 0, x, x1);
  const Vec after = hx.read(x1);
  for (std::int64_t i = 0; i < (seq - 1) * h; ++i) {
    CHECK(after[static_cast<std::size_t>(i)] == before[static_cast<std::size_t>(i)]);
  }
  // The changed token itself, and nothing of the second sequence, which cannot see it.
  bool changed = false;
  for (std::int64_t c = 0; c < h; ++c) {
    const auto i = static_cast<std::size_t>((seq - 1) * h + c);
    changed = changed || after[i] != before[i];
  }
  CHECK(changed);
  for (std::int64_t i = seq * h; i < n * h; ++i) {
    CHECK(after[static_cast<std::size_t>(i)] == before[static_cast<std::size_t>(i)]);
  }
}

}  // namespace
}  // namespace moebench
