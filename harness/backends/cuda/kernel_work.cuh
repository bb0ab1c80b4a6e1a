// The per-thread work of the cuda backend's grid-stride kernels, as __host__ __device__ functions
// of the thread's place in the grid (GridPos): the kernels in kernels.cu, rows.cu and attention.cu
// are one-line wrappers, and tests/cuda_host runs these same functions for every thread of an
// emulated grid on the CPU, checking their indexing, 16-byte paths and tails without a GPU.
//
// Each element goes through the shared arithmetic of harness/math (the cpu backend's); only the
// split over threads is here. Rows go along the grid's y, columns along x; no per-element
// division. With `vec` (every view passed vec_rows_ok and the columns allow it), a thread moves
// kVec elements with 16-byte accesses. Dense operands come in as one row (as_one_row), so the
// flat ops split only along x.
#pragma once

#include "harness/backends/cuda/device_mat.cuh"
#include "harness/compute/attention_operands.hpp"
#include "harness/math/elementwise.hpp"
#include "harness/math/random.hpp"

namespace moebench::cuda {

// ---- Element-wise over views of one shape -----------------------------------------------------

// dst = src, converted between the views' dtypes.
MB_CUDA_HD void convert_work(const GridPos& g, const Mat& src, const Mat& dst, bool vec) {
  for_each_cell(
      g, src.rows, src.cols, vec,
      [&](std::int64_t r, std::int64_t c) {
        float v[kVec];
        load_vec(src, r, c, v);
        store_vec(dst, r, c, v);
      },
      [&](std::int64_t r, std::int64_t c) { store(dst, r, c, load(src, r, c)); });
}

MB_CUDA_HD void fill_work(const GridPos& g, const Mat& x, float value, bool vec) {
  for_each_cell(
      g, x.rows, x.cols, vec,
      [&](std::int64_t r, std::int64_t c) {
        float v[kVec];
        for (float& e : v) e = value;
        store_vec(x, r, c, v);
      },
      [&](std::int64_t r, std::int64_t c) { store(x, r, c, value); });
}

// y = alpha x + beta y; beta == 0 does not read y (the BLAS convention: y may be uninitialised).
MB_CUDA_HD float axpby_value(float alpha, float x, float beta, float y) {
  return beta == 0.0f ? alpha * x : alpha * x + beta * y;
}

MB_CUDA_HD void axpby_work(const GridPos& g, float alpha, const Mat& x, float beta, const Mat& y,
                           bool vec) {
  for_each_cell(
      g, x.rows, x.cols, vec,
      [&](std::int64_t r, std::int64_t c) {
        float xv[kVec], yv[kVec] = {};
        load_vec(x, r, c, xv);
        if (beta != 0.0f) load_vec(y, r, c, yv);
        for (int j = 0; j < kVec; ++j) yv[j] = axpby_value(alpha, xv[j], beta, yv[j]);
        store_vec(y, r, c, yv);
      },
      [&](std::int64_t r, std::int64_t c) {
        store(y, r, c,
              axpby_value(alpha, load(x, r, c), beta, beta == 0.0f ? 0.0f : load(y, r, c)));
      });
}

// y = beta y (an empty GEMM's C); beta == 0 writes zeros without reading y.
MB_CUDA_HD void scale_work(const GridPos& g, const Mat& y, float beta, bool vec) {
  for_each_cell(
      g, y.rows, y.cols, vec,
      [&](std::int64_t r, std::int64_t c) {
        float v[kVec] = {};
        if (beta != 0.0f) load_vec(y, r, c, v);
        for (float& e : v) e *= beta;
        store_vec(y, r, c, v);
      },
      [&](std::int64_t r, std::int64_t c) {
        store(y, r, c, beta == 0.0f ? 0.0f : beta * load(y, r, c));
      });
}

// Element (r, c) is u(seed, stream, r * cols + c), independent of ld, as on the cpu backend (a
// dense tensor passed as one row: element c of its row-major order).
MB_CUDA_HD void fill_random_work(const GridPos& g, const Mat& x, std::uint64_t seed,
                                 std::uint64_t stream, float scale, bool vec) {
  auto value = [&](std::int64_t r, std::int64_t c) {
    return scale * uniform_pm1(seed, stream, static_cast<std::uint64_t>(r * x.cols + c));
  };
  for_each_cell(
      g, x.rows, x.cols, vec,
      [&](std::int64_t r, std::int64_t c) {
        float v[kVec];
        for (int j = 0; j < kVec; ++j) v[j] = value(r, c + j);
        store_vec(x, r, c, v);
      },
      [&](std::int64_t r, std::int64_t c) { store(x, r, c, value(r, c)); });
}

// AdamW; master (FP32, or no data): the value the update reads and writes, param gets it
// rounded.
MB_CUDA_HD void adamw_work(const GridPos& g, const AdamWCoeffs& k, const Mat& param,
                           const Mat& grad, const Mat& m, const Mat& v, const Mat& master,
                           bool vec) {
  const bool has_master = master.data != nullptr;
  const Mat& value = has_master ? master : param;
  for_each_cell(
      g, param.rows, param.cols, vec,
      [&](std::int64_t r, std::int64_t c) {
        float p[kVec], gr[kVec], mv[kVec], vv[kVec];
        load_vec(value, r, c, p);
        load_vec(grad, r, c, gr);
        load_vec(m, r, c, mv);
        load_vec(v, r, c, vv);
        for (int j = 0; j < kVec; ++j) adamw_update(k, &p[j], gr[j], &mv[j], &vv[j]);
        if (has_master) store_vec(master, r, c, p);
        store_vec(param, r, c, p);
        store_vec(m, r, c, mv);
        store_vec(v, r, c, vv);
      },
      [&](std::int64_t r, std::int64_t c) {
        float p = load(value, r, c), mv = load(m, r, c), vv = load(v, r, c);
        adamw_update(k, &p, load(grad, r, c), &mv, &vv);
        if (has_master) store(master, r, c, p);
        store(param, r, c, p);
        store(m, r, c, mv);
        store(v, r, c, vv);
      });
}

// ---- RMSNorm's weight gradient: dw += the sum over rows of dy * x * rstd ----------------------
// Deterministic in two passes: chunk y of kRmsnormRowsPerChunk rows sums its rows in order into
// partial[y][c] (chunks on the grid's y, columns along x); then dw[c] += the chunks' partials in
// chunk order (columns along x).
constexpr std::int64_t kRmsnormRowsPerChunk = 64;

// The chunks of `rows` rows: partial's rows, and the finish's count.
MB_CUDA_HD std::int64_t rmsnorm_dw_chunks(std::int64_t rows) {
  return (rows + kRmsnormRowsPerChunk - 1) / kRmsnormRowsPerChunk;
}

MB_CUDA_HD void rmsnorm_dw_partial_work(const GridPos& g, const Mat& dy, const Mat& x,
                                        const Mat& rstd, float* partial) {
  const std::int64_t chunks = rmsnorm_dw_chunks(x.rows);
  for (std::int64_t ch = g.y; ch < chunks; ch += g.ny) {
    const std::int64_t first = ch * kRmsnormRowsPerChunk;
    const std::int64_t last =
        first + kRmsnormRowsPerChunk < x.rows ? first + kRmsnormRowsPerChunk : x.rows;
    for (std::int64_t c = g.x; c < x.cols; c += g.nx) {
      float acc = 0.0f;
      for (std::int64_t r = first; r < last; ++r)
        acc += load(dy, r, c) * load(x, r, c) * load(rstd, r, 0);
      partial[ch * x.cols + c] = acc;
    }
  }
}

MB_CUDA_HD void rmsnorm_dw_finish_work(const GridPos& g, const float* partial, std::int64_t chunks,
                                       const Mat& dw) {
  for (std::int64_t c = g.x; c < dw.cols; c += g.nx) {
    float acc = 0.0f;
    for (std::int64_t k = 0; k < chunks; ++k) acc += partial[k * dw.cols + c];
    store(dw, 0, c, load(dw, 0, c) + acc);
  }
}

// ---- SwiGLU: gate_up is rows x 2f ([gate | up]), out and dout rows x f ------------------------
// vec needs f a multiple of kVec, so that the up half's chunks start on 16 bytes too.

MB_CUDA_HD void swiglu_forward_work(const GridPos& g, const Mat& gate_up, const Mat& out,
                                    bool vec) {
  const std::int64_t f = out.cols;
  for_each_cell(
      g, out.rows, f, vec,
      [&](std::int64_t r, std::int64_t c) {
        float gate[kVec], up[kVec];
        load_vec(gate_up, r, c, gate);
        load_vec(gate_up, r, f + c, up);
        for (int j = 0; j < kVec; ++j) gate[j] = moebench::swiglu_forward(gate[j], up[j]);
        store_vec(out, r, c, gate);
      },
      [&](std::int64_t r, std::int64_t c) {
        store(out, r, c, moebench::swiglu_forward(load(gate_up, r, c), load(gate_up, r, f + c)));
      });
}

MB_CUDA_HD void swiglu_backward_work(const GridPos& g, const Mat& gate_up, const Mat& dout,
                                     const Mat& dgate_up, bool vec) {
  const std::int64_t f = dout.cols;
  for_each_cell(
      g, dout.rows, f, vec,
      [&](std::int64_t r, std::int64_t c) {
        float gate[kVec], up[kVec], d[kVec];
        load_vec(gate_up, r, c, gate);
        load_vec(gate_up, r, f + c, up);
        load_vec(dout, r, c, d);
        for (int j = 0; j < kVec; ++j) {
          float dgate, dup;
          moebench::swiglu_backward(gate[j], up[j], d[j], &dgate, &dup);
          gate[j] = dgate;
          up[j] = dup;
        }
        store_vec(dgate_up, r, c, gate);
        store_vec(dgate_up, r, f + c, up);
      },
      [&](std::int64_t r, std::int64_t c) {
        float dgate, dup;
        moebench::swiglu_backward(load(gate_up, r, c), load(gate_up, r, f + c), load(dout, r, c),
                                  &dgate, &dup);
        store(dgate_up, r, c, dgate);
        store(dgate_up, r, f + c, dup);
      });
}

// ---- Rotary embedding: pair i of head h of row r (position r % seq_len) ----------------------
// Along x the heads x dim/2 pairs of a row, split into head and pair in 32 bits (a row holds far
// fewer than 2^31 pairs; the caller checks).
MB_CUDA_HD void rope_work(const GridPos& g, const Mat& x, std::int64_t seq_len, std::int64_t heads,
                          std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                          float theta, bool inverse) {
  const auto half = static_cast<std::uint32_t>(dim / 2);
  const auto pairs = static_cast<std::uint32_t>(heads) * half;
  for (std::int64_t r = g.y; r < x.rows; r += g.ny) {
    const std::int64_t pos = r % seq_len;  // once per row
    for (std::int64_t e = g.x; e < pairs; e += g.nx) {
      const std::uint32_t h = static_cast<std::uint32_t>(e) / half;
      const std::uint32_t i = static_cast<std::uint32_t>(e) - h * half;
      const float angle = rope_angle(pos, i, dim, theta);
      const float s = ::sinf(angle);
      const std::int64_t col = h * head_stride + offset + i;
      float a = load(x, r, col);
      float b = load(x, r, col + half);
      rope_rotate_pair(&a, &b, ::cosf(angle), inverse ? -s : s);
      store(x, r, col, a);
      store(x, r, col + half, b);
    }
  }
}

// ---- Row movement ------------------------------------------------------------------------------

// dst[i] = (scaled ? scale[i] : 1) * src[index[i]], row i of dst on the grid's y. A bad index is
// skipped and reported in *error (code); it is read per row, so the check is uniform.
MB_CUDA_HD void gather_work(const GridPos& g, const Mat& src, const Mat& index, const Mat& scale,
                            bool scaled, const Mat& dst, int* error, int code, bool vec) {
  for (std::int64_t i = g.y; i < dst.rows; i += g.ny) {
    const std::int32_t s = load_i32(index, i, 0);
    if (s < 0 || s >= src.rows) {
      if (g.x == 0) *error = code;
      continue;
    }
    const float k = scaled ? load(scale, i, 0) : 1.0f;
    const GridPos row{g.x, g.nx, 0, 1};
    for_each_cell(
        row, 1, dst.cols, vec,
        [&](std::int64_t, std::int64_t c) {
          float v[kVec];
          load_vec(src, s, c, v);
          if (scaled) {
            for (float& e : v) e *= k;
          }
          store_vec(dst, i, c, v);
        },
        [&](std::int64_t, std::int64_t c) {
          const float v = load(src, s, c);
          store(dst, i, c, scaled ? k * v : v);
        });
  }
}

// ---- scatter_add_rows, deterministically (rows.cu) ---------------------------------------------
// The source rows are sorted by destination (a stable radix sort of keys, carrying each row's
// position: each destination's sources stay in ascending order, the cpu backend's order), the
// sorted keys give each destination's range [start, end) of positions, and row_work.cuh's
// scatter_row adds each destination's sum once.

// keys[i] = index[i] and order[i] = i over the grid's x; a bad index gets the key dst_rows (sorted
// last, never applied) and is reported in *error.
MB_CUDA_HD void scatter_keys_work(const GridPos& g, const Mat& index, std::int64_t dst_rows,
                                  unsigned* keys, int* order, int* error, int code) {
  for (std::int64_t i = g.x; i < index.rows; i += g.nx) {
    const std::int32_t d = load_i32(index, i, 0);
    const bool ok = d >= 0 && d < dst_rows;
    if (!ok) *error = code;
    keys[i] = ok ? static_cast<unsigned>(d) : static_cast<unsigned>(dst_rows);
    order[i] = static_cast<int>(i);
  }
}

// From the n sorted keys: start[k] and end[k] for every destination k present (the rest keep the
// zeros the caller wrote: an empty range).
MB_CUDA_HD void segment_bounds_work(const GridPos& g, const unsigned* keys, std::int64_t n,
                                    std::int64_t dst_rows, int* start, int* end) {
  for (std::int64_t p = g.x; p < n; p += g.nx) {
    const unsigned k = keys[p];
    if (k >= dst_rows) continue;
    if (p == 0 || keys[p - 1] != k) start[k] = static_cast<int>(p);
    if (p == n - 1 || keys[p + 1] != k) end[k] = static_cast<int>(p + 1);
  }
}

// ---- Attention's operands by head (attention_operands.hpp), for cuDNN's packed views ---------
// Heads [h0, h0 + packed.cols / w) of the key [a | b] (w = a.width + b.width; for v, b empty)
// into packed, head after head. Rows on y; along x the packed row's columns, split into head and
// column in 32 bits (a row holds far fewer than 2^31 columns; the caller checks).
MB_CUDA_HD void gather_heads_work(const GridPos& g, const HeadCols& a, const HeadCols& b,
                                  std::int64_t h0, const Mat& packed) {
  const auto w = static_cast<std::uint32_t>(a.width + b.width);
  const auto cols = static_cast<std::uint32_t>(packed.cols);
  for (std::int64_t r = g.y; r < packed.rows; r += g.ny) {
    for (std::int64_t e = g.x; e < cols; e += g.nx) {
      const std::uint32_t hl = static_cast<std::uint32_t>(e) / w;
      const std::uint32_t j = static_cast<std::uint32_t>(e) - hl * w;
      const KeyColumn src = key_column(a.head_stride, a.width, b.head_stride, h0 + hl, j);
      store(packed, r, e, load(src.second ? b.m : a.m, r, src.col));
    }
  }
}

// The way back, for the gradient: packed (heads [h0, h0 + heads), w columns each) into [a | b].
// A per-head part takes its heads' columns; a shared part (head stride 0) the sum over the heads,
// in FP32 and in head order, added to what it holds where `accumulate` (a later range of heads).
// Along x: the packed columns (a shared part's skipped), then the shared parts' columns.
MB_CUDA_HD void scatter_heads_work(const GridPos& g, const Mat& packed, std::int64_t h0,
                                   std::int64_t heads, const HeadCols& a, const HeadCols& b,
                                   bool accumulate) {
  const auto w = static_cast<std::uint32_t>(a.width + b.width);
  const auto per_head = static_cast<std::uint32_t>(heads) * w;
  const auto a_shared = static_cast<std::uint32_t>(a.shared() ? a.width : 0);
  const auto b_shared = static_cast<std::uint32_t>(b.shared() ? b.width : 0);
  for (std::int64_t r = g.y; r < packed.rows; r += g.ny) {
    for (std::int64_t e = g.x; e < per_head + a_shared + b_shared; e += g.nx) {
      if (e < per_head) {
        const std::uint32_t hl = static_cast<std::uint32_t>(e) / w;
        const std::uint32_t j = static_cast<std::uint32_t>(e) - hl * w;
        const HeadCols& part = j < a.width ? a : b;
        if (part.shared()) continue;
        const KeyColumn dst = key_column(a.head_stride, a.width, b.head_stride, h0 + hl, j);
        store(part.m, r, dst.col, load(packed, r, e));
        continue;
      }
      const std::uint32_t k = static_cast<std::uint32_t>(e) - per_head;
      const bool in_a = k < a_shared;
      const HeadCols& part = in_a ? a : b;
      const std::uint32_t j = in_a ? k : k - a_shared;       // the part's column
      const std::uint32_t key_col = in_a ? j : a.width + j;  // its column in the key
      float sum = accumulate ? load(part.m, r, j) : 0.0f;
      for (std::uint32_t hl = 0; hl < heads; ++hl) sum += load(packed, r, hl * w + key_col);
      store(part.m, r, j, sum);
    }
  }
}

// The statistics between the step's layout and cuDNN's: `stats` is rows x heads (rows = batch x
// seq, FP32, any ld: a column slice of the step's), `packed` is cuDNN's [batch, heads, seq, 1]
// as a batch heads x seq view (CudnnAttention::stats_view). to_packed: packed[b heads + h, t] =
// stats[b seq + t, h]; else the way back. Packed rows on y (one division per row), positions
// along x, so the packed side moves whole rows.
MB_CUDA_HD void move_stats_work(const GridPos& g, const Mat& stats, std::int64_t seq,
                                const Mat& packed, bool to_packed) {
  const std::int64_t heads = stats.cols;
  for (std::int64_t r = g.y; r < packed.rows; r += g.ny) {
    const std::int64_t b = r / heads, h = r - b * heads;
    for (std::int64_t t = g.x; t < seq; t += g.nx) {
      if (to_packed) {
        store(packed, r, t, load(stats, b * seq + t, h));
      } else {
        store(stats, b * seq + t, h, load(packed, r, t));
      }
    }
  }
}

// ---- Attention (the batched-GEMM path): a chunk of heads' seq x seq scores ---------------------
// Score row `blk` is query i = blk % seq of the chunk's head head0 + blk / seq (rows of the
// sequence start at row0).
struct ScoreChunk {
  std::int64_t seq;    // keys and queries per sequence
  std::int64_t heads;  // heads in this chunk
  std::int64_t row0;   // first token row of the sequence
  std::int64_t head0;  // first head of the chunk
  bool causal;

  // The chunk's heads x seq score rows of seq keys at p, as a view of dtype t.
  MB_CUDA_HD Mat rows(const void* p, DType t) const {
    return Mat{const_cast<void*>(p), heads * seq, seq, seq, t};
  }
};

// Whether probs_work may take kVec keys at a time over these buffers (dp may be absent).
inline bool probs_vec(const ScoreChunk& ch, const float* s, const float* dp,
                      const __nv_bfloat16* out) {
  return vec_rows_ok(ch.rows(s, DType::f32)) &&
         (dp == nullptr || vec_rows_ok(ch.rows(dp, DType::f32))) &&
         vec_rows_ok(ch.rows(out, DType::bf16));
}

// Backward, over the chunk's scores: P recomputed from S and the log-sum-exp (stats); with dp
// given, dS = P * (dP - D) instead (D = rowsum(dO * O), heads_total per token row). Score rows on
// the grid's y (their query and head found once per row), keys along x; with `vec` (S, dP and the
// output pass vec_rows_ok) kVec keys at a time.
MB_CUDA_HD void probs_work(const GridPos& g, const ScoreChunk& ch, const float* s, const float* dp,
                           const float* d, std::int64_t heads_total, const Mat& stats,
                           __nv_bfloat16* out, bool vec) {
  const Mat sm = ch.rows(s, DType::f32), dpm = ch.rows(dp, DType::f32);
  const Mat om = ch.rows(out, DType::bf16);
  for (std::int64_t blk = g.y; blk < ch.heads * ch.seq; blk += g.ny) {
    const std::int64_t head_in_chunk = blk / ch.seq;  // once per row
    const std::int64_t i = blk - head_in_chunk * ch.seq;
    const std::int64_t head = ch.head0 + head_in_chunk;
    const std::int64_t visible = ch.causal ? i + 1 : ch.seq;
    const float lse = load(stats, ch.row0 + i, head);
    const float dd = dp != nullptr ? d[(ch.row0 + i) * heads_total + head] : 0.0f;
    const auto value = [&](std::int64_t j, float sv, float dpv) {
      if (j >= visible) return 0.0f;
      const float p = ::expf(sv - lse);
      return dp != nullptr ? p * (dpv - dd) : p;
    };
    for_each_cell(
        GridPos{g.x, g.nx, 0, 1}, 1, ch.seq, vec,
        [&](std::int64_t, std::int64_t c) {
          float sv[kVec], dpv[kVec] = {};
          load_vec(sm, blk, c, sv);
          if (dp != nullptr) load_vec(dpm, blk, c, dpv);
          for (int j = 0; j < kVec; ++j) sv[j] = value(c + j, sv[j], dpv[j]);
          store_vec(om, blk, c, sv);
        },
        [&](std::int64_t, std::int64_t c) {
          store(om, blk, c, value(c, load(sm, blk, c), dp != nullptr ? load(dpm, blk, c) : 0.0f));
        });
  }
}

}  // namespace moebench::cuda
