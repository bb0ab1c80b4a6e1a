// The model's ends against central finite differences (tolerances: tests/unit/layer_fixture.hpp):
// the embedding of J = sum(G .* embed(ids)); the head, the loss and an MTP layer of
// J = scale * sum(main losses) + scale * kMtpLossScale / mtp * sum(MTP losses), the objective
// whose gradient ModelHead writes. Routing is balanced, so J is smooth in every weight.
#include "workloads/layers/model_ends.hpp"

#include <doctest/doctest.h>

#include "tests/unit/layer_fixture.hpp"
#include "workloads/step/token_ids.hpp"

namespace moebench {
namespace {

using namespace layer_test;

RunConfig ends_run(int mtp) {
  RunConfig c = tiny_run(2, 1);
  c.model.num_nextn_predict_layers = 2;
  c.workload.head = true;
  c.workload.mtp = mtp;
  return c;
}

Tensor ids_of(Harness& hx, int columns) {
  const RunConfig& c = hx.config;
  const std::vector<std::int32_t> ids = token_id_rows(
      c.seed, 0, c.workload.micro_batch, c.workload.seq_len, columns, c.model.vocab_size);
  Tensor t = hx.compute->alloc(hx.tokens(), columns, DType::i32);
  hx.compute->upload_i32(ids.data(), t);
  return t;
}

TEST_CASE("embedding: the lookup's rows, and the gradient accumulates into them") {
  Harness hx(ends_run(0));
  const std::int64_t n = hx.tokens(), h = hx.hidden();
  Tensor ids = ids_of(hx, 2);
  Tensor out = hx.compute->alloc(n, h);
  const Vec g = hx.read(hx.random(n, h, 40));
  Tensor gt = hx.compute->alloc(n, h);
  hx.write(gt, g);
  auto loss = [&] {
    embedding_forward(hx.ctx, ids.view().col_slice(0, 1), out);
    return dot(g, hx.read(out));
  };
  loss();
  hx.params.zero_grads();
  embedding_backward(hx.ctx, ids.view().col_slice(0, 1), gt);
  const Mat table = hx.params.param(kEmbeddingLayer, ParamKind::embedding);
  // Every row of the output is the table's row of its id.
  std::vector<std::int32_t> host(static_cast<std::size_t>(n * 2));
  hx.compute->download_i32(ids, host.data());
  const Vec t = hx.read(table), o = hx.read(out);
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < h; ++c) {
      CHECK(o[r * h + c] == t[host[r * 2] * h + c]);
    }
  }
  check_fd(hx, "embedding", table, hx.read(hx.params.grad(kEmbeddingLayer, ParamKind::embedding)),
           loss, 64);
}

void check_head(int mtp) {
  CAPTURE(mtp);
  Harness hx(ends_run(mtp));
  const Workload& w = hx.config.workload;
  const std::int64_t n = hx.tokens(), h = hx.hidden();
  Tensor ids = ids_of(hx, mtp + 2);
  Tensor x = hx.random(n, h, 41);
  Tensor losses = hx.compute->alloc(n, mtp + 1, DType::f32);
  // A scale of 1 (the step's is 1 / tokens) keeps the MTP layer's small gradients (scaled by
  // kMtpLossScale) well above the finite differences' rounding.
  const float scale = 1.0f;
  const double mtp_scale = mtp > 0 ? scale * kMtpLossScale / mtp : 0.0;
  ModelHead head(w);
  auto loss = [&] {
    head.forward(hx.ctx, x, ids, scale, losses);
    const Vec l = hx.read(losses);
    double j = 0.0;
    for (std::int64_t r = 0; r < n; ++r) {
      j += scale * l[r * (mtp + 1)];
      for (int k = 1; k <= mtp; ++k) j += mtp_scale * l[r * (mtp + 1) + k];
    }
    return j;
  };
  loss();
  // Each loss is -log p(label) of a vocabulary of 32 with O(1) logits: near log 32.
  for (float l : hx.read(losses)) CHECK(l == doctest::Approx(std::log(32.0)).epsilon(0.5));
  hx.params.zero_grads();
  Tensor dx = hx.filled(n, h, 1000.0f);  // overwritten
  std::vector<int> done;
  head.backward(hx.ctx, ids, dx, [&](int layer) { done.push_back(layer); });
  // The layers' gradients become final highest index first (the buckets' order).
  std::vector<int> want = {output_head_layer(w)};
  for (int k = mtp; k-- > 0;) want.push_back(mtp_layer(w, k));
  want.push_back(final_norm_layer(w));
  CHECK(done == want);

  check_fd(hx, "x", x, hx.read(dx), loss, 32);
  const auto param = [&](int layer, ParamKind k, int samples) {
    check_fd(hx, std::to_string(layer) + "." + param_kind_name(k), hx.params.param(layer, k),
             hx.read(hx.params.grad(layer, k)), loss, samples);
  };
  param(final_norm_layer(w), ParamKind::final_norm, 16);
  param(output_head_layer(w), ParamKind::output_head, 48);
  for (int k = 0; k < mtp; ++k) {
    for (ParamKind kind :
         {ParamKind::mtp_enorm, ParamKind::mtp_hnorm, ParamKind::mtp_eh_proj, ParamKind::mtp_norm,
          ParamKind::attn_norm, ParamKind::wkv_b, ParamKind::router, ParamKind::shared_down}) {
      param(mtp_layer(w, k), kind, 16);
    }
    check_fd(hx, "expert", hx.params.param(mtp_layer(w, k), ParamKind::expert_down, 1),
             hx.read(hx.params.grad(mtp_layer(w, k), ParamKind::expert_down, 1)), loss, 12);
  }
  if (mtp > 0) {
    // The MTP layers embed the next tokens: the table gets their gradient.
    check_fd(hx, "embedding", hx.params.param(kEmbeddingLayer, ParamKind::embedding),
             hx.read(hx.params.grad(kEmbeddingLayer, ParamKind::embedding)), loss, 64);
  } else {
    // The head alone does not read the table (the first stage's embedding does).
    CHECK(max_abs_of(hx.read(hx.params.grad(kEmbeddingLayer, ParamKind::embedding))) == 0.0f);
  }
}

TEST_CASE("ModelHead: the final norm, the output head and the loss") {
  check_head(0);
}

TEST_CASE("ModelHead: with one and two MTP layers, chained, sharing the head and embedding") {
  check_head(1);
  check_head(2);
}

}  // namespace
}  // namespace moebench
