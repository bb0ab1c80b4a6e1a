#include "workloads/layers/attention.hpp"

#include <cmath>

#include "workloads/accounting/accounting.hpp"

namespace moebench {

namespace {
struct Dims {
  std::int64_t n, h, heads, dn, dr, dq, dv, kvl, ql;
  bool q_lora;
};

Dims dims(const LayerContext& ctx) {
  const ModelConfig& m = ctx.config.model;
  return Dims{ctx.tokens,
              m.hidden_size,
              m.num_attention_heads,
              m.qk_nope_head_dim,
              m.qk_rope_head_dim,
              m.qk_head_dim(),
              m.v_head_dim,
              m.kv_lora_rank,
              m.q_lora_rank.value_or(0),
              m.q_lora_rank.has_value()};
}

MlaDims mla_dims(const Dims& d) {
  return MlaDims{d.heads, d.dn, d.dr, d.dv};
}

AttentionShape attention_shape(const LayerContext& ctx, const Dims& d) {
  AttentionShape s;
  s.batch = ctx.config.workload.micro_batch;
  s.seq_len = ctx.config.workload.seq_len;
  s.heads = d.heads;
  s.qk_dim = d.dq;
  s.v_dim = d.dv;
  s.scale = 1.0f / std::sqrt(static_cast<float>(d.dq));
  s.causal = true;
  return s;
}
}  // namespace

MlaAttention::Saved MlaAttention::saved(LayerContext& ctx) {
  Compute& c = ctx.compute;
  const Dims d = dims(ctx);
  const Recompute& r = ctx.config.workload.recompute;
  const auto kept = [&](bool recomputed, const char* name, Tensor& t, std::int64_t cols,
                        DType dtype) {
    return recomputed ? ctx.scratch.get(name, d.n, cols, dtype)
                      : ensure_rows(c, t, d.n, cols, dtype);
  };
  const DType act = c.activation_dtype();
  return Saved{kept(r.layernorm, "attention.xn", xn_, d.h, act),
               kept(r.mla_up_proj, "attention.q", q_, d.heads * d.dq, act),
               kept(r.mla_up_proj, "attention.kv", kv_, d.heads * (d.dn + d.dv), act),
               kept(r.core_attn, "attention.o", o_, d.heads * d.dv, act),
               kept(r.core_attn, "attention.stats", stats_, d.heads, DType::f32)};
}

void MlaAttention::up_projections(LayerContext& ctx, int layer, Mat xn, Mat q, Mat kv) {
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const Dims d = dims(ctx);
  const float theta = static_cast<float>(ctx.config.model.rope_theta);
  if (d.q_lora) {
    c.linear_gemm(false, false, 1.0f, cqn_.view().row_slice(0, d.n),
                  p.param(layer, ParamKind::wq_b), 0.0f, q);
  } else {
    c.linear_gemm(false, false, 1.0f, xn, p.param(layer, ParamKind::wq), 0.0f, q);
  }
  c.rope_forward(q, ctx.config.workload.seq_len, d.heads, d.dq, d.dn, d.dr, theta);
  c.linear_gemm(false, false, 1.0f, ckvn_.view().row_slice(0, d.n),
                p.param(layer, ParamKind::wkv_b), 0.0f, kv);
}

void MlaAttention::forward(LayerContext& ctx, int layer, Mat x, Mat x1) {
  auto scope = ctx.timer.scope(Phase::attention);
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const Dims d = dims(ctx);
  const float eps = static_cast<float>(ctx.config.model.rms_norm_eps);
  const float theta = static_cast<float>(ctx.config.model.rope_theta);
  const Saved s = saved(ctx);
  x_ = x;

  Mat rstd = ensure_rows(c, rstd_, d.n, 1, DType::f32);
  c.rmsnorm_forward(x, p.param(layer, ParamKind::attn_norm), eps, s.xn, rstd);

  if (d.q_lora) {
    Mat cq = ensure_rows(c, cq_, d.n, d.ql);
    Mat cqn = ensure_rows(c, cqn_, d.n, d.ql);
    c.linear_gemm(false, false, 1.0f, s.xn, p.param(layer, ParamKind::wq_a), 0.0f, cq);
    c.rmsnorm_forward(cq, p.param(layer, ParamKind::q_norm), eps, cqn,
                      ensure_rows(c, rstd_q_, d.n, 1, DType::f32));
  }
  const std::int64_t seq = ctx.config.workload.seq_len;

  // The kv down-projection also produces the shared rope key.
  Mat ckv_full = ctx.scratch.get("attention.ckv_full", d.n, d.kvl + d.dr);
  c.linear_gemm(false, false, 1.0f, s.xn, p.param(layer, ParamKind::wkv_a), 0.0f, ckv_full);
  Mat ckv = ensure_rows(c, ckv_, d.n, d.kvl);
  Mat krope = ensure_rows(c, krope_, d.n, d.dr);
  c.copy(ckv_full.col_slice(0, d.kvl), ckv);
  c.copy(ckv_full.col_slice(d.kvl, d.dr), krope);
  c.rope_forward(krope, seq, 1, d.dr, 0, d.dr, theta);
  Mat ckvn = ensure_rows(c, ckvn_, d.n, d.kvl);
  c.rmsnorm_forward(ckv, p.param(layer, ParamKind::kv_norm), eps, ckvn,
                    ensure_rows(c, rstd_kv_, d.n, 1, DType::f32));
  up_projections(ctx, layer, s.xn, s.q, s.kv);

  // Attention reads each head's k_nope and v in place from kv and the rope key every head
  // shares from krope (no per-head copies).
  c.attention_forward(attention_shape(ctx, d),
                      AttentionOperands::mla(mla_dims(d), s.q, s.kv, krope), s.o, s.stats);

  c.copy(x, x1);
  c.linear_gemm(false, false, 1.0f, s.o, p.param(layer, ParamKind::wo), 1.0f, x1);
  ctx.add_flops(Phase::attention,
                static_cast<double>(d.n) * mla_flops_per_token(ctx.config.model, seq));
}

void MlaAttention::backward(LayerContext& ctx, int layer, Mat dx1, Mat dx) {
  auto scope = ctx.timer.scope(Phase::attention);
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const Dims d = dims(ctx);
  const float theta = static_cast<float>(ctx.config.model.rope_theta);
  const std::int64_t seq = ctx.config.workload.seq_len;
  const Recompute& rc = ctx.config.workload.recompute;
  const Saved s = saved(ctx);
  const Mat krope = krope_.view().row_slice(0, d.n);

  // What the forward did not keep, in the forward's order and arithmetic (the same values).
  if (rc.layernorm) {
    c.rmsnorm_forward(x_, p.param(layer, ParamKind::attn_norm),
                      static_cast<float>(ctx.config.model.rms_norm_eps), s.xn,
                      rstd_.view().row_slice(0, d.n));
  }
  if (rc.mla_up_proj) up_projections(ctx, layer, s.xn, s.q, s.kv);
  const AttentionOperands in = AttentionOperands::mla(mla_dims(d), s.q, s.kv, krope);
  if (rc.core_attn) c.attention_forward(attention_shape(ctx, d), in, s.o, s.stats);

  // Output projection.
  Mat d_o = ctx.scratch.get("attention.do", d.n, d.heads * d.dv);
  c.linear_gemm(false, true, 1.0f, dx1, p.param(layer, ParamKind::wo), 0.0f, d_o);
  c.linear_gemm(true, false, 1.0f, s.o, dx1, 1.0f, p.grad(layer, ParamKind::wo));

  // The gradients land in the kv up-projection's layout; dkrope sums the heads' rope keys.
  Mat dq = ctx.scratch.get("attention.dq", d.n, d.heads * d.dq);
  Mat dkv = ctx.scratch.get("attention.dkv", d.n, d.heads * (d.dn + d.dv));
  Mat dkrope = ctx.scratch.get("attention.dkrope", d.n, d.dr);
  c.attention_backward(attention_shape(ctx, d), in, s.o, d_o, s.stats,
                       AttentionOperands::mla(mla_dims(d), dq, dkv, dkrope));
  c.rope_backward(dkrope, seq, 1, d.dr, 0, d.dr, theta);
  c.rope_backward(dq, seq, d.heads, d.dq, d.dn, d.dr, theta);

  // kv path.
  Mat dckvn = ctx.scratch.get("attention.dckvn", d.n, d.kvl);
  c.linear_gemm(false, true, 1.0f, dkv, p.param(layer, ParamKind::wkv_b), 0.0f, dckvn);
  c.linear_gemm(true, false, 1.0f, ckvn_.view().row_slice(0, d.n), dkv, 1.0f,
                p.grad(layer, ParamKind::wkv_b));
  Mat dckv = ctx.scratch.get("attention.dckv", d.n, d.kvl);
  c.rmsnorm_backward(dckvn, ckv_.view().row_slice(0, d.n), p.param(layer, ParamKind::kv_norm),
                     rstd_kv_.view().row_slice(0, d.n), dckv, p.grad(layer, ParamKind::kv_norm));
  Mat dckv_full = ctx.scratch.get("attention.dckv_full", d.n, d.kvl + d.dr);
  c.copy(dckv, dckv_full.col_slice(0, d.kvl));
  c.copy(dkrope, dckv_full.col_slice(d.kvl, d.dr));
  Mat dxn = ctx.scratch.get("attention.dxn", d.n, d.h);
  c.linear_gemm(false, true, 1.0f, dckv_full, p.param(layer, ParamKind::wkv_a), 0.0f, dxn);
  c.linear_gemm(true, false, 1.0f, s.xn, dckv_full, 1.0f, p.grad(layer, ParamKind::wkv_a));

  // q path.
  if (d.q_lora) {
    Mat dcqn = ctx.scratch.get("attention.dcqn", d.n, d.ql);
    c.linear_gemm(false, true, 1.0f, dq, p.param(layer, ParamKind::wq_b), 0.0f, dcqn);
    c.linear_gemm(true, false, 1.0f, cqn_.view().row_slice(0, d.n), dq, 1.0f,
                  p.grad(layer, ParamKind::wq_b));
    Mat dcq = ctx.scratch.get("attention.dcq", d.n, d.ql);
    c.rmsnorm_backward(dcqn, cq_.view().row_slice(0, d.n), p.param(layer, ParamKind::q_norm),
                       rstd_q_.view().row_slice(0, d.n), dcq, p.grad(layer, ParamKind::q_norm));
    c.linear_gemm(false, true, 1.0f, dcq, p.param(layer, ParamKind::wq_a), 1.0f, dxn);
    c.linear_gemm(true, false, 1.0f, s.xn, dcq, 1.0f, p.grad(layer, ParamKind::wq_a));
  } else {
    c.linear_gemm(false, true, 1.0f, dq, p.param(layer, ParamKind::wq), 1.0f, dxn);
    c.linear_gemm(true, false, 1.0f, s.xn, dq, 1.0f, p.grad(layer, ParamKind::wq));
  }

  // Input norm, then the residual.
  c.rmsnorm_backward(dxn, x_, p.param(layer, ParamKind::attn_norm), rstd_.view().row_slice(0, d.n),
                     dx, p.grad(layer, ParamKind::attn_norm));
  c.axpby(1.0f, dx1, 1.0f, dx);
}

}  // namespace moebench
