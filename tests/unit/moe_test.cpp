// MoeBlock (one process, EP 1) against central finite differences of L = sum(G .* y)
// (tolerances: tests/unit/layer_fixture.hpp). With balanced or zipf routing the selection does
// not depend on the logits, so the loss is smooth and every coordinate is checked; the router
// still gets a gradient through the combine weights (normalised sigmoid scores). With router
// selection the loss is piecewise smooth: coordinates whose perturbation flips a selection are
// skipped.
#include "workloads/layers/moe.hpp"

#include <doctest/doctest.h>

#include "harness/math/route.hpp"
#include "tests/unit/layer_fixture.hpp"

namespace moebench {
namespace {

using namespace layer_test;

constexpr int kLayer = 0;

// The experts every token chose, computed the way MoeBlock does (same GEMM, same router kernel).
std::vector<std::int32_t> selection(Harness& hx, Mat xn) {
  Compute& c = *hx.compute;
  const ModelConfig& m = hx.config.model;
  const std::int64_t n = hx.tokens(), E = m.n_routed_experts, k = m.num_experts_per_tok;
  Tensor logits = c.alloc(n, E, DType::f32), scores = c.alloc(n, E, DType::f32);
  Tensor idx = c.alloc(n, k, DType::i32), w = c.alloc(n, k, DType::f32);
  c.gemm(false, false, 1.0f, xn, hx.params.param(kLayer, ParamKind::router), 0.0f, logits);
  c.router_forward(router_params(hx.config), logits, hx.params.router_bias(kLayer), 0, scores, idx,
                   w);
  std::vector<std::int32_t> out(static_cast<std::size_t>(n * k));
  c.download_i32(idx, out.data());
  return out;
}

struct MoeCase {
  explicit MoeCase(const RunConfig& config) : hx(config) {
    n = hx.tokens();
    h = hx.hidden();
    xn = hx.random(n, h, 20);
    y = hx.compute->alloc(n, h);
    g = hx.read(hx.random(n, h, 21));
    gt = hx.compute->alloc(n, h);
    hx.write(gt, g);
  }
  double loss() {
    moe.forward(hx.ctx, kLayer, xn, y);
    return dot(g, hx.read(y));
  }
  // Forward, then backward from G into a dxn pre-filled with garbage (it is overwritten).
  Vec backward() {
    loss();
    hx.params.zero_grads();
    Tensor dxn = hx.filled(n, h, 1000.0f);
    moe.backward(hx.ctx, kLayer, xn, gt, dxn);
    return hx.read(dxn);
  }
  Harness hx;
  MoeBlock moe;
  std::int64_t n = 0, h = 0;
  Tensor xn, y, gt;
  Vec g;
};

void check_all(MoeCase& mc, const std::vector<int>& experts) {
  Harness& hx = mc.hx;
  auto loss = [&] { return mc.loss(); };
  const Vec dxn = mc.backward();
  check_fd(hx, "xn", mc.xn, dxn, loss, 32);
  check_fd(hx, "router", hx.params.param(kLayer, ParamKind::router),
           hx.read(hx.params.grad(kLayer, ParamKind::router)), loss, 32);
  for (ParamKind k : {ParamKind::shared_gate_up, ParamKind::shared_down}) {
    if (!hx.params.has(kLayer, k)) continue;
    check_fd(hx, param_kind_name(k), hx.params.param(kLayer, k), hx.read(hx.params.grad(kLayer, k)),
             loss);
  }
  for (int e : experts) {
    for (ParamKind k : {ParamKind::expert_gate_up, ParamKind::expert_down}) {
      check_fd(hx, std::string(param_kind_name(k)) + std::to_string(e),
               hx.params.param(kLayer, k, e), hx.read(hx.params.grad(kLayer, k, e)), loss, 16);
    }
  }
}

TEST_CASE("MoeBlock with balanced routing: input, router, shared and expert gradients match") {
  MoeCase mc(tiny_run(1, 0));
  // Balanced routing gives every expert n * k / E = 3 rows: every expert's gradient is live.
  check_all(mc, {0, 3, 4, 7});
  CHECK(mc.hx.sample.flops[static_cast<std::size_t>(Phase::experts)] > 0);
  CHECK(mc.hx.sample.flops[static_cast<std::size_t>(Phase::router)] > 0);
  // One rank: the all-to-alls send to self, a group of 1.
  CHECK(mc.hx.sample.group_size[static_cast<std::size_t>(Phase::dispatch)] == 1);
}

TEST_CASE("MoeBlock without shared experts overwrites dxn and still matches") {
  RunConfig c = tiny_run(1, 0);
  c.model.n_shared_experts = 0;
  MoeCase mc(c);
  check_all(mc, {1, 6});
}

TEST_CASE("MoeBlock with zipf routing (skewed, logit-independent selection) matches") {
  MoeCase mc(tiny_run(1, 0, {RoutingMode::zipf, 1.2}));
  // Zipf may leave an expert without tokens (a legitimately zero gradient): only the input and
  // the router, which every token reaches, are checked here.
  check_all(mc, {});
}

TEST_CASE("MoeBlock with router selection matches where no selection flips") {
  MoeCase mc(tiny_run(1, 0, {RoutingMode::router, 0.0}));
  Harness& hx = mc.hx;
  auto loss = [&] { return mc.loss(); };
  const Vec dxn = mc.backward();
  const std::vector<std::int32_t> base = selection(hx, mc.xn);
  auto same = [&] { return selection(hx, mc.xn) == base; };
  // The detector does see a flip: negating the input reverses the order of every token's scores.
  hx.compute->axpby(0.0f, mc.xn, -1.0f, mc.xn);
  CHECK_FALSE(same());
  hx.compute->axpby(0.0f, mc.xn, -1.0f, mc.xn);
  REQUIRE(same());
  const FdStats sx = check_fd(hx, "xn", mc.xn, dxn, loss, 48, same);
  const FdStats sr = check_fd(hx, "router", hx.params.param(kLayer, ParamKind::router),
                              hx.read(hx.params.grad(kLayer, ParamKind::router)), loss, 48, same);
  // Flips need a margin below ~1e-2 in a score: rare, so most coordinates are really checked.
  CHECK(sx.checked >= 40);
  CHECK(sr.checked >= 40);
  for (int e : {0, 5}) {
    check_fd(hx, "gate_up" + std::to_string(e),
             hx.params.param(kLayer, ParamKind::expert_gate_up, e),
             hx.read(hx.params.grad(kLayer, ParamKind::expert_gate_up, e)), loss, 16, same);
  }
}

TEST_CASE("router_params carries the model's routing settings") {
  RunConfig c = tiny_run(1, 0, {RoutingMode::zipf, 1.5});
  const RouterParams p = router_params(c);
  CHECK(p.experts == 8);
  CHECK(p.top_k == 2);
  CHECK(p.groups == 4);
  CHECK(p.topk_groups == 2);
  CHECK(p.scaling == 2.5f);
  CHECK(p.mode == kRouteZipf);
  CHECK(p.zipf_exponent == 1.5f);
  CHECK(p.seed == c.seed);
  c.workload.routing = {RoutingMode::router, 0.0};
  CHECK(router_params(c).mode == kRouteRouter);
  c.workload.routing = {RoutingMode::balanced, 0.0};
  CHECK(router_params(c).mode == kRouteBalanced);
}

}  // namespace
}  // namespace moebench
