// The cuda backend's attention through a packed-operand implementation
// (harness/backends/cuda/attention_packed.cuh) run on the CPU: its orchestration, unchanged, over
// a host executor whose SDPA is the cpu backend's attention on the packed views (converted to
// FP32, the outputs rounded to BF16 as cuDNN writes them) and whose gather and scatter are the
// kernels' own per-thread work over an emulated grid. Compared with the cpu backend on MLA's
// operands in place, this checks without a GPU the views the cuDNN path hands over: q, the
// output and the output's gradient sliced per chunk of heads, k and v gathered, the gradients
// scattered back and the rope key's gradient summed over the chunks, the statistics moved into
// and out of cuDNN's packed [batch, heads, seq, 1] (the host SDPA keeps cuDNN's contract for
// them, as plain loops); and that a refused shape runs nothing.
//
// Tolerances: the outputs are rounded to BF16 once (1e-2 of the largest magnitude); the rope
// key's gradient sums the heads' BF16-rounded parts (3e-2); the statistics are FP32 from the
// same values in another order of summation (1e-5).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "harness/backends/cuda/attention_packed.cuh"
#include "tests/cuda_host/attention_host.hpp"
#include "tests/cuda_host/emulated_grid.hpp"

namespace moebench::cuda {
namespace {

using namespace host_attention;  // NOLINT: the cases' shared helpers

// The executor attention_packed.cuh asks for, on host memory.
struct HostSdpa {
  CpuCompute& c;
  std::size_t budget = std::size_t{1} << 30;
  bool refuse = false;
  HostScratch scratch_buffer;
  int supports_calls = 0, forwards = 0, backwards = 0, gathers = 0, stats_moves = 0;

  // The views are cuDNN's [batch, heads, seq, d]: rows x heads d, a head's d columns together;
  // the statistics its packed [batch, heads, seq, 1].
  bool supports(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                const Mat& stats) {
    ++supports_calls;
    CHECK(q.cols == s.heads * s.qk_dim);
    CHECK(k.cols == s.heads * s.qk_dim);
    CHECK(v.cols == s.heads * s.v_dim);
    CHECK(out.cols == s.heads * s.v_dim);
    CHECK(stats.rows == s.batch * s.heads);
    CHECK(stats.cols == s.seq_len);
    CHECK(stats.ld == s.seq_len);
    // Every slice starts on a 16-byte boundary (the chunks start on multiples of 8 heads).
    for (const Mat* m : {&q, &k, &v, &out, &stats}) {
      CHECK(reinterpret_cast<std::uintptr_t>(m->data) % 16 == 0);
    }
    return !refuse;
  }
  // cuDNN's statistics contract, as plain loops: packed (b heads + h, t) is row b seq + t, head h
  // of the cpu backend's rows x heads.
  void to_cudnn_stats(const AttentionShape& s, const Tensor& st, const Mat& packed) {
    std::vector<float> v(static_cast<std::size_t>(st.numel()));
    c.download(st, v.data());
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t t = 0; t < s.seq_len; ++t)
          store(packed, b * s.heads + h, t,
                v[static_cast<std::size_t>((b * s.seq_len + t) * s.heads + h)]);
  }
  Tensor from_cudnn_stats(const AttentionShape& s, const Mat& packed) {
    std::vector<float> v(static_cast<std::size_t>(s.batch * s.seq_len * s.heads));
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t t = 0; t < s.seq_len; ++t)
          v[static_cast<std::size_t>((b * s.seq_len + t) * s.heads + h)] =
              load(packed, b * s.heads + h, t);
    Tensor st = c.alloc(s.batch * s.seq_len, s.heads, DType::f32);
    c.upload(v.data(), st);
    return st;
  }
  Tensor to_f32(const Mat& m) {
    Tensor t = c.alloc(m.rows, m.cols, DType::f32);
    std::vector<float> v(static_cast<std::size_t>(m.rows * m.cols));
    for (std::int64_t r = 0; r < m.rows; ++r)
      for (std::int64_t col = 0; col < m.cols; ++col)
        v[static_cast<std::size_t>(r * m.cols + col)] = load(m, r, col);
    c.upload(v.data(), t);
    return t;
  }
  void write(const Tensor& t, const Mat& dst) {  // rounded to dst's dtype
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    c.download(t, v.data());
    for (std::int64_t r = 0; r < dst.rows; ++r)
      for (std::int64_t col = 0; col < dst.cols; ++col)
        store(dst, r, col, v[static_cast<std::size_t>(r * dst.cols + col)]);
  }
  void forward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
               const Mat& stats) {
    ++forwards;
    Tensor o = c.alloc(out.rows, out.cols, DType::f32), st = c.alloc(out.rows, s.heads, DType::f32);
    c.attention_forward(s, to_f32(q), to_f32(k), to_f32(v), o, st);
    write(o, out);
    to_cudnn_stats(s, st, stats);
  }
  void backward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                const Mat& dout, const Mat& stats, const Mat& dq, const Mat& dk, const Mat& dv) {
    ++backwards;
    Tensor gq = c.alloc(dq.rows, dq.cols, DType::f32), gk = c.alloc(dk.rows, dk.cols, DType::f32);
    Tensor gv = c.alloc(dv.rows, dv.cols, DType::f32);
    c.attention_backward(s, to_f32(q), to_f32(k), to_f32(v), to_f32(out), to_f32(dout),
                         from_cudnn_stats(s, stats), gq, gk, gv);
    write(gq, dq);
    write(gk, dk);
    write(gv, dv);
  }
  // The kernels' per-thread work, every thread of a small grid (striding both ways).
  void gather(const HeadCols& a, const HeadCols& b, std::int64_t h0, const Mat& packed) {
    ++gathers;
    run_grid(dim3(1, 3), 32, [&](const GridPos& p) { gather_heads_work(p, a, b, h0, packed); });
  }
  void scatter(const Mat& packed, std::int64_t h0, std::int64_t heads, const HeadCols& a,
               const HeadCols& b, bool accumulate) {
    run_grid(dim3(1, 3), 32,
             [&](const GridPos& p) { scatter_heads_work(p, packed, h0, heads, a, b, accumulate); });
  }
  void pack_stats(const Mat& stats, std::int64_t seq, const Mat& packed) {
    ++stats_moves;
    run_grid(dim3(1, 3), 32,
             [&](const GridPos& p) { move_stats_work(p, stats, seq, packed, true); });
  }
  void unpack_stats(const Mat& packed, std::int64_t seq, const Mat& stats) {
    ++stats_moves;
    run_grid(dim3(1, 3), 32,
             [&](const GridPos& p) { move_stats_work(p, stats, seq, packed, false); });
  }
  void* scratch(std::size_t bytes) { return scratch_buffer.get(bytes); }
  std::size_t score_budget() const { return budget; }
};

void run_mla(bool causal, std::size_t budget) {
  CAPTURE(causal);
  CAPTURE(budget);
  CpuCompute c(1);
  const auto [md, s, rows, qc, vc] = mla_case(causal);
  Pair q = pair(c, rows, qc, 1), kv = pair(c, rows, md.kv_width(), 2), kr = pair(c, rows, md.dr, 3);
  Pair o = pair(c, rows, vc, 4), dout = pair(c, rows, vc, 5), dq = pair(c, rows, qc, 6);
  Pair dkv = pair(c, rows, md.kv_width(), 7), dkr = pair(c, rows, md.dr, 8);
  Stats st = stats_pair(c, rows, md.heads);
  const Mat stats = st.dv();
  const Tensor& stats_ref = st.ref;

  HostSdpa p{c, budget};
  const AttentionOperands in = AttentionOperands::mla(md, q.dv(), kv.dv(), kr.dv());
  REQUIRE(packed_attention(p, s, in, o.dv(), stats, nullptr, nullptr));
  c.attention_forward(s, AttentionOperands::mla(md, q.cv(), kv.cv(), kr.cv()), o.cv(), stats_ref);
  check_close(o.dv(), c, o.ref, 1e-2, "out");
  check_close(stats, c, stats_ref, 1e-5, "log-sum-exp");
  // 5 heads of 12/6 columns: the smallest aligned chunk is 4 heads (4 x 6 BF16 = 48 bytes).
  const int chunks = budget < 1000 ? 2 : 1;
  CHECK(p.supports_calls == chunks);  // every chunk's shape asked first
  CHECK(p.forwards == chunks);
  CHECK(p.gathers == 2 * chunks);  // k and v
  CHECK(p.stats_moves == chunks);  // out of cuDNN's layout, once a chunk

  o.sync_ref(c);  // backward from the same output on both sides
  const Mat d_o = dout.dv();
  const AttentionOperands grad = AttentionOperands::mla(md, dq.dv(), dkv.dv(), dkr.dv());
  REQUIRE(packed_attention(p, s, in, o.dv(), stats, &d_o, &grad));
  c.attention_backward(s, AttentionOperands::mla(md, q.cv(), kv.cv(), kr.cv()), o.cv(), dout.cv(),
                       stats_ref, AttentionOperands::mla(md, dq.cv(), dkv.cv(), dkr.cv()));
  CHECK(p.backwards == chunks);
  CHECK(p.stats_moves == 2 * chunks);  // and back into it for the backward
  check_close(dq.dv(), c, dq.ref, 1e-2, "dq");
  check_close(dkv.dv(), c, dkv.ref, 1e-2, "dkv (dk_nope and dv)");
  check_close(dkr.dv(), c, dkr.ref, 3e-2, "dkrope (the heads' sum over the chunks)");
}

TEST_CASE(
    "packed attention on the host: MLA's k and v gathered per chunk of heads, the "
    "gradients scattered back") {
  for (bool causal : {true, false}) {
    run_mla(causal, std::size_t{1} << 30);
    run_mla(causal, 1);  // the smallest aligned chunk: 4 heads, then 1
  }
}

TEST_CASE("packed attention on the host: chunks of heads start on 16-byte boundaries") {
  // MLA's 192/128: every head is 384/256 bytes, so any count of heads is aligned.
  CHECK(packed_chunk_heads(128, 192, 128, 1000, 10'000) == 10);
  CHECK(packed_chunk_heads(128, 192, 128, 1000, 1) == 1);
  CHECK(packed_chunk_heads(128, 192, 128, 1000, 1'000'000) == 128);
  // 12/6 columns: 4 heads fill 16-byte units of both; 3 heads of 8/8 is already aligned.
  CHECK(packed_chunk_heads(10, 12, 6, 100, 700) == 4);
  CHECK(packed_chunk_heads(10, 12, 6, 100, 100) == 4);
  CHECK(packed_chunk_heads(3, 12, 6, 100, 100) == 3);
  CHECK(packed_chunk_heads(10, 8, 8, 100, 300) == 3);
  // 5/3 columns: 8 heads, so a smaller budget still takes 8 (or all there are).
  CHECK(packed_chunk_heads(20, 5, 3, 100, 500) == 8);
  CHECK(packed_chunk_heads(6, 5, 3, 100, 500) == 6);
}

TEST_CASE("packed attention on the host: packed operands in place, a refused shape runs nothing") {
  CpuCompute c(1);
  const AttentionShape s{1, 5, 3, 4, 4, 0.5f, true};
  Pair q = pair(c, 5, 12, 1), k = pair(c, 5, 12, 2), v = pair(c, 5, 12, 3), o = pair(c, 5, 12, 4);
  std::vector<float> st(15, std::numeric_limits<float>::quiet_NaN());
  const Mat stats{st.data(), 5, 3, 3, DType::f32};
  HostSdpa p{c};
  REQUIRE(packed_attention(p, s, AttentionOperands::dense(s, q.dv(), k.dv(), v.dv()), o.dv(), stats,
                           nullptr, nullptr));
  CHECK(p.gathers == 0);  // read in place
  CHECK(p.forwards == 1);

  const MlaDims md{3, 2, 2, 4};
  Pair kv = pair(c, 5, md.kv_width(), 5), kr = pair(c, 5, md.dr, 6);
  const std::vector<bf16> before = o.dev;
  HostSdpa refusing{c};
  refusing.refuse = true;
  CHECK_FALSE(packed_attention(refusing, s, AttentionOperands::mla(md, q.dv(), kv.dv(), kr.dv()),
                               o.dv(), stats, nullptr, nullptr));
  CHECK(refusing.forwards == 0);
  CHECK(refusing.gathers == 0);
  CHECK(std::equal(before.begin(), before.end(), o.dev.begin(),
                   [](bf16 a, bf16 b) { return __bfloat162float(a) == __bfloat162float(b); }));
}

}  // namespace
}  // namespace moebench::cuda
