// SwigluMlp against a host reference and central finite differences of L = sum(G .* y)
// (tolerances: tests/unit/layer_fixture.hpp).
#include "workloads/layers/mlp.hpp"

#include <doctest/doctest.h>

#include "tests/unit/layer_fixture.hpp"

namespace moebench {
namespace {

using namespace layer_test;

struct MlpCase {
  explicit MlpCase(Harness& hx)
      : n(hx.tokens()),
        h(hx.hidden()),
        w_gate_up(hx.random(h, 2 * f, 10, 0.25f)),
        w_down(hx.random(f, h, 11, 0.3f)),
        xn(hx.random(n, h, 12)),
        y(hx.compute->alloc(n, h)) {}
  std::int64_t n, h, f = 12;
  Tensor w_gate_up, w_down, xn, y;
};

TEST_CASE("SwigluMlp forward equals (silu(x Wg) * x Wu) Wd computed on the host") {
  Harness hx(tiny_run(1, 1));
  MlpCase m(hx);
  SwigluMlp mlp;
  mlp.forward(hx.ctx, Phase::dense_mlp, false, m.w_gate_up, m.w_down, m.xn, m.y);
  const Vec x = hx.read(m.xn), wgu = hx.read(m.w_gate_up), wd = hx.read(m.w_down);
  const Vec y = hx.read(m.y);
  for (std::int64_t t = 0; t < m.n; ++t) {
    std::vector<double> act(static_cast<std::size_t>(m.f));
    for (std::int64_t j = 0; j < m.f; ++j) {
      double gate = 0, up = 0;
      for (std::int64_t c = 0; c < m.h; ++c) {
        const double xv = x[static_cast<std::size_t>(t * m.h + c)];
        gate += xv * wgu[static_cast<std::size_t>(c * 2 * m.f + j)];
        up += xv * wgu[static_cast<std::size_t>(c * 2 * m.f + m.f + j)];
      }
      act[static_cast<std::size_t>(j)] = gate / (1.0 + std::exp(-gate)) * up;
    }
    for (std::int64_t c = 0; c < m.h; ++c) {
      double want = 0;
      for (std::int64_t j = 0; j < m.f; ++j) {
        want += act[static_cast<std::size_t>(j)] * wd[static_cast<std::size_t>(j * m.h + c)];
      }
      // FP32 sums of 16 and 12 O(1) products: ~1e-6 relative; 1e-5 absolute leaves margin.
      CHECK(std::abs(y[static_cast<std::size_t>(t * m.h + c)] - want) <= 1e-5);
    }
  }
  // 3 GEMMs x (forward, dgrad, wgrad) x 2 n h f.
  CHECK(hx.sample.flops[static_cast<std::size_t>(Phase::dense_mlp)] ==
        doctest::Approx(18.0 * m.n * m.h * m.f));
}

TEST_CASE("SwigluMlp gradients match finite differences; accumulate adds into dxn") {
  Harness hx(tiny_run(1, 1));
  MlpCase m(hx);
  SwigluMlp mlp;
  const Vec g = hx.read(hx.random(m.n, m.h, 13));
  Tensor gt = hx.compute->alloc(m.n, m.h);
  hx.write(gt, g);
  auto loss = [&] {
    mlp.forward(hx.ctx, Phase::shared_expert, false, m.w_gate_up, m.w_down, m.xn, m.y);
    return dot(g, hx.read(m.y));
  };
  loss();
  // dxn (accumulate = false) is overwritten: a stale value must not leak. Weight gradients
  // accumulate over micro-batches: from 1000 they end at 1000 + the gradient.
  Tensor dwgu = hx.filled(m.h, 2 * m.f, 1000.0f);
  Tensor dwd = hx.filled(m.f, m.h, 1000.0f);
  Tensor dxn = hx.filled(m.n, m.h, 1000.0f);
  mlp.backward(hx.ctx, Phase::shared_expert, false, m.w_gate_up, m.w_down, m.xn, gt, dwgu, dwd, dxn,
               false);
  const Vec dx = hx.read(dxn);
  Vec dgu = hx.read(dwgu), dd = hx.read(dwd);
  for (float& v : dgu) v -= 1000.0f;
  for (float& v : dd) v -= 1000.0f;
  check_fd(hx, "xn", m.xn, dx, loss, 32);
  // Subtracting 1000 costs FP32 resolution: 1000 * 2^-24 ~ 6e-5 absolute, far under the check's
  // tolerance.
  check_fd(hx, "gate_up", m.w_gate_up, dgu, loss, 32);
  check_fd(hx, "down", m.w_down, dd, loss, 32);

  // accumulate = true: dxn += the same gradient.
  hx.compute->fill(dxn, 0.5f);
  mlp.backward(hx.ctx, Phase::shared_expert, false, m.w_gate_up, m.w_down, m.xn, gt, dwgu, dwd, dxn,
               true);
  const Vec acc = hx.read(dxn);
  for (std::size_t i = 0; i < acc.size(); ++i) {
    // One FP32 addition of O(1) values.
    CHECK(acc[i] == doctest::Approx(dx[i] + 0.5f).epsilon(1e-6));
  }
}

TEST_CASE("SwigluMlp with recompute gives the same output and the same gradients, bit for bit") {
  Harness hx(tiny_run(1, 1));
  MlpCase m(hx);
  Tensor gt = hx.random(m.n, m.h, 13);
  // Kept, then recomputed: the recompute repeats the forward's arithmetic on the same input.
  Vec got[2][4];
  for (int recompute = 0; recompute < 2; ++recompute) {
    SwigluMlp mlp;
    mlp.forward(hx.ctx, Phase::dense_mlp, recompute == 1, m.w_gate_up, m.w_down, m.xn, m.y);
    Tensor dwgu = hx.filled(m.h, 2 * m.f, 0.0f);
    Tensor dwd = hx.filled(m.f, m.h, 0.0f);
    Tensor dxn = hx.filled(m.n, m.h, 0.0f);
    // Scratch written by someone else between the passes must not matter.
    if (recompute == 1) hx.compute->fill(hx.scratch.get("dense_mlp.act", m.n, m.f), 7.0f);
    mlp.backward(hx.ctx, Phase::dense_mlp, recompute == 1, m.w_gate_up, m.w_down, m.xn, gt, dwgu,
                 dwd, dxn, false);
    got[recompute][0] = hx.read(m.y);
    got[recompute][1] = hx.read(dxn);
    got[recompute][2] = hx.read(dwgu);
    got[recompute][3] = hx.read(dwd);
  }
  for (int i = 0; i < 4; ++i) CHECK(got[0][i] == got[1][i]);
}

}  // namespace
}  // namespace moebench
