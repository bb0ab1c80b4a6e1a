// The cuda backend's row reductions, written once over a team: the threads of a block (or the
// lanes of a warp) that share one row. The kernels in kernels.cu, loss.cu, rows.cu and
// attention.cu loop over rows and call these with a device team (BlockTeam, WarpTeam in
// device_mat.cuh); tests/cuda_host calls the same functions with an emulated team on the CPU,
// checking the split of a row over the team, the 16-byte paths and their tails without a GPU.
//
// A team runs a row's phases: team.sum(partial) and team.max(partial) call partial(t) at each
// member's place t along the row (a GridPos with x the member, nx the team's size) and give
// every member the total; team.each(work) runs work(t) at each member's place; team.one(f) runs
// f once; team.sync() orders the phases' memory accesses. Everything outside these calls is the
// same on every member. With `vec` (every view passed vec_rows_ok, and any column offset is a
// multiple of kVec), a member takes kVec columns at a time with 16-byte accesses, and the
// columns past the last whole chunk one by one (for_each_cell's split of a row).
//
// Each element goes through the shared arithmetic of harness/math (the cpu backend's); only
// the order of the FP32 sums differs from the cpu backend's loops.
#pragma once

#include <cmath>

#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/kernel_work.cuh"
#include "harness/math/elementwise.hpp"

namespace moebench::cuda {

// ---- A member's part of a row ------------------------------------------------------------------

// The largest of row r's columns [0, n) that the member at t covers (-inf for none).
MB_CUDA_HD float row_max_part(const GridPos& t, const Mat& m, std::int64_t r, std::int64_t n,
                              bool vec) {
  float mx = -INFINITY;
  for_each_cell(
      t, 1, n, vec,
      [&](std::int64_t, std::int64_t c) {
        float v[kVec];
        load_vec(m, r, c, v);
        for (float e : v) mx = fmaxf(mx, e);
      },
      [&](std::int64_t, std::int64_t c) { mx = fmaxf(mx, load(m, r, c)); });
  return mx;
}

// The sum of exp(x - shift) over the member's columns of row r's [0, n).
MB_CUDA_HD float exp_sum_part(const GridPos& t, const Mat& m, std::int64_t r, std::int64_t n,
                              float shift, bool vec) {
  float sum = 0.0f;
  for_each_cell(
      t, 1, n, vec,
      [&](std::int64_t, std::int64_t c) {
        float v[kVec];
        load_vec(m, r, c, v);
        for (float e : v) sum += ::expf(e - shift);
      },
      [&](std::int64_t, std::int64_t c) { sum += ::expf(load(m, r, c) - shift); });
  return sum;
}

// The member's part of the sum over j in [0, n) of a[ra, ca + j] * b[rb, cb + j].
MB_CUDA_HD float dot_part(const GridPos& t, const Mat& a, std::int64_t ra, std::int64_t ca,
                          const Mat& b, std::int64_t rb, std::int64_t cb, std::int64_t n,
                          bool vec) {
  float dot = 0.0f;
  for_each_cell(
      t, 1, n, vec,
      [&](std::int64_t, std::int64_t j) {
        float x[kVec], y[kVec];
        load_vec(a, ra, ca + j, x);
        load_vec(b, rb, cb + j, y);
        for (int e = 0; e < kVec; ++e) dot += x[e] * y[e];
      },
      [&](std::int64_t, std::int64_t j) { dot += load(a, ra, ca + j) * load(b, rb, cb + j); });
  return dot;
}

// ---- Rows ------------------------------------------------------------------------------------

// RMSNorm of row r: y = x * rstd * w, rstd saved.
MB_TEAM_WORK
template <typename Team>
MB_CUDA_HD void rmsnorm_forward_row(Team& team, const Mat& x, const Mat& w, float eps, const Mat& y,
                                    const Mat& rstd, std::int64_t r, bool vec) {
  const float sum_sq =
      team.sum([&](const GridPos& t) { return dot_part(t, x, r, 0, x, r, 0, x.cols, vec); });
  const float rs = rmsnorm_rstd(sum_sq, x.cols, eps);
  team.each([&](const GridPos& t) {
    for_each_cell(
        t, 1, x.cols, vec,
        [&](std::int64_t, std::int64_t c) {
          float v[kVec], wv[kVec];
          load_vec(x, r, c, v);
          load_vec(w, 0, c, wv);
          for (int j = 0; j < kVec; ++j) v[j] = v[j] * rs * wv[j];
          store_vec(y, r, c, v);
        },
        [&](std::int64_t, std::int64_t c) { store(y, r, c, load(x, r, c) * rs * load(w, 0, c)); });
  });
  team.one([&] { store(rstd, r, 0, rs); });
}

// RMSNorm's input gradient of row r (dx may be dy's memory: each member reads its columns before
// writing them, and the mean is complete before any member writes).
MB_TEAM_WORK
template <typename Team>
MB_CUDA_HD void rmsnorm_dx_row(Team& team, const Mat& dy, const Mat& x, const Mat& w,
                               const Mat& rstd, const Mat& dx, std::int64_t r, bool vec) {
  const auto load_chunk = [&](std::int64_t c, float* wv, float* dyv, float* xv) {
    load_vec(w, 0, c, wv);
    load_vec(dy, r, c, dyv);
    load_vec(x, r, c, xv);
  };
  const float dot = team.sum([&](const GridPos& t) {
    float part = 0.0f;
    for_each_cell(
        t, 1, x.cols, vec,
        [&](std::int64_t, std::int64_t c) {
          float wv[kVec], dyv[kVec], xv[kVec];
          load_chunk(c, wv, dyv, xv);
          for (int j = 0; j < kVec; ++j) part += wv[j] * dyv[j] * xv[j];
        },
        [&](std::int64_t, std::int64_t c) {
          part += load(w, 0, c) * load(dy, r, c) * load(x, r, c);
        });
    return part;
  });
  const float mean_wdyx = dot / static_cast<float>(x.cols);
  const float rs = load(rstd, r, 0);
  team.each([&](const GridPos& t) {
    for_each_cell(
        t, 1, x.cols, vec,
        [&](std::int64_t, std::int64_t c) {
          float wv[kVec], dyv[kVec], xv[kVec];
          load_chunk(c, wv, dyv, xv);
          for (int j = 0; j < kVec; ++j) dyv[j] = rmsnorm_dx(dyv[j], xv[j], wv[j], rs, mean_wdyx);
          store_vec(dx, r, c, dyv);
        },
        [&](std::int64_t, std::int64_t c) {
          store(dx, r, c, rmsnorm_dx(load(dy, r, c), load(x, r, c), load(w, 0, c), rs, mean_wdyx));
        });
  });
}

// The output head's cross-entropy of row r fused with its gradient: the loss into loss[r], and
// the logits overwritten with grad_scale * d loss / d logit. A label outside the row is
// reported in *error (code) and the row left as it is.
MB_TEAM_WORK
template <typename Team>
MB_CUDA_HD void cross_entropy_grad_row(Team& team, const Mat& logits, std::int32_t label,
                                       float grad_scale, const Mat& loss, std::int64_t r,
                                       int* error, int code, bool vec) {
  if (label < 0 || label >= logits.cols) {
    team.one([&] { *error = code; });
    return;
  }
  const std::int64_t n = logits.cols;
  const float max = team.max([&](const GridPos& t) { return row_max_part(t, logits, r, n, vec); });
  const float sum_exp =
      team.sum([&](const GridPos& t) { return exp_sum_part(t, logits, r, n, max, vec); });
  const float label_logit = load(logits, r, label);
  team.sync();  // every member has read the label's logit before any overwrites it
  team.one([&] { store(loss, r, 0, cross_entropy_loss(max, sum_exp, label_logit)); });
  team.each([&](const GridPos& t) {
    for_each_cell(
        t, 1, n, vec,
        [&](std::int64_t, std::int64_t c) {
          float v[kVec];
          load_vec(logits, r, c, v);
          for (int j = 0; j < kVec; ++j)
            v[j] = cross_entropy_grad(v[j], max, sum_exp, c + j == label, grad_scale);
          store_vec(logits, r, c, v);
        },
        [&](std::int64_t, std::int64_t c) {
          store(logits, r, c,
                cross_entropy_grad(load(logits, r, c), max, sum_exp, c == label, grad_scale));
        });
  });
}

// Score row blk of a chunk of heads' scores (kernel_work.cuh's ScoreChunk; s FP32 and p BF16,
// heads x seq rows of seq keys): p = exp(s - lse) over the visible keys, 0 over the masked rest,
// and the log-sum-exp into stats at the row's token and head.
MB_TEAM_WORK
template <typename Team>
MB_CUDA_HD void softmax_row(Team& team, const ScoreChunk& ch, const Mat& s, const Mat& p,
                            const Mat& stats, std::int64_t blk, bool vec) {
  const std::int64_t head_in_chunk = blk / ch.seq;
  const std::int64_t i = blk - head_in_chunk * ch.seq;
  const std::int64_t n = ch.causal ? i + 1 : ch.seq;
  const float mx = team.max([&](const GridPos& t) { return row_max_part(t, s, blk, n, vec); });
  const float lse =
      mx + ::logf(team.sum([&](const GridPos& t) { return exp_sum_part(t, s, blk, n, mx, vec); }));
  team.each([&](const GridPos& t) {
    for_each_cell(
        t, 1, ch.seq, vec,
        [&](std::int64_t, std::int64_t c) {
          float v[kVec];
          load_vec(s, blk, c, v);
          for (int j = 0; j < kVec; ++j) v[j] = c + j < n ? ::expf(v[j] - lse) : 0.0f;
          store_vec(p, blk, c, v);
        },
        [&](std::int64_t, std::int64_t c) {
          store(p, blk, c, c < n ? ::expf(load(s, blk, c) - lse) : 0.0f);
        });
  });
  team.one([&] { store(stats, ch.row0 + i, ch.head0 + head_in_chunk, lse); });
}

// Whether rowdot_row may take kVec columns at a time: each head's columns start on a chunk.
inline bool rowdot_vec(const Mat& dout, const Mat& out, std::int64_t v_dim) {
  return v_dim % kVec == 0 && vec_rows_ok(dout) && vec_rows_ok(out);
}

// D[w] = dot(dO[r, head h], O[r, head h]) for w = r * heads + h (v_dim columns a head; vec as
// rowdot_vec says).
MB_TEAM_WORK
template <typename Team>
MB_CUDA_HD void rowdot_row(Team& team, const Mat& dout, const Mat& out, std::int64_t heads,
                           std::int64_t v_dim, std::int64_t w, float* d, bool vec) {
  const std::int64_t r = w / heads;
  const std::int64_t c0 = (w - r * heads) * v_dim;
  const float dot =
      team.sum([&](const GridPos& t) { return dot_part(t, dout, r, c0, out, r, c0, v_dim, vec); });
  team.one([&] { d[w] = dot; });
}

// out[i] = dot(a[index[i]], b[i]); a bad index is reported in *error (code) and out[i] left.
MB_TEAM_WORK
template <typename Team>
MB_CUDA_HD void gathered_dot_row(Team& team, const Mat& a, const Mat& index, const Mat& b,
                                 const Mat& out, std::int64_t i, int* error, int code, bool vec) {
  const std::int32_t s = load_i32(index, i, 0);
  if (s < 0 || s >= a.rows) {
    team.one([&] { *error = code; });
    return;
  }
  const float dot =
      team.sum([&](const GridPos& t) { return dot_part(t, a, s, 0, b, i, 0, a.cols, vec); });
  team.one([&] { store(out, i, 0, dot); });
}

// Destination row d of scatter_add_rows, its sources sorted: dst[d] += the sum over positions
// [first, last) of scale[order[p]] * src[order[p]] (scale 1 unless scaled), in FP32 and in
// position order per column, dst read and written once.
MB_TEAM_WORK
template <typename Team>
MB_CUDA_HD void scatter_row(Team& team, const Mat& src, const Mat& scale, bool scaled,
                            const int* order, int first, int last, const Mat& dst, std::int64_t d,
                            bool vec) {
  if (first == last) return;  // no source row goes here
  team.each([&](const GridPos& t) {
    for_each_cell(
        t, 1, dst.cols, vec,
        [&](std::int64_t, std::int64_t c) {
          float acc[kVec] = {};
          for (int p = first; p < last; ++p) {
            const int i = order[p];
            const float k = scaled ? load(scale, i, 0) : 1.0f;
            float v[kVec];
            load_vec(src, i, c, v);
            for (int j = 0; j < kVec; ++j) acc[j] += k * v[j];
          }
          float cur[kVec];
          load_vec(dst, d, c, cur);
          for (int j = 0; j < kVec; ++j) cur[j] += acc[j];
          store_vec(dst, d, c, cur);
        },
        [&](std::int64_t, std::int64_t c) {
          float acc = 0.0f;
          for (int p = first; p < last; ++p) {
            const int i = order[p];
            acc += (scaled ? load(scale, i, 0) : 1.0f) * load(src, i, c);
          }
          store(dst, d, c, load(dst, d, c) + acc);
        });
  });
}

}  // namespace moebench::cuda
