// The parameter layout (counts by hand for the tiny model of tests/unit/layer_fixture.hpp), the
// flat buffers' padding, views, and the seeded initialisation.
#include "workloads/params/parameters.hpp"
#include "harness/backends/registry/registry.hpp"

#include <doctest/doctest.h>

#include "tests/unit/layer_fixture.hpp"

namespace moebench {
namespace {

using namespace layer_test;

// By hand, for hidden 16, 2 heads, qk_nope 4 + qk_rope 2 (qk 6), v 4, q_lora 8, kv_lora 6,
// ffn 12, moe_ffn 8, 8 experts, 1 shared:
//   attention: attn_norm 16 + wq_a 16*8 + q_norm 8 + wq_b 8*12 + wkv_a 16*8 + kv_norm 6
//              + wkv_b 6*16 + wo 8*16 = 16 + 128 + 8 + 96 + 128 + 6 + 96 + 128 = 606
//   mlp_norm 16; dense MLP: 16*24 + 12*16 = 576; MoE dense part: router 16*8 + shared 16*16 +
//   8*16 = 512; one routed expert: 16*16 + 8*16 = 384.
constexpr std::int64_t kAttention = 606;
constexpr std::int64_t kDenseLayer = 606 + 16 + 576;     // 1198
constexpr std::int64_t kMoeLayerDense = 606 + 16 + 512;  // 1134
constexpr std::int64_t kExpert = 384;

std::int64_t count(const ParamLayout& l, int layer, ParamGroup g) {
  std::int64_t n = 0;
  for (const ParamInfo& p : l.infos) n += p.layer == layer && p.group == g ? p.numel() : 0;
  return n;
}

void check_contiguous(const ParamLayout& l) {
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    std::int64_t next = 0;
    for (const ParamInfo& p : l.infos) {
      if (p.group != g) continue;
      CAPTURE(p.name());
      CHECK(p.offset == next);
      CHECK(p.numel() > 0);
      next += p.numel();
    }
    CHECK(next == l.numel[static_cast<int>(g)]);
  }
}

TEST_CASE("make_param_layout: per-layer counts equal the hand-computed numbers") {
  const RunConfig c = tiny_run(2, 1);
  validate(c);
  const ParamLayout l = make_param_layout(c, one_rank());
  CHECK(count(l, 0, ParamGroup::dense) == kDenseLayer);
  CHECK(count(l, 0, ParamGroup::expert) == 0);
  CHECK(count(l, 1, ParamGroup::dense) == kMoeLayerDense);
  CHECK(count(l, 1, ParamGroup::expert) == 8 * kExpert);
  CHECK(l.numel[0] == kDenseLayer + kMoeLayerDense);
  CHECK(l.numel[1] == 8 * kExpert);
  check_contiguous(l);
  // Shapes are (in, out).
  for (const ParamInfo& p : l.infos) {
    if (p.kind == ParamKind::wkv_a) {
      CHECK(p.rows == 16);
      CHECK(p.cols == 8);
    }
    if (p.kind == ParamKind::wkv_b) {
      CHECK(p.rows == 6);
      CHECK(p.cols == 16);
    }
    if (p.kind == ParamKind::expert_gate_up) {
      CHECK(p.rows == 16);
      CHECK(p.cols == 16);
    }
  }
}

TEST_CASE("make_param_layout: q_lora_rank null, attention off, no shared expert") {
  RunConfig c = tiny_run(2, 1);
  c.model.q_lora_rank.reset();
  ParamLayout l = make_param_layout(c, one_rank());
  // wq 16*12 replaces wq_a + q_norm + wq_b (128 + 8 + 96).
  CHECK(count(l, 0, ParamGroup::dense) == kDenseLayer - 232 + 192);
  check_contiguous(l);

  c = tiny_run(2, 1);
  c.workload.attention = false;
  l = make_param_layout(c, one_rank());
  CHECK(count(l, 0, ParamGroup::dense) == kDenseLayer - kAttention);
  CHECK(count(l, 1, ParamGroup::dense) == kMoeLayerDense - kAttention);

  c = tiny_run(2, 1);
  c.model.n_shared_experts = 0;
  l = make_param_layout(c, one_rank());
  CHECK(count(l, 1, ParamGroup::dense) == kMoeLayerDense - 384);
}

TEST_CASE("make_param_layout: with EP the expert group holds only the local experts") {
  const RunConfig c = tiny_run(2, 1);
  // World 4, EP 2: rank 1 is EP rank 1 and holds experts 4..7.
  const Topology t = rank_of(4, 1, 2);
  const ParamLayout l = make_param_layout(c, t);
  CHECK(l.numel[0] == kDenseLayer + kMoeLayerDense);  // dense parameters are replicated
  CHECK(l.numel[1] == 4 * kExpert);
  std::vector<int> experts;
  for (const ParamInfo& p : l.infos) {
    if (p.group == ParamGroup::expert && p.kind == ParamKind::expert_gate_up) {
      experts.push_back(p.expert);
    }
  }
  CHECK(experts == std::vector<int>{4, 5, 6, 7});
  check_contiguous(l);
}

TEST_CASE("ParamStore pads each flat buffer to a multiple of its reducing group") {
  const RunConfig c = tiny_run(2, 1);
  auto compute = make_compute(ComputeBackend::cpu, 0, 1);
  {
    // World 10, EP 2: dense reduced over 10 ranks, experts over EDP 5.
    const Topology t = rank_of(10, 3, 2);
    ParamStore s(*compute, c, t);
    CHECK(s.numel(ParamGroup::dense) == 2332);
    CHECK(s.padded_numel(ParamGroup::dense) == 2340);
    CHECK(s.numel(ParamGroup::expert) == 4 * kExpert);
    CHECK(s.padded_numel(ParamGroup::expert) == 1540);  // 1536 -> a multiple of 5
    CHECK(s.flat_params(ParamGroup::dense).rows == 2340);
    CHECK(s.flat_grads(ParamGroup::expert).rows == 1540);
    CHECK(s.local_experts() == 4);
    CHECK(s.first_expert() == 4);
    s.initialize(5);
    // The padding stays zero, so reducing and updating it is harmless.
    std::vector<float> v(2340);
    compute->download(s.flat_params(ParamGroup::dense), v.data());
    for (std::size_t i = 2332; i < v.size(); ++i) CHECK(v[i] == 0.0f);
    std::vector<float> e(1540);
    compute->download(s.flat_params(ParamGroup::expert), e.data());
    for (std::size_t i = 1536; i < e.size(); ++i) CHECK(e[i] == 0.0f);
  }
  {
    // World 12 in 2 pipeline stages, EP 2: dense reduced over the 6 data-parallel ranks of a
    // stage, experts over EDP 3, not over the world.
    // Rank 7 is on the second stage, which holds layer 1 (the MoE layer) only.
    RunConfig p = c;
    p.layout.world = 12;
    p.layout.ep = 2;
    p.layout.pp = 2;
    const Topology t = rank_of(12, 7, 2, 2);
    REQUIRE(t.group(Group::data).size == 6);
    REQUIRE(t.group(Group::expert_data).size == 3);
    REQUIRE(t.group(Group::pipeline).rank == 1);
    ParamStore s(*compute, p, t);
    CHECK_FALSE(s.has(0, ParamKind::mlp_norm));
    CHECK(s.has(1, ParamKind::mlp_norm));
    CHECK(s.has(1, ParamKind::router));
    CHECK(s.numel(ParamGroup::dense) < 2332);
    CHECK(s.padded_numel(ParamGroup::dense) % 6 == 0);  // a multiple of the data group
    CHECK(s.padded_numel(ParamGroup::dense) - s.numel(ParamGroup::dense) < 6);
    CHECK(s.padded_numel(ParamGroup::expert) == 1536);  // already a multiple of 3
    CHECK(s.first_expert() == 4);                       // expert rank 1 of its group
    // The first stage holds layer 0, the dense layer, and no experts.
    ParamStore first(*compute, p, rank_of(12, 1, 2, 2));
    CHECK(first.has(0, ParamKind::dense_gate_up));
    CHECK_FALSE(first.has(1, ParamKind::mlp_norm));
    CHECK(first.numel(ParamGroup::expert) == 0);
    CHECK(first.numel(ParamGroup::dense) + s.numel(ParamGroup::dense) == 2332);
  }
  {
    // A dense-only stack still has a (padded, non-empty) expert buffer.
    const RunConfig d = tiny_run(1, 1);
    ParamStore s(*compute, d, one_rank());
    CHECK(s.numel(ParamGroup::expert) == 0);
    CHECK(s.padded_numel(ParamGroup::expert) >= 1);
  }
}

TEST_CASE("make_param_layout: the ends and the MTP layers, where each pipeline rank holds them") {
  RunConfig c = tiny_run(2, 1);
  c.model.num_nextn_predict_layers = 1;
  c.workload.head = true;
  c.workload.mtp = 1;
  const std::int64_t h = c.model.hidden_size, vocab = c.model.vocab_size;
  const Workload& w = c.workload;
  CHECK(final_norm_layer(w) == 2);
  CHECK(mtp_layer(w, 0) == 3);
  CHECK(output_head_layer(w) == 4);
  CHECK(layer_count(w) == 5);
  CHECK_FALSE(is_dense_layer(c, mtp_layer(w, 0)));  // the model's last layer is MoE
  {
    const ParamLayout l = make_param_layout(c, one_rank());
    check_contiguous(l);
    // The embedding first, the output head last (the buffer in backward order, reversed).
    CHECK(l.infos.front().kind == ParamKind::embedding);
    CHECK(l.infos.front().numel() == vocab * h);
    CHECK(l.infos.back().kind == ParamKind::output_head);
    CHECK(l.infos.back().rows == h);
    CHECK(l.infos.back().cols == vocab);
    // One more MoE layer plus its norms (3 h) and eh projection (2 h x h).
    CHECK(l.numel[0] == vocab * h + kDenseLayer + kMoeLayerDense + h + kMoeLayerDense + 3 * h +
                            2 * h * h + h * vocab);
    CHECK(l.numel[1] == 2 * 8 * kExpert);
    int previous = kEmbeddingLayer;
    for (const ParamInfo& p : l.infos) {
      CHECK(p.layer >= previous);  // layer by layer, as the gradient buckets need
      previous = p.layer;
    }
  }
  // Two stages: the first embeds; the last has the head, the MTP layer and the embedding's copy.
  c.layout.world = 2;
  c.layout.pp = 2;
  const auto kinds = [&](int pp_rank) {
    std::vector<ParamKind> out;
    for (const ParamInfo& p : make_param_layout(c, rank_of(2, pp_rank, 1, 2)).infos) {
      if (p.layer < 0 || p.layer >= 2) out.push_back(p.kind);
    }
    return out;
  };
  CHECK(kinds(0) == std::vector<ParamKind>{ParamKind::embedding});
  const std::vector<ParamKind> last = kinds(1);
  CHECK(last.front() == ParamKind::embedding);
  CHECK(last[1] == ParamKind::final_norm);
  CHECK(last.back() == ParamKind::output_head);
  // Without MTP the last stage holds no copy.
  c.workload.mtp = 0;
  CHECK(kinds(1).front() == ParamKind::final_norm);
  ParamInfo e;
  e.layer = kEmbeddingLayer;
  e.kind = ParamKind::embedding;
  CHECK(e.name() == "embedding");
  e.layer = 3;
  e.kind = ParamKind::mtp_eh_proj;
  CHECK(e.name() == "layer3.eh_proj");
}

TEST_CASE("ParamStore views, lookups and names") {
  const RunConfig c = tiny_run(2, 1);
  auto compute = make_compute(ComputeBackend::cpu, 0, 1);
  ParamStore s(*compute, c, one_rank());
  CHECK(s.layers() == 2);
  CHECK(s.is_dense_layer(0));
  CHECK_FALSE(s.is_dense_layer(1));
  CHECK(s.has(0, ParamKind::dense_gate_up));
  CHECK_FALSE(s.has(0, ParamKind::router));
  CHECK(s.has(1, ParamKind::router));
  CHECK_FALSE(s.has(1, ParamKind::wq));  // q_lora is set
  CHECK_THROWS_AS(s.param(0, ParamKind::router), RuntimeError);
  CHECK_THROWS_AS(s.param(1, ParamKind::expert_down, 8), RuntimeError);
  CHECK_THROWS_AS(s.param(2, ParamKind::attn_norm), RuntimeError);

  // Views sit at the layout's offsets inside the flat buffers, with the layout's shapes.
  auto* dense = static_cast<float*>(s.flat_params(ParamGroup::dense).data);
  auto* expert = static_cast<float*>(s.flat_params(ParamGroup::expert).data);
  auto* dgrad = static_cast<float*>(s.flat_grads(ParamGroup::dense).data);
  for (const ParamInfo& p : s.infos()) {
    CAPTURE(p.name());
    const int local = p.expert >= 0 ? p.expert - s.first_expert() : -1;
    const Mat m = s.param(p.layer, p.kind, local);
    CHECK(m.rows == p.rows);
    CHECK(m.cols == p.cols);
    CHECK(m.data == (p.group == ParamGroup::dense ? dense : expert) + p.offset);
    if (p.group == ParamGroup::dense) {
      CHECK(s.grad(p.layer, p.kind, local).data == dgrad + p.offset);
    }
  }
  ParamInfo p;
  p.layer = 1;
  p.kind = ParamKind::expert_gate_up;
  p.expert = 5;
  CHECK(p.name() == "layer1.expert5.gate_up");
  p.layer = 0;
  p.kind = ParamKind::wq_a;
  p.expert = -1;
  CHECK(p.name() == "layer0.wq_a");
  CHECK(std::string(param_kind_name(ParamKind::shared_down)) == "shared_down");
}

std::vector<float> all(Compute& c, Mat m) {
  std::vector<float> v(static_cast<std::size_t>(m.numel()));
  c.download(m, v.data());
  return v;
}

TEST_CASE("ParamStore::initialize is a pure function of the seed, with the documented scales") {
  const RunConfig c = tiny_run(2, 1);
  auto compute = make_compute(ComputeBackend::cpu, 0, 1);
  ParamStore a(*compute, c, one_rank()), b(*compute, c, one_rank()), other(*compute, c, one_rank());
  a.initialize(9);
  b.initialize(9);
  other.initialize(10);
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    CHECK(all(*compute, a.flat_params(g)) == all(*compute, b.flat_params(g)));
    CHECK(all(*compute, a.flat_params(g)) != all(*compute, other.flat_params(g)));
    // Gradients start at zero.
    for (float v : all(*compute, a.flat_grads(g))) REQUIRE(v == 0.0f);
  }
  CHECK(all(*compute, a.router_bias(1)) == all(*compute, b.router_bias(1)));
  for (const ParamInfo& p : a.infos()) {
    CAPTURE(p.name());
    const int local = p.expert >= 0 ? p.expert - a.first_expert() : -1;
    const std::vector<float> v = all(*compute, a.param(p.layer, p.kind, local));
    const bool norm = p.kind == ParamKind::attn_norm || p.kind == ParamKind::q_norm ||
                      p.kind == ParamKind::kv_norm || p.kind == ParamKind::mlp_norm;
    // Norms: 1 +- 0.1 (never exactly 1); weights: uniform within 1/sqrt(fan-in), not all equal.
    const float bound = norm ? 0.1f : 1.0f / std::sqrt(static_cast<float>(p.rows));
    float lo = 1e9f, hi = -1e9f;
    for (float x : v) {
      const float d = norm ? x - 1.0f : x;
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    CHECK(hi - lo > 0.2f * bound);
  }
  const std::vector<float> bias = all(*compute, a.router_bias(1));
  CHECK(max_abs_of(bias) <= 0.05f);
  CHECK(max_abs_of(bias) > 0.0f);
  CHECK(bias != all(*compute, a.router_bias(0)));
}

TEST_CASE("An expert's weights are the same on a 1-rank and an EP-2 layout") {
  const RunConfig c = tiny_run(2, 1);
  auto compute = make_compute(ComputeBackend::cpu, 0, 1);
  ParamStore whole(*compute, c, one_rank());
  ParamStore part(*compute, c, rank_of(4, 1, 2));  // experts 4..7
  whole.initialize(3);
  part.initialize(3);
  REQUIRE(part.first_expert() == 4);
  for (int local = 0; local < part.local_experts(); ++local) {
    for (ParamKind k : {ParamKind::expert_gate_up, ParamKind::expert_down}) {
      CAPTURE(local);
      CHECK(all(*compute, part.param(1, k, local)) == all(*compute, whole.param(1, k, 4 + local)));
    }
  }
  // Different experts differ.
  CHECK(all(*compute, whole.param(1, ParamKind::expert_down, 0)) !=
        all(*compute, whole.param(1, ParamKind::expert_down, 1)));
  // Dense parameters are replicated: identical buffers.
  CHECK(all(*compute, part.flat_params(ParamGroup::dense)) ==
        all(*compute, whole.flat_params(ParamGroup::dense)));
  CHECK(all(*compute, part.router_bias(1)) == all(*compute, whole.router_bias(1)));
}

TEST_CASE("ParamStore::zero_grads clears both gradient buffers") {
  const RunConfig c = tiny_run(2, 1);
  auto compute = make_compute(ComputeBackend::cpu, 0, 1);
  ParamStore s(*compute, c, one_rank());
  s.initialize(1);
  compute->fill(s.flat_grads(ParamGroup::dense), 3.0f);
  compute->fill(s.flat_grads(ParamGroup::expert), 3.0f);
  s.zero_grads();
  CHECK(max_abs_of(all(*compute, s.flat_grads(ParamGroup::dense))) == 0.0f);
  CHECK(max_abs_of(all(*compute, s.flat_grads(ParamGroup::expert))) == 0.0f);
}

}  // namespace
}  // namespace moebench
