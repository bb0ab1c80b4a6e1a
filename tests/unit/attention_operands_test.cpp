// Attention's operands by head (harness/compute/attention_operands.hpp): the plain and MLA
// layouts, the key's column map, the interface's checks, and MLA's in-place operands on the cpu
// backend against plain attention over k and v built by hand (the copies the operands avoid).
#include "harness/compute/attention_operands.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/core/error.hpp"
#include "harness/math/random.hpp"

namespace moebench {
namespace {

using Vec = std::vector<float>;
constexpr MlaDims kDims{3, 4, 2, 5};  // 3 heads, k_nope 4, rope 2, v 5: kv is 27 wide

std::int64_t col_of(const Mat& base, const Mat& view) {
  return (static_cast<const float*>(view.data) - static_cast<const float*>(base.data));
}

TEST_CASE("attention operands: MLA's heads in place in kv, the rope key shared; plain packed") {
  Vec qb(6 * 3 * 6), kvb(6 * 27), krb(6 * 2);
  const Mat q{qb.data(), 6, 18, 18, DType::f32}, kv{kvb.data(), 6, 27, 27, DType::f32},
      kr{krb.data(), 6, 2, 2, DType::f32};
  const AttentionOperands m = AttentionOperands::mla(kDims, q, kv, kr);
  for (std::int64_t h = 0; h < kDims.heads; ++h) {
    CHECK(col_of(q, m.q.head(h)) == h * 6);
    CHECK(col_of(kv, m.k.head(h)) == h * 9);      // k_nope: the first dn of head h's 9
    CHECK(col_of(kv, m.v.head(h)) == h * 9 + 4);  // v: the dv after them
    CHECK(col_of(kr, m.k_rope.head(h)) == 0);     // every head's rope key is krope
  }
  CHECK(m.k.width == 4);
  CHECK(m.k_rope.width == 2);
  CHECK(m.v.width == 5);
  CHECK(col_of(kv, m.v.head(2)) + m.v.width == 27);  // the last head's v ends kv's row
  CHECK(m.k_rope.shared());
  CHECK_FALSE(m.packed());

  AttentionShape s;
  s.heads = 3;
  s.qk_dim = 6;
  s.v_dim = 9;
  const AttentionOperands d = AttentionOperands::dense(s, q, q, kv);
  CHECK(d.packed());
  CHECK(d.k_rope.width == 0);
  CHECK(col_of(kv, d.v.head(2)) == 18);

  // The key's column map: [a | b] per head, b at its own stride (0: shared).
  CHECK(key_column(9, 4, 0, 2, 3).col == 21);
  CHECK_FALSE(key_column(9, 4, 0, 2, 3).second);
  CHECK(key_column(9, 4, 0, 2, 5).second);
  CHECK(key_column(9, 4, 0, 2, 5).col == 1);
  CHECK(key_column(9, 4, 2, 2, 5).col == 5);
}

Vec random_vec(std::int64_t n, std::uint64_t stream, float scale = 1.0f) {
  Vec v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * uniform_pm1(11, stream, i);
  return v;
}

Tensor make(CpuCompute& c, std::int64_t rows, std::int64_t cols, const Vec& v) {
  Tensor t = c.alloc(rows, cols, DType::f32);
  c.upload(v.data(), t);
  return t;
}

Vec read(CpuCompute& c, const Tensor& t) {
  Vec v(static_cast<std::size_t>(t.numel()));
  c.download(t, v.data());
  return v;
}

TEST_CASE("attention on MLA's operands in place equals plain attention over built k and v") {
  const MlaDims md = kDims;
  for (bool causal : {true, false}) {
    CAPTURE(causal);
    CpuCompute c(1);
    // 2 sequences of 4 tokens.
    const AttentionShape s{
        2, 4, md.heads, md.dq(), md.dv, 1.0f / std::sqrt(static_cast<float>(md.dq())), causal};
    const std::int64_t rows = s.batch * s.seq_len, qc = md.heads * md.dq(), vc = md.heads * md.dv,
                       kvc = md.kv_width();
    const Vec qv = random_vec(rows * qc, 1, 1.5f), kvv = random_vec(rows * kvc, 2, 1.5f),
              krv = random_vec(rows * md.dr, 3, 1.5f), dov = random_vec(rows * vc, 4);
    // k = [k_nope | krope] and v per head, by hand.
    Vec kd(static_cast<std::size_t>(rows * qc)), vd(static_cast<std::size_t>(rows * vc));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t h = 0; h < md.heads; ++h) {
        for (std::int64_t j = 0; j < md.dq(); ++j) {
          kd[r * qc + h * md.dq() + j] =
              j < md.dn ? kvv[r * kvc + h * (md.dn + md.dv) + j] : krv[r * md.dr + j - md.dn];
        }
        for (std::int64_t j = 0; j < md.dv; ++j)
          vd[r * vc + h * md.dv + j] = kvv[r * kvc + h * (md.dn + md.dv) + md.dn + j];
      }
    }
    Tensor q = make(c, rows, qc, qv), kv = make(c, rows, kvc, kvv), kr = make(c, rows, md.dr, krv);
    Tensor k = make(c, rows, qc, kd), v = make(c, rows, vc, vd), dout = make(c, rows, vc, dov);
    Tensor o_mla = c.alloc(rows, vc), st_mla = c.alloc(rows, md.heads);
    Tensor o_ref = c.alloc(rows, vc), st_ref = c.alloc(rows, md.heads);
    c.attention_forward(s, AttentionOperands::mla(md, q, kv, kr), o_mla, st_mla);
    c.attention_forward(s, q, k, v, o_ref, st_ref);
    // The same FP32 arithmetic, the scores' dot product split in two (k_nope, then rope): a
    // few ulps of O(1) values, so 1e-5 relative with a 1e-6 floor.
    const auto close = [](const Vec& got, const Vec& want) {
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5).scale(1e-1));
    };
    close(read(c, o_mla), read(c, o_ref));
    close(read(c, st_mla), read(c, st_ref));

    Tensor dq = c.alloc(rows, qc), dkv = c.alloc(rows, kvc), dkr = c.alloc(rows, md.dr);
    Tensor dq_ref = c.alloc(rows, qc), dk_ref = c.alloc(rows, qc), dv_ref = c.alloc(rows, vc);
    c.fill(dkv, 7.0f);  // overwritten, not accumulated
    c.fill(dkr, 7.0f);
    c.attention_backward(s, AttentionOperands::mla(md, q, kv, kr), o_mla, dout, st_mla,
                         AttentionOperands::mla(md, dq, dkv, dkr));
    c.attention_backward(s, q, k, v, o_ref, dout, st_ref, dq_ref, dk_ref, dv_ref);
    close(read(c, dq), read(c, dq_ref));
    // dkv takes dk's k_nope and dv at their kv columns; dkrope sums the heads' rope columns.
    const Vec dk = read(c, dk_ref), dv = read(c, dv_ref);
    Vec want_kv(static_cast<std::size_t>(rows * kvc)),
        want_kr(static_cast<std::size_t>(rows * md.dr));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t h = 0; h < md.heads; ++h) {
        for (std::int64_t j = 0; j < md.dn; ++j)
          want_kv[r * kvc + h * (md.dn + md.dv) + j] = dk[r * qc + h * md.dq() + j];
        for (std::int64_t j = 0; j < md.dv; ++j)
          want_kv[r * kvc + h * (md.dn + md.dv) + md.dn + j] = dv[r * vc + h * md.dv + j];
        for (std::int64_t j = 0; j < md.dr; ++j)
          want_kr[r * md.dr + j] += dk[r * qc + h * md.dq() + md.dn + j];
      }
    }
    close(read(c, dkv), want_kv);
    close(read(c, dkr), want_kr);
  }
}

TEST_CASE("attention operands are checked once, for every backend") {
  CpuCompute c(1);
  const AttentionShape s{1, 2, kDims.heads, kDims.dq(), kDims.dv, 1.0f, true};  // 1 x 2 tokens
  Tensor q = c.alloc(2, 18, DType::f32), kv = c.alloc(2, 27, DType::f32);
  Tensor kr = c.alloc(2, 2, DType::f32), o = c.alloc(2, 15, DType::f32);
  Tensor st = c.alloc(2, 3, DType::f32), kv_short = c.alloc(2, 26, DType::f32);
  const AttentionOperands good = AttentionOperands::mla(kDims, q, kv, kr);
  c.attention_forward(s, good, o, st);  // reaches the backend
  AttentionOperands bad = good;
  bad.k.head_stride = 3;  // heads overlapping
  CHECK_THROWS_WITH_AS(c.attention_forward(s, bad, o, st),
                       doctest::Contains("a head stride of 3 columns for heads 4 wide"),
                       RuntimeError);
  bad = good;
  bad.q.head_stride = 0;  // q is per head
  CHECK_THROWS_AS(c.attention_forward(s, bad, o, st), RuntimeError);
  bad = good;
  bad.k_rope.width = 1;  // the key is 5 wide, not qk_dim 6
  CHECK_THROWS_WITH_AS(c.attention_forward(s, bad, o, st), doctest::Contains("the shape says 6"),
                       RuntimeError);
  // The last head's v past the end of kv.
  CHECK_THROWS_WITH_AS(
      c.attention_forward(s, AttentionOperands::mla(kDims, q, kv_short, kr), o, st),
      doctest::Contains("ends at column"), RuntimeError);
  // Gradients in another layout than their inputs.
  AttentionOperands grad = good;
  grad.k_rope.head_stride = 2;
  CHECK_THROWS_WITH_AS(c.attention_backward(s, good, o, o, st, grad),
                       doctest::Contains("attention dk_rope"), RuntimeError);
}

}  // namespace
}  // namespace moebench
