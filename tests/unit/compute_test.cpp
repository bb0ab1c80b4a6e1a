// The compute interface's checks, once for every backend: a bad call is refused before the
// backend sees it (the counting backend below never runs), a good one reaches it.
#include "harness/compute/compute.hpp"

#include <doctest/doctest.h>

#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/core/error.hpp"

namespace moebench {
namespace {

class Counting final : public CpuCompute {
 public:
  Counting() : CpuCompute(1) {}
  int calls = 0;

 protected:
  void do_gemm(bool, bool, float, const Mat&, const Mat&, float, const Mat&) override { ++calls; }
  void do_rope(const Mat&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
               float, bool) override {
    ++calls;
  }
  void do_gather_rows(const Mat&, const Mat&, const Mat&) override { ++calls; }
  void do_cross_entropy(const Mat&, const Mat&, float, const Mat&) override { ++calls; }
  void do_adamw(const AdamWStep&, const Mat&, const Mat&, const Mat&, const Mat&,
                const Mat&) override {
    ++calls;
  }
  void do_attention_forward(const AttentionShape&, const AttentionOperands&, const Mat&,
                            const Mat&) override {
    ++calls;
  }
};

Mat f32(std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  v.assign(static_cast<std::size_t>(rows * cols), 0.0f);
  return Mat{v.data(), rows, cols, cols, DType::f32};
}

TEST_CASE("compute: shapes, dtypes and ranges are checked before the backend runs") {
  Counting c;
  std::vector<float> a, b, d;
  // GEMM: 2x3 times 4x2 does not fit.
  CHECK_THROWS_AS(c.gemm(false, false, 1, f32(a, 2, 3), f32(b, 4, 2), 0, f32(d, 2, 2)),
                  RuntimeError);
  CHECK_THROWS_AS(c.linear_gemm(false, false, 1, f32(a, 2, 3), f32(b, 4, 2), 0, f32(d, 2, 2)),
                  RuntimeError);
  // A bf16 tensor on a backend that stores f32 only.
  std::vector<float> raw(8);
  const Mat bf16{raw.data(), 2, 2, 2, DType::bf16};
  CHECK_THROWS_WITH_AS(c.gemm(false, false, 1, bf16, f32(b, 2, 2), 0, f32(d, 2, 2)),
                       doctest::Contains("the cpu backend computes on f32"), RuntimeError);
  // Rope: an odd dimension, a head past the last column.
  CHECK_THROWS_AS(c.rope_forward(f32(a, 2, 8), 2, 1, 8, 0, 3, 1e4f), RuntimeError);
  CHECK_THROWS_AS(c.rope_backward(f32(a, 2, 8), 2, 2, 8, 0, 4, 1e4f), RuntimeError);
  // An index column of the wrong length.
  std::vector<std::int32_t> idx(3, 0);
  const Mat index{idx.data(), 3, 1, 1, DType::i32};
  CHECK_THROWS_AS(c.gather_rows(f32(a, 4, 2), index, f32(d, 2, 2)), RuntimeError);
  // AdamW moments must be FP32 and of the parameter's shape.
  CHECK_THROWS_AS(
      c.adamw(AdamWStep{}, f32(a, 4, 1), f32(b, 4, 1), f32(d, 3, 1), f32(d, 3, 1), Mat{}),
      RuntimeError);
  // Attention: q of the wrong width for the shape.
  AttentionShape s;
  s.batch = 1;
  s.seq_len = 2;
  s.heads = 2;
  s.qk_dim = 2;
  s.v_dim = 2;
  std::vector<float> q, k, v, o, st;
  CHECK_THROWS_AS(
      c.attention_forward(s, f32(q, 2, 3), f32(k, 2, 4), f32(v, 2, 4), f32(o, 2, 4), f32(st, 2, 2)),
      RuntimeError);
  // Cross-entropy: a label per row, and an FP32 loss column.
  std::vector<float> z, l;
  CHECK_THROWS_AS(c.cross_entropy(f32(z, 2, 5), index, 1.0f, f32(l, 2, 1)), RuntimeError);
  CHECK_THROWS_AS(c.cross_entropy(f32(z, 3, 5), index, 1.0f, f32(l, 3, 2)), RuntimeError);
  CHECK_THROWS_AS(c.cross_entropy(f32(z, 3, 5), index, 1.0f, Mat{raw.data(), 3, 1, 1, DType::bf16}),
                  RuntimeError);
  CHECK(c.calls == 0);

  // The same calls with good arguments reach the backend, once each.
  c.gemm(false, false, 1, f32(a, 2, 3), f32(b, 3, 2), 0, f32(d, 2, 2));
  c.rope_forward(f32(a, 2, 8), 2, 2, 4, 0, 4, 1e4f);
  std::vector<std::int32_t> two(2, 1);
  c.gather_rows(f32(a, 4, 2), Mat{two.data(), 2, 1, 1, DType::i32}, f32(d, 2, 2));
  std::vector<float> m, vv;
  c.adamw(AdamWStep{}, f32(a, 4, 1), f32(b, 4, 1), f32(m, 4, 1), f32(vv, 4, 1), Mat{});
  c.attention_forward(s, f32(q, 2, 4), f32(k, 2, 4), f32(v, 2, 4), f32(o, 2, 4), f32(st, 2, 2));
  c.cross_entropy(f32(z, 3, 5), index, 1.0f, f32(l, 3, 1));
  CHECK(c.calls == 6);
}

TEST_CASE("compute: fp8 is refused where the backend has none, and the name is the kind's") {
  struct NoFp8 final : CpuCompute {
    NoFp8() : CpuCompute(1) {}
    void set_linear_precision(LinearPrecision p) override { Compute::set_linear_precision(p); }
  } c;
  CHECK_THROWS_WITH_AS(c.set_linear_precision(LinearPrecision::fp8),
                       "--precision fp8 is not available with --backend cpu", UsageError);
  CHECK(c.name() == "cpu");
  CHECK(c.linear_precision() == LinearPrecision::standard);
}

TEST_CASE("compute: the tensors' live bytes and their peak, whatever outlives the backend") {
  auto c = std::make_unique<CpuCompute>(1);
  CHECK(c->allocation_stats().live_bytes == 0);
  Tensor a = c->alloc(10, 4);             // 160 bytes
  Tensor b = c->alloc(5, 2, DType::i32);  // 40
  CHECK(c->allocation_stats().live_bytes == 200);
  CHECK(c->allocation_stats().peak_bytes == 200);
  { Tensor t = c->alloc(100, 1); }  // 400, freed at once
  CHECK(c->allocation_stats().live_bytes == 200);
  CHECK(c->allocation_stats().peak_bytes == 600);
  Tensor copy = a;  // a second owner: freed with the last
  a = Tensor();
  CHECK(c->allocation_stats().live_bytes == 200);
  copy = Tensor();
  CHECK(c->allocation_stats().live_bytes == 40);
  c->reset_allocation_peak();
  CHECK(c->allocation_stats().peak_bytes == 40);
  // The view is the backend's memory, usable as before.
  c->zero(b);
  c.reset();  // a tensor may outlive its backend's object
  b = Tensor();
}

}  // namespace
}  // namespace moebench
