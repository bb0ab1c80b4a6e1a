// ensure_rows' reuse-or-grow semantics, the shared Scratch, and LayerContext's accounting.
#include "workloads/layers/layer_context.hpp"
#include "harness/backends/registry/registry.hpp"

#include <doctest/doctest.h>

#include "tests/unit/layer_fixture.hpp"

namespace moebench {
namespace {

TEST_CASE("ensure_rows allocates, reuses while big enough, and grows with headroom") {
  auto c = make_compute(ComputeBackend::cpu, 0, 1);
  Tensor t;
  Mat a = ensure_rows(*c, t, 8, 4);
  CHECK(t.rows() == 8);
  CHECK(t.cols() == 4);
  CHECK(t.dtype() == c->activation_dtype());
  CHECK(a.rows == 8);
  CHECK(a.cols == 4);
  CHECK(a.data == t.data());
  void* first = t.data();

  // Fewer rows: the same storage, a view of the requested rows.
  Mat b = ensure_rows(*c, t, 5, 4);
  CHECK(t.data() == first);
  CHECK(b.rows == 5);
  CHECK(b.data == first);
  CHECK(t.rows() == 8);

  // More rows: a new allocation of at least 5/4 of the old one (routing imbalance that varies a
  // little from step to step must not reallocate every step).
  Mat g = ensure_rows(*c, t, 9, 4);
  CHECK(g.rows == 9);
  CHECK(t.rows() == 10);  // max(9, 8 * 5 / 4)
  Mat big = ensure_rows(*c, t, 40, 4);
  CHECK(big.rows == 40);
  CHECK(t.rows() == 40);  // the request exceeds the headroom

  // Another width: exactly the requested size.
  Mat w = ensure_rows(*c, t, 3, 7);
  CHECK(t.cols() == 7);
  CHECK(t.rows() == 3);
  CHECK(w.cols == 7);

  // Another dtype: reallocated in that dtype.
  Mat i = ensure_rows(*c, t, 3, 7, DType::i32);
  CHECK(t.dtype() == DType::i32);
  CHECK(i.dtype == DType::i32);
  CHECK(t.rows() >= 3);

  // Zero rows: a valid (1-row) allocation and an empty view.
  Tensor z;
  Mat e = ensure_rows(*c, z, 0, 4, DType::f32);
  CHECK(e.rows == 0);
  CHECK_FALSE(z.empty());
  CHECK(z.rows() == 1);
}

TEST_CASE("Scratch: one buffer per name, reused at any shape that fits, grown with headroom") {
  auto c = make_compute(ComputeBackend::cpu, 0, 1);
  Scratch s(*c);
  Mat a = s.get("a", 4, 8);
  CHECK(a.rows == 4);
  CHECK(a.cols == 8);
  CHECK(a.ld == 8);
  CHECK(a.dtype == c->activation_dtype());
  CHECK(s.bytes() == 4 * 8 * 4);
  // Another shape of no more elements: the same memory, contiguous at its own width.
  Mat b = s.get("a", 2, 16);
  CHECK(b.data == a.data);
  CHECK(b.ld == 16);
  // Another name: its own buffer.
  Mat other = s.get("b", 4, 8);
  CHECK(other.data != a.data);
  CHECK(s.bytes() == 2 * 4 * 8 * 4);
  // More elements: grown to at least 5/4 of the old size (33 -> max(33, 40)).
  s.get("a", 33, 1);
  CHECK(s.bytes() == (40 + 32) * 4);
  // Another dtype: made in it.
  Mat i = s.get("a", 3, 3, DType::i32);
  CHECK(i.dtype == DType::i32);
  CHECK(s.bytes() == (9 + 32) * 4);
  // What it holds is counted as the backend's tensors.
  CHECK(c->allocation_stats().live_bytes == s.bytes());
}

TEST_CASE("LayerContext accumulates FLOPs, bytes, bus bytes and the largest group") {
  layer_test::Harness hx(layer_test::tiny_run(1, 1));
  LayerContext& ctx = hx.ctx;
  const auto d = static_cast<std::size_t>(Phase::dispatch);
  ctx.add_flops(Phase::experts, 10.0);
  ctx.add_flops(Phase::experts, 5.0);
  CHECK(hx.sample.flops[static_cast<std::size_t>(Phase::experts)] == 15.0);
  ctx.add_bytes(Phase::dispatch, 100.0, 0.5, 2);
  ctx.add_bytes(Phase::dispatch, 40.0, 0.75, 4);
  ctx.add_bytes(Phase::dispatch, 10.0, 1.0, 3);
  CHECK(hx.sample.bytes[d] == 150.0);
  CHECK(hx.sample.bus_bytes[d] == 50.0 + 30.0 + 10.0);
  CHECK(hx.sample.group_size[d] == 4);
  CHECK(hx.sample.bytes[static_cast<std::size_t>(Phase::combine)] == 0.0);
}

}  // namespace
}  // namespace moebench
