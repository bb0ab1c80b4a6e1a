// The cpu backend's core attention (cpu_attention.cpp): forward against a naive reference,
// backward against finite differences.
#include "harness/backends/cpu/cpu_compute.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tests/unit/cpu_fixture.hpp"

namespace moebench {
namespace {

using namespace test;

// Attention in double, straight from the definition.
Vec naive_attention(const AttentionShape& s, const Vec& q, const Vec& k, const Vec& v) {
  const std::int64_t t = s.seq_len, qc = s.heads * s.qk_dim, vc = s.heads * s.v_dim;
  Vec out(static_cast<std::size_t>(s.batch * t * vc));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      for (std::int64_t i = 0; i < t; ++i) {
        std::vector<double> p(t, 0.0);
        double mx = -1e300, sum = 0.0;
        const std::int64_t n = s.causal ? i + 1 : t;
        for (std::int64_t j = 0; j < n; ++j) {
          double d = 0.0;
          for (std::int64_t e = 0; e < s.qk_dim; ++e)
            d += double{q[(b * t + i) * qc + h * s.qk_dim + e]} *
                 k[(b * t + j) * qc + h * s.qk_dim + e];
          p[j] = s.scale * d;
          mx = std::max(mx, p[j]);
        }
        for (std::int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (std::int64_t e = 0; e < s.v_dim; ++e) {
          double o = 0.0;
          for (std::int64_t j = 0; j < n; ++j)
            o += p[j] / sum * v[(b * t + j) * vc + h * s.v_dim + e];
          out[(b * t + i) * vc + h * s.v_dim + e] = static_cast<float>(o);
        }
      }
    }
  }
  return out;
}

TEST_CASE("attention forward matches a naive reference; backward matches finite differences") {
  for (bool causal : {true, false}) {
    CAPTURE(causal);
    CpuCompute c(1);
    AttentionShape s;
    s.batch = 2;
    s.seq_len = 5;
    s.heads = 2;
    s.qk_dim = 4;
    s.v_dim = 3;
    s.scale = 1.0f / std::sqrt(4.0f);
    s.causal = causal;
    const std::int64_t rows = s.batch * s.seq_len;
    const std::int64_t qc = s.heads * s.qk_dim, vc = s.heads * s.v_dim;
    const Vec qv = random_vec(rows * qc, 50, 1.5f), kv = random_vec(rows * qc, 51, 1.5f);
    const Vec vv = random_vec(rows * vc, 52);
    Tensor q = make(c, rows, qc, qv), k = make(c, rows, qc, kv), v = make(c, rows, vc, vv);
    Tensor out = c.alloc(rows, vc), stats = c.alloc(rows, s.heads);
    c.attention_forward(s, q, k, v, out, stats);
    const Vec want = naive_attention(s, qv, kv, vv);
    const Vec got = read(c, out);
    // FP32 softmax and sums over <= 5 keys of O(1) values: 1e-5 relative is tens of ulps.
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));

    const Vec doutv = random_vec(rows * vc, 53);
    Tensor dout = make(c, rows, vc, doutv);
    Tensor dq = c.alloc(rows, qc), dk = c.alloc(rows, qc), dv = c.alloc(rows, vc);
    c.fill(dq, 7.0f);  // gradients are overwritten, not accumulated
    c.attention_backward(s, q, k, v, out, dout, stats, dq, dk, dv);
    Tensor out2 = c.alloc(rows, vc), stats2 = c.alloc(rows, s.heads);
    auto loss = [&] {
      c.attention_forward(s, q, k, v, out2, stats2);
      return dot(read(c, out2), doutv);
    };
    check_fd(c, q, read(c, dq), loss);
    check_fd(c, k, read(c, dk), loss);
    check_fd(c, v, read(c, dv), loss);
  }
}

}  // namespace
}  // namespace moebench
