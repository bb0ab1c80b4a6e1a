#include "workloads/layers/transformer_layer.hpp"

namespace moebench {

Phase TransformerLayer::mlp_phase(const LayerContext& ctx) const {
  return ctx.params.is_dense_layer(index_) ? Phase::dense_mlp : Phase::router;
}

Mat TransformerLayer::xn2(LayerContext& ctx) {
  const std::int64_t n = ctx.tokens, h = ctx.config.model.hidden_size;
  if (ctx.config.workload.recompute.layernorm) return ctx.scratch.get("layer.xn2", n, h);
  return ensure_rows(ctx.compute, xn2_, n, h);
}

void TransformerLayer::forward(LayerContext& ctx, Mat x, Mat out) {
  Compute& c = ctx.compute;
  const std::int64_t n = ctx.tokens, h = ctx.config.model.hidden_size;
  Mat x1 = ensure_rows(c, x1_, n, h);
  if (ctx.config.workload.attention) {
    attention_.forward(ctx, index_, x, x1);
  } else {
    c.copy(x, x1);
  }
  Mat xn2 = this->xn2(ctx);
  {
    auto scope = ctx.timer.scope(mlp_phase(ctx));
    c.rmsnorm_forward(x1, ctx.params.param(index_, ParamKind::mlp_norm),
                      static_cast<float>(ctx.config.model.rms_norm_eps), xn2,
                      ensure_rows(c, rstd2_, n, 1, DType::f32));
  }
  Mat y = ctx.scratch.get("layer.y", n, h);
  if (ctx.params.is_dense_layer(index_)) {
    dense_.forward(ctx, Phase::dense_mlp, ctx.config.workload.recompute.mlp,
                   ctx.params.param(index_, ParamKind::dense_gate_up),
                   ctx.params.param(index_, ParamKind::dense_down), xn2, y);
  } else {
    moe_.forward(ctx, index_, xn2, y);
  }
  auto scope = ctx.timer.scope(mlp_phase(ctx));
  c.copy(x1, out);
  c.axpby(1.0f, y, 1.0f, out);
}

void TransformerLayer::backward(LayerContext& ctx, Mat dout, Mat dx) {
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const std::int64_t n = ctx.tokens, h = ctx.config.model.hidden_size;
  const Mat x1 = x1_.view().row_slice(0, n);
  const Mat rstd2 = rstd2_.view().row_slice(0, n);
  Mat xn2 = this->xn2(ctx);
  if (ctx.config.workload.recompute.layernorm) {
    auto scope = ctx.timer.scope(mlp_phase(ctx));
    c.rmsnorm_forward(x1, p.param(index_, ParamKind::mlp_norm),
                      static_cast<float>(ctx.config.model.rms_norm_eps), xn2, rstd2);
  }
  Mat dxn2 = ctx.scratch.get("layer.dxn2", n, h);
  if (p.is_dense_layer(index_)) {
    dense_.backward(ctx, Phase::dense_mlp, ctx.config.workload.recompute.mlp,
                    p.param(index_, ParamKind::dense_gate_up),
                    p.param(index_, ParamKind::dense_down), xn2, dout,
                    p.grad(index_, ParamKind::dense_gate_up), p.grad(index_, ParamKind::dense_down),
                    dxn2, false);
  } else {
    moe_.backward(ctx, index_, xn2, dout, dxn2);
  }
  Mat dx1 = ctx.config.workload.attention ? ctx.scratch.get("layer.dx1", n, h) : dx;
  {
    auto scope = ctx.timer.scope(mlp_phase(ctx));
    c.rmsnorm_backward(dxn2, x1, p.param(index_, ParamKind::mlp_norm), rstd2, dx1,
                       p.grad(index_, ParamKind::mlp_norm));
    c.axpby(1.0f, dout, 1.0f, dx1);
  }
  if (ctx.config.workload.attention) attention_.backward(ctx, index_, dx1, dx);
}

}  // namespace moebench
