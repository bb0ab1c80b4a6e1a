// MLA's per-head column maps (workloads/ops/mla.hpp) against the per-head layout written out by
// hand, and the interface's split and merge on the cpu backend against the same layout.
#include "workloads/ops/mla.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/core/error.hpp"

namespace moebench {
namespace {

constexpr MlaDims kDims{3, 4, 2, 5};  // 3 heads, k_nope 4, rope 2, v 5: kv is 27 wide

TEST_CASE("mla column maps: k = [k_nope | shared rope] and v per head, and back") {
  const MlaDims d = kDims;
  CHECK(d.dq() == 6);
  CHECK(d.kv_width() == 27);
  std::vector<int> kv_hits(static_cast<std::size_t>(d.kv_width()), 0);
  for (std::int64_t h = 0; h < d.heads; ++h) {
    for (std::int64_t j = 0; j < d.dn; ++j) {
      const std::int64_t src = mla_k_source(h * d.dq() + j, d);
      CHECK(src == h * (d.dn + d.dv) + j);
      ++kv_hits[static_cast<std::size_t>(src)];
      CHECK(mla_kv_grad_source(src, d) == h * d.dq() + j);  // the way back
    }
    for (std::int64_t j = 0; j < d.dr; ++j) CHECK(mla_k_source(h * d.dq() + d.dn + j, d) == -1 - j);
    for (std::int64_t j = 0; j < d.dv; ++j) {
      const std::int64_t src = mla_v_source(h * d.dv + j, d);
      CHECK(src == h * (d.dn + d.dv) + d.dn + j);
      ++kv_hits[static_cast<std::size_t>(src)];
      CHECK(mla_kv_grad_source(src, d) == -1 - (h * d.dv + j));
    }
  }
  for (int hits : kv_hits) CHECK(hits == 1);  // every kv column is read exactly once
}

Tensor filled(CpuCompute& c, std::int64_t rows, std::int64_t cols, float base) {
  Tensor t = c.alloc(rows, cols, DType::f32);
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  c.upload(v.data(), t);
  return t;
}

std::vector<float> read(CpuCompute& c, const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.view().numel()));
  c.download(t, v.data());
  return v;
}

TEST_CASE("mla_split_kv and mla_merge_kv_grad: the per-head layout, the rope summed over heads") {
  CpuCompute c(1);
  const MlaDims d = kDims;
  const std::int64_t rows = 2;
  Tensor kv = filled(c, rows, d.kv_width(), 0.0f), krope = filled(c, rows, d.dr, 1000.0f);
  Tensor k = c.alloc(rows, d.heads * d.dq(), DType::f32),
         v = c.alloc(rows, d.heads * d.dv, DType::f32);
  c.mla_split_kv(kv, krope, d, k, v);
  const std::vector<float> kvh = read(c, kv), kr = read(c, krope), kh = read(c, k), vh = read(c, v);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t col = 0; col < d.heads * d.dq(); ++col) {
      const std::int64_t src = mla_k_source(col, d);
      const float want = src >= 0 ? kvh[r * d.kv_width() + src] : kr[r * d.dr - 1 - src];
      CHECK(kh[r * d.heads * d.dq() + col] == want);
    }
    for (std::int64_t col = 0; col < d.heads * d.dv; ++col) {
      CHECK(vh[r * d.heads * d.dv + col] == kvh[r * d.kv_width() + mla_v_source(col, d)]);
    }
  }
  // The gradient: dkv takes dk's k_nope and dv back to their kv columns; dkrope sums the heads.
  Tensor dk = filled(c, rows, d.heads * d.dq(), 0.5f),
         dv = filled(c, rows, d.heads * d.dv, -100.0f);
  Tensor dkv = filled(c, rows, d.kv_width(), 7.0f), dkrope = filled(c, rows, d.dr, 7.0f);
  c.mla_merge_kv_grad(dk, dv, d, dkv, dkrope);
  const std::vector<float> dkh = read(c, dk), dvh = read(c, dv), dkvh = read(c, dkv);
  const std::vector<float> drh = read(c, dkrope);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t col = 0; col < d.kv_width(); ++col) {
      const std::int64_t src = mla_kv_grad_source(col, d);
      const float want =
          src >= 0 ? dkh[r * d.heads * d.dq() + src] : dvh[r * d.heads * d.dv - 1 - src];
      CHECK(dkvh[r * d.kv_width() + col] == want);
    }
    for (std::int64_t j = 0; j < d.dr; ++j) {
      float sum = 0.0f;
      for (std::int64_t h = 0; h < d.heads; ++h)
        sum += dkh[r * d.heads * d.dq() + h * d.dq() + d.dn + j];
      CHECK(drh[r * d.dr + j] == sum);  // small integers: exact in FP32
    }
  }
  // Shapes are checked once, for every backend.
  CHECK_THROWS_AS(c.mla_split_kv(kv, krope, MlaDims{2, 4, 2, 5}, k, v), RuntimeError);
}

}  // namespace
}  // namespace moebench
