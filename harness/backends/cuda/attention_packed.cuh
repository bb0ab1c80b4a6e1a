// The cuda backend's attention through a packed-operand implementation (cuDNN's SDPA, whose
// [batch, heads, seq, d] views take a head's q, k and v as one block each), written once over an
// executor `P`: attention.cu runs it with cuDNN and the gather/scatter kernels, tests/cuda_host
// with a host SDPA, so the chunking and every view handed over are checked without a GPU.
//
// Packed operands go in place. Others (MLA's key is [k_nope in kv | the rope key shared by the
// heads], its v inside kv) a chunk of heads at a time: k and v gathered into packed scratch (the
// chunk sized so that k, v and their gradients fit the score budget), q, the output, the
// statistics and the output's gradient as column slices in place; backward scatters the packed
// gradients back (a shared part summed over the heads, added up over the chunks). Forward and
// backward use the same chunks, so that both run the same implementation (their stats differ
// from the batched GEMMs'). Every chunk's shape is put to supports() before any runs.
//
// The executor provides:
//   supports(s, q, k, v, out, stats) -> bool  whether the implementation takes these views
//   forward(s, q, k, v, out, stats), backward(s, q, k, v, out, dout, stats, dq, dk, dv)
//   gather(a, b, h0, packed), scatter(packed, h0, heads, a, b, accumulate)   (kernel_work.cuh)
//   scratch(bytes) -> void*, score_budget() -> std::size_t
#pragma once

#include <algorithm>
#include <cstdint>

#include "harness/backends/cuda/attention_gemm.cuh"  // chunk_heads
#include "harness/backends/cuda/cuda_backend.hpp"    // Carver
#include "harness/compute/attention_operands.hpp"

namespace moebench::cuda {

// False where the implementation does not take the operands: nothing ran.
template <typename P>
bool packed_attention(P& p, const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                      const Mat& stats, const Mat* dout, const AttentionOperands* grad) {
  using bf16 = __nv_bfloat16;
  if (in.packed()) {
    if (!p.supports(s, in.q.m, in.k.m, in.v.m, out, stats)) return false;
    if (grad == nullptr) {
      p.forward(s, in.q.m, in.k.m, in.v.m, out, stats);
    } else {
      p.backward(s, in.q.m, in.k.m, in.v.m, out, *dout, stats, grad->q.m, grad->k.m, grad->v.m);
    }
    return true;
  }
  if (!in.q.packed()) return false;
  // Packed k and v for a chunk of heads, and with grad their gradients; the same chunks forward
  // and backward, so that both run the same implementation (their stats differ).
  const std::int64_t rows = s.batch * s.seq_len, qk = s.qk_dim, vd = s.v_dim;
  const auto per_head = static_cast<std::size_t>(rows * (qk + vd)) * 2 * sizeof(bf16);
  const std::int64_t hc = chunk_heads(s.heads, per_head, p.score_budget());
  const auto chunk = [&](std::int64_t h0) {
    AttentionShape c = s;
    c.heads = std::min(hc, s.heads - h0);
    return c;
  };
  const auto packed = [&](void* base, std::int64_t heads, std::int64_t d) {
    return Mat{base, rows, heads * d, heads * d, DType::bf16};
  };
  const auto q_of = [&](const HeadCols& q, std::int64_t h0, std::int64_t heads) {
    return q.m.col_slice(h0 * qk, heads * qk);
  };
  for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {  // every chunk's shape, before any runs
    const AttentionShape c = chunk(h0);
    const Mat k{nullptr, rows, c.heads * qk, c.heads * qk, DType::bf16};
    const Mat v{nullptr, rows, c.heads * vd, c.heads * vd, DType::bf16};
    if (!p.supports(c, q_of(in.q, h0, c.heads), k, v, out.col_slice(h0 * vd, c.heads * vd),
                    stats.col_slice(h0, c.heads))) {
      return false;
    }
  }
  const std::size_t k_bytes = Carver::round(static_cast<std::size_t>(rows * hc * qk) * 2);
  const std::size_t v_bytes = Carver::round(static_cast<std::size_t>(rows * hc * vd) * 2);
  Carver carve(p.scratch((grad != nullptr ? 2 : 1) * (k_bytes + v_bytes)));
  void* kp = carve.take<bf16>(k_bytes / sizeof(bf16));
  void* vp = carve.take<bf16>(v_bytes / sizeof(bf16));
  void* dkp = grad != nullptr ? carve.take<bf16>(k_bytes / sizeof(bf16)) : nullptr;
  void* dvp = grad != nullptr ? carve.take<bf16>(v_bytes / sizeof(bf16)) : nullptr;
  for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
    const AttentionShape c = chunk(h0);
    const Mat k = packed(kp, c.heads, qk), v = packed(vp, c.heads, vd);
    const Mat o = out.col_slice(h0 * vd, c.heads * vd), st = stats.col_slice(h0, c.heads);
    p.gather(in.k, in.k_rope, h0, k);
    p.gather(in.v, HeadCols{}, h0, v);
    if (grad == nullptr) {
      p.forward(c, q_of(in.q, h0, c.heads), k, v, o, st);
      continue;
    }
    const Mat dk = packed(dkp, c.heads, qk), dv = packed(dvp, c.heads, vd);
    p.backward(c, q_of(in.q, h0, c.heads), k, v, o, dout->col_slice(h0 * vd, c.heads * vd), st,
               q_of(grad->q, h0, c.heads), dk, dv);
    p.scatter(dk, h0, c.heads, grad->k, grad->k_rope, h0 > 0);
    p.scatter(dv, h0, c.heads, grad->v, HeadCols{}, false);
  }
  return true;
}

}  // namespace moebench::cuda
