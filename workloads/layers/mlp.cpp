#include "workloads/layers/mlp.hpp"

#include <string>

namespace moebench {

std::pair<Mat, Mat> SwigluMlp::saved(LayerContext& ctx, Phase phase, bool recompute, std::int64_t n,
                                     std::int64_t f) {
  if (!recompute) {
    return {ensure_rows(ctx.compute, gate_up_, n, 2 * f), ensure_rows(ctx.compute, act_, n, f)};
  }
  const std::string name(phase_name(phase));
  return {ctx.scratch.get(name + ".gate_up", n, 2 * f), ctx.scratch.get(name + ".act", n, f)};
}

void SwigluMlp::forward(LayerContext& ctx, Phase phase, bool recompute, Mat w_gate_up, Mat w_down,
                        Mat xn, Mat y) {
  auto scope = ctx.timer.scope(phase);
  Compute& c = ctx.compute;
  const std::int64_t n = xn.rows, f = w_down.rows;
  const auto [gate_up, act] = saved(ctx, phase, recompute, n, f);
  c.linear_gemm(false, false, 1.0f, xn, w_gate_up, 0.0f, gate_up);
  c.swiglu_forward(gate_up, act);
  c.linear_gemm(false, false, 1.0f, act, w_down, 0.0f, y);
  // 3 GEMMs of n x h x f each way, times forward + dgrad + wgrad.
  ctx.add_flops(phase, 3.0 * 3.0 * 2.0 * static_cast<double>(n) * xn.cols * f);
}

void SwigluMlp::backward(LayerContext& ctx, Phase phase, bool recompute, Mat w_gate_up, Mat w_down,
                         Mat xn, Mat dy, Mat dw_gate_up, Mat dw_down, Mat dxn, bool accumulate) {
  auto scope = ctx.timer.scope(phase);
  Compute& c = ctx.compute;
  const std::int64_t n = dy.rows, f = w_down.rows;
  const auto [gate_up, act] = saved(ctx, phase, recompute, n, f);
  if (recompute) {
    c.linear_gemm(false, false, 1.0f, xn, w_gate_up, 0.0f, gate_up);
    c.swiglu_forward(gate_up, act);
  }
  const std::string name(phase_name(phase));
  Mat dact = ctx.scratch.get(name + ".dact", n, f);
  Mat dgate_up = ctx.scratch.get(name + ".dgate_up", n, 2 * f);
  c.linear_gemm(false, true, 1.0f, dy, w_down, 0.0f, dact);
  c.linear_gemm(true, false, 1.0f, act, dy, 1.0f, dw_down);
  c.swiglu_backward(gate_up, dact, dgate_up);
  c.linear_gemm(false, true, 1.0f, dgate_up, w_gate_up, accumulate ? 1.0f : 0.0f, dxn);
  c.linear_gemm(true, false, 1.0f, xn, dgate_up, 1.0f, dw_gate_up);
}

}  // namespace moebench
