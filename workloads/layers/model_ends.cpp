#include "workloads/layers/model_ends.hpp"

#include "workloads/accounting/accounting.hpp"

namespace moebench {

namespace {
float eps_of(const LayerContext& ctx) {
  return static_cast<float>(ctx.config.model.rms_norm_eps);
}
// A GEMM's forward, dgrad and wgrad: what the layers count at forward.
double fwd_bwd_gemm_flops(std::int64_t m, std::int64_t n, std::int64_t k) {
  return 3.0 * gemm_flops(static_cast<double>(m), static_cast<double>(n), static_cast<double>(k));
}
}  // namespace

void embedding_forward(LayerContext& ctx, Mat ids, Mat out) {
  auto scope = ctx.timer.scope(Phase::head);
  ctx.compute.gather_rows(ctx.params.param(kEmbeddingLayer, ParamKind::embedding), ids, out);
}

void embedding_backward(LayerContext& ctx, Mat ids, Mat dout) {
  auto scope = ctx.timer.scope(Phase::head);
  ctx.compute.scatter_add_rows(dout, ids, Mat(),
                               ctx.params.grad(kEmbeddingLayer, ParamKind::embedding));
}

ModelHead::ModelHead(const Workload& w) {
  for (int k = 0; k < w.mtp; ++k) depths_.push_back(std::make_unique<Depth>(mtp_layer(w, k)));
}

void ModelHead::forward(LayerContext& ctx, Mat h, Mat ids, float grad_scale, Mat losses) {
  Compute& c = ctx.compute;
  const ParamStore& p = ctx.params;
  const Workload& w = ctx.config.workload;
  const std::int64_t T = ctx.tokens, H = ctx.config.model.hidden_size;
  const std::int64_t V = ctx.config.model.vocab_size;
  const float eps = eps_of(ctx);
  const Mat w_out = p.param(output_head_layer(w), ParamKind::output_head);
  // The shared output head and the loss of one head: logits, then (in place) their gradient.
  const auto head_loss = [&](Mat x, Tensor& logits, int column, float scale, Mat loss) {
    Mat z = ensure_rows(c, logits, T, V);
    c.gemm(false, false, 1.0f, x, w_out, 0.0f, z);
    c.cross_entropy(z, ids.col_slice(column, 1), scale, loss);
    ctx.add_flops(Phase::head, fwd_bwd_gemm_flops(T, V, H));
  };

  h_ = h;
  {
    auto scope = ctx.timer.scope(Phase::head);
    Mat n = ensure_rows(c, n_, T, H);
    c.rmsnorm_forward(h, p.param(final_norm_layer(w), ParamKind::final_norm), eps, n,
                      ensure_rows(c, rstd_, T, 1, DType::f32));
    head_loss(n, logits_, 1, grad_scale, losses.col_slice(0, 1));
  }
  Mat prev = n_.view().row_slice(0, T);
  const float mtp_scale =
      depths_.empty() ? 0.0f : grad_scale * kMtpLossScale / static_cast<float>(depths_.size());
  for (std::size_t k = 0; k < depths_.size(); ++k) {
    Depth& d = *depths_[k];
    const int col = static_cast<int>(k);
    Mat x = ensure_rows(c, d.x, T, H);
    {
      auto scope = ctx.timer.scope(Phase::head);
      Mat e = ensure_rows(c, d.e, T, H);
      c.gather_rows(p.param(kEmbeddingLayer, ParamKind::embedding), ids.col_slice(col + 1, 1), e);
      Mat en = ensure_rows(c, d.en, T, H);
      c.rmsnorm_forward(e, p.param(d.layer, ParamKind::mtp_enorm), eps, en,
                        ensure_rows(c, d.en_rstd, T, 1, DType::f32));
      Mat hn = ensure_rows(c, d.prev_n, T, H);
      c.rmsnorm_forward(prev, p.param(d.layer, ParamKind::mtp_hnorm), eps, hn,
                        ensure_rows(c, d.prev_rstd, T, 1, DType::f32));
      // [en; hn] W_eh as two GEMMs over the halves of W_eh: the concatenation is never built.
      const Mat w_eh = p.param(d.layer, ParamKind::mtp_eh_proj);
      c.linear_gemm(false, false, 1.0f, en, w_eh.row_slice(0, H), 0.0f, x);
      c.linear_gemm(false, false, 1.0f, hn, w_eh.row_slice(H, H), 1.0f, x);
      ctx.add_flops(Phase::head, fwd_bwd_gemm_flops(T, H, 2 * H));
    }
    Mat y = ensure_rows(c, d.y, T, H);
    d.transformer.forward(ctx, x, y);
    {
      auto scope = ctx.timer.scope(Phase::head);
      Mat m = ensure_rows(c, d.m, T, H);
      c.rmsnorm_forward(y, p.param(d.layer, ParamKind::mtp_norm), eps, m,
                        ensure_rows(c, d.m_rstd, T, 1, DType::f32));
      head_loss(m, d.logits, col + 2, mtp_scale, losses.col_slice(col + 1, 1));
    }
    prev = y;
  }
}

void ModelHead::backward(LayerContext& ctx, Mat ids, Mat dh, const std::function<void(int)>& done) {
  Compute& c = ctx.compute;
  ParamStore& p = ctx.params;
  const Workload& w = ctx.config.workload;
  const std::int64_t T = ctx.tokens, H = ctx.config.model.hidden_size;
  const int head_layer = output_head_layer(w);
  const Mat w_out = p.param(head_layer, ParamKind::output_head);
  const Mat dw_out = p.grad(head_layer, ParamKind::output_head);
  const auto rows = [T](const Tensor& t) { return t.view().row_slice(0, T); };

  // Every head's GEMMs first, so that the shared W_out's gradient is final before the layers
  // below it (the gradient buckets' order): dW_out += x^T dz, then dx = dz W_out^T, written over
  // the MTP heads' inputs m (no longer needed) and into dn for the main head.
  Mat dn = ctx.scratch.get("head.dn", T, H);
  {
    auto scope = ctx.timer.scope(Phase::head);
    c.gemm(true, false, 1.0f, rows(n_), rows(logits_), 1.0f, dw_out);
    c.gemm(false, true, 1.0f, rows(logits_), w_out, 0.0f, dn);
    for (const auto& d : depths_) {
      c.gemm(true, false, 1.0f, rows(d->m), rows(d->logits), 1.0f, dw_out);
      c.gemm(false, true, 1.0f, rows(d->logits), w_out, 0.0f, rows(d->m));
    }
  }
  done(head_layer);

  Mat dy = ctx.scratch.get("head.dy", T, H);
  Mat dx = ctx.scratch.get("head.dx", T, H);
  Mat de = ctx.scratch.get("head.de", T, H);
  for (std::size_t k = depths_.size(); k-- > 0;) {
    Depth& d = *depths_[k];
    const int col = static_cast<int>(k);
    const Mat prev = k == 0 ? rows(n_) : rows(depths_[k - 1]->y);
    {
      auto scope = ctx.timer.scope(Phase::head);
      c.rmsnorm_backward(rows(d.m), rows(d.y), p.param(d.layer, ParamKind::mtp_norm),
                         rows(d.m_rstd), dy, p.grad(d.layer, ParamKind::mtp_norm));
      // The next depth's gradient with respect to this one's output (its hnorm's input).
      if (k + 1 < depths_.size()) c.axpby(1.0f, de, 1.0f, dy);
    }
    d.transformer.backward(ctx, dy, dx);
    auto scope = ctx.timer.scope(Phase::head);
    const Mat w_eh = p.param(d.layer, ParamKind::mtp_eh_proj);
    const Mat dw_eh = p.grad(d.layer, ParamKind::mtp_eh_proj);
    c.linear_gemm(true, false, 1.0f, rows(d.en), dx, 1.0f, dw_eh.row_slice(0, H));
    c.linear_gemm(true, false, 1.0f, rows(d.prev_n), dx, 1.0f, dw_eh.row_slice(H, H));
    // d en and d hn, over en and hn (their backward reads only the norms' inputs).
    c.linear_gemm(false, true, 1.0f, dx, w_eh.row_slice(0, H), 0.0f, rows(d.en));
    c.linear_gemm(false, true, 1.0f, dx, w_eh.row_slice(H, H), 0.0f, rows(d.prev_n));
    c.rmsnorm_backward(rows(d.en), rows(d.e), p.param(d.layer, ParamKind::mtp_enorm),
                       rows(d.en_rstd), dy, p.grad(d.layer, ParamKind::mtp_enorm));
    c.scatter_add_rows(dy, ids.col_slice(col + 1, 1), Mat(),
                       p.grad(kEmbeddingLayer, ParamKind::embedding));
    // d prev: carried into the depth below, or into dn.
    c.rmsnorm_backward(rows(d.prev_n), prev, p.param(d.layer, ParamKind::mtp_hnorm),
                       rows(d.prev_rstd), de, p.grad(d.layer, ParamKind::mtp_hnorm));
    if (k == 0) c.axpby(1.0f, de, 1.0f, dn);
    done(d.layer);
  }
  {
    auto scope = ctx.timer.scope(Phase::head);
    c.rmsnorm_backward(dn, h_, p.param(final_norm_layer(w), ParamKind::final_norm), rows(rstd_), dh,
                       p.grad(final_norm_layer(w), ParamKind::final_norm));
  }
  done(final_norm_layer(w));
}

}  // namespace moebench
