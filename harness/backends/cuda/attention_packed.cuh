// The cuda backend's attention through a packed-operand implementation (cuDNN's SDPA, whose
// [batch, heads, seq, d] views take a head's q, k and v as one block each), written once over an
// executor `P`: attention.cu runs it with cuDNN and the kernels of kernel_work.cuh,
// tests/cuda_host with a host SDPA, so the chunking and every view handed over are checked
// without a GPU.
//
// A chunk of heads at a time, the same chunks forward and backward (their statistics are the
// implementation's own), every chunk's shape put to supports() before any runs. q, the output
// and the output's gradient go as column slices in place; so do k, v and their gradients where
// each is one block per head. Others (MLA's key is [k_nope in kv | the rope key shared by the
// heads], its v inside kv) are gathered into packed scratch, and backward scatters the packed
// gradients back (a shared part summed over the heads, added up over the chunks). The
// statistics live in packed [batch, heads, seq, 1] scratch (cudnn_attention.hpp says why): the
// forward moves the chunk's from there into the step's rows x heads, the backward moves them
// back first. Chunks start on a 16-byte boundary of q and the output whatever the head dims
// (packed_chunk_heads), the statistics' scratch on a 256-byte one.
//
// The executor provides:
//   supports(s, q, k, v, out, stats) -> bool  whether the implementation takes these views
//   forward(s, q, k, v, out, stats), backward(s, q, k, v, out, dout, stats, dq, dk, dv)
//   gather(a, b, h0, packed), scatter(packed, h0, heads, a, b, accumulate)   (kernel_work.cuh)
//   pack_stats(stats, seq, packed), unpack_stats(packed, seq, stats)          (kernel_work.cuh)
//   scratch(bytes) -> void*, score_budget() -> std::size_t
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "harness/backends/cuda/attention_gemm.cuh"  // chunk_heads
#include "harness/backends/cuda/cuda_backend.hpp"    // Carver
#include "harness/backends/cudnn/cudnn_attention.hpp"
#include "harness/compute/attention_operands.hpp"

namespace moebench::cuda {

// Heads per chunk: what the budget allows (chunk_heads), as a multiple of the fewest heads whose
// q and v columns (BF16) fill whole 16-byte units, so that every chunk's slices start on a
// 16-byte boundary (cudnn-frontend's default alignment); that many at least, at most all.
inline std::int64_t packed_chunk_heads(std::int64_t heads, std::int64_t qk_dim, std::int64_t v_dim,
                                       std::size_t bytes_per_head, std::size_t budget) {
  const std::int64_t unit =
      std::lcm(8 / std::gcd(qk_dim, std::int64_t{8}), 8 / std::gcd(v_dim, std::int64_t{8}));
  const std::int64_t hc = chunk_heads(heads, bytes_per_head, budget);
  if (hc >= heads) return heads;
  return std::min(heads, std::max(unit, hc / unit * unit));
}

// False where the implementation does not take the operands: nothing ran.
template <typename P>
bool packed_attention(P& p, const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                      const Mat& stats, const Mat* dout, const AttentionOperands* grad) {
  using bf16 = __nv_bfloat16;
  if (!in.q.packed()) return false;
  const bool gather = !in.packed();
  const std::int64_t rows = s.batch * s.seq_len, qk = s.qk_dim, vd = s.v_dim;
  const auto kv_head = static_cast<std::size_t>(rows * (qk + vd)) * sizeof(bf16);
  const std::size_t per_head = (gather ? (grad != nullptr ? 2 : 1) * kv_head : 0) +
                               static_cast<std::size_t>(rows) * sizeof(float);
  const std::int64_t hc = packed_chunk_heads(s.heads, qk, vd, per_head, p.score_budget());
  const auto chunk = [&](std::int64_t h0) {
    AttentionShape c = s;
    c.heads = std::min(hc, s.heads - h0);
    return c;
  };
  const auto slice = [&](const Mat& m, std::int64_t h0, std::int64_t heads, std::int64_t d) {
    return m.col_slice(h0 * d, heads * d);
  };
  const auto packed = [&](void* base, std::int64_t heads, std::int64_t d) {
    return Mat{base, rows, heads * d, heads * d, DType::bf16};
  };
  // k, v or a gradient of them as handed over for heads [h0, h0 + heads): a slice of the step's
  // matrix in place, or the packed scratch it is gathered into or scattered from.
  const auto operand = [&](const Mat& m, void* scratch, std::int64_t h0, std::int64_t heads,
                           std::int64_t d) {
    return gather ? packed(scratch, heads, d) : slice(m, h0, heads, d);
  };
  for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {  // every chunk's shape, before any runs
    const AttentionShape c = chunk(h0);
    if (!p.supports(c, slice(in.q.m, h0, c.heads, qk), operand(in.k.m, nullptr, h0, c.heads, qk),
                    operand(in.v.m, nullptr, h0, c.heads, vd), slice(out, h0, c.heads, vd),
                    CudnnAttention::stats_view(nullptr, c))) {
      return false;
    }
  }
  const std::size_t k_bytes =
      gather ? Carver::round(static_cast<std::size_t>(rows * hc * qk) * 2) : 0;
  const std::size_t v_bytes =
      gather ? Carver::round(static_cast<std::size_t>(rows * hc * vd) * 2) : 0;
  const std::size_t stats_bytes = Carver::round(static_cast<std::size_t>(rows * hc) * 4);
  Carver carve(p.scratch((grad != nullptr ? 2 : 1) * (k_bytes + v_bytes) + stats_bytes));
  void* kp = carve.take<bf16>(k_bytes / sizeof(bf16));
  void* vp = carve.take<bf16>(v_bytes / sizeof(bf16));
  void* dkp = grad != nullptr ? carve.take<bf16>(k_bytes / sizeof(bf16)) : nullptr;
  void* dvp = grad != nullptr ? carve.take<bf16>(v_bytes / sizeof(bf16)) : nullptr;
  void* stp = carve.take<float>(stats_bytes / sizeof(float));
  for (std::int64_t h0 = 0; h0 < s.heads; h0 += hc) {
    const AttentionShape c = chunk(h0);
    const Mat q = slice(in.q.m, h0, c.heads, qk), k = operand(in.k.m, kp, h0, c.heads, qk);
    const Mat v = operand(in.v.m, vp, h0, c.heads, vd), o = slice(out, h0, c.heads, vd);
    const Mat st = CudnnAttention::stats_view(stp, c), step_st = stats.col_slice(h0, c.heads);
    if (gather) {
      p.gather(in.k, in.k_rope, h0, k);
      p.gather(in.v, HeadCols{}, h0, v);
    }
    if (grad == nullptr) {
      p.forward(c, q, k, v, o, st);
      p.unpack_stats(st, s.seq_len, step_st);
      continue;
    }
    p.pack_stats(step_st, s.seq_len, st);
    const Mat dk = operand(grad->k.m, dkp, h0, c.heads, qk);
    const Mat dv = operand(grad->v.m, dvp, h0, c.heads, vd);
    p.backward(c, q, k, v, o, slice(*dout, h0, c.heads, vd), st, slice(grad->q.m, h0, c.heads, qk),
               dk, dv);
    if (gather) {
      p.scatter(dk, h0, c.heads, grad->k, grad->k_rope, h0 > 0);
      p.scatter(dv, h0, c.heads, grad->v, HeadCols{}, false);
    }
  }
  return true;
}

}  // namespace moebench::cuda
