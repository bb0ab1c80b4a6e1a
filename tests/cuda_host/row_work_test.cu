// The cuda backend's row reductions (harness/backends/cuda/row_work.cuh) run on the CPU: each row
// function is called with an emulated team (HostTeam: every member's part in turn, the parts
// added in member order), exactly as the kernels call it with a block or a warp, over host
// memory with canaries around every view, on the 16-byte path (with tails past the last whole
// chunk) and the element path, with teams smaller and larger than a row's chunks.
//
// How the results compare, and why:
// - Dot products, RMSNorm and the scatter take integer-valued data (HostMat::integers): every
//   product and sum is exact in FP32 whatever the order, so the team's result must equal the
//   cpu backend's row function (or a loop) bit for bit. Any lost, repeated or misplaced element
//   changes an integer and fails.
// - Cross-entropy and softmax sum exp(), which is not exact: rows of one constant make every
//   term exp(0) = 1, so their sums are exact too and the rows compare bit for bit (canaries
//   included); random rows then check that each element's own value is used, within a
//   tolerance stated where it is used.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/row_work.cuh"
#include "harness/math/elementwise.hpp"
#include "tests/cuda_host/emulated_grid.hpp"
#include "tests/cuda_host/host_mat.hpp"

namespace moebench::cuda {
namespace {

// A warp, a block as the backend launches it, a team wider than most rows' chunks, and one that
// leaves every member several chunks and a share of the tail.
const std::int64_t kTeams[] = {32, 256, 3};

struct RowShape {
  std::int64_t cols, ld, offset;
  const char* what;
};

// The 16-byte path with a tail, exactly whole chunks, a pitch that breaks the path, one element
// off alignment, and a row shorter than a chunk.
const RowShape kRows[] = {
    {1003, 1008, 0, "1003 columns in rows of 1008 (125 chunks and a tail of 3)"},
    {64, 64, 0, "64 columns, dense (8 chunks)"},
    {40, 43, 0, "40 columns in rows of 43 (odd pitch: elements only)"},
    {48, 48, 1, "48 columns, one element off alignment (elements only)"},
    {5, 8, 0, "5 columns (a tail only)"},
};

// Both paths where every view allows the 16-byte one, else the element path only.
std::vector<bool> paths(std::initializer_list<Mat> views) {
  bool ok = true;
  for (const Mat& m : views) ok = ok && vec_rows_ok(m);
  return ok ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

// A row of floats out of a view, and back (rounded to the view's dtype).
std::vector<float> row_of(const Mat& m, std::int64_t r) {
  std::vector<float> v(static_cast<std::size_t>(m.cols));
  for (std::int64_t c = 0; c < m.cols; ++c) v[static_cast<std::size_t>(c)] = load(m, r, c);
  return v;
}
void put_row(const Mat& m, std::int64_t r, const std::vector<float>& v) {
  for (std::int64_t c = 0; c < m.cols; ++c) store(m, r, c, v[static_cast<std::size_t>(c)]);
}

TEST_CASE("gathered dot rows: out[i] = dot(a[index[i]], b[i]), a bad index reported, out[i] left") {
  for (const RowShape& s : kRows) {
    HostMat a(11, s.cols, s.ld, s.offset, DType::bf16), b(6, s.cols, s.ld, s.offset, DType::bf16);
    a.integers(1, 6);
    b.integers(2, 6);
    const std::vector<std::int32_t> index = {3, 0, 10, 11, -1, 3};
    const Mat idx{const_cast<std::int32_t*>(index.data()), 6, 1, 1, DType::i32};
    for (bool vec : paths({a.view(), b.view()})) {
      for (std::int64_t size : kTeams) {
        CAPTURE(s.what);
        CAPTURE(vec);
        CAPTURE(size);
        HostMat got(6, 1, 1, 0, DType::f32);
        HostMat want = got.clone();
        int error = 0;
        HostTeam team{size};
        for (std::int64_t i = 0; i < 6; ++i)
          gathered_dot_row(team, a.view(), idx, b.view(), got.view(), i, &error, 4, vec);
        for (std::int64_t i = 0; i < 6; ++i) {
          const std::int32_t src = index[static_cast<std::size_t>(i)];
          if (src < 0 || src >= 11) continue;
          float dot = 0.0f;
          for (std::int64_t c = 0; c < s.cols; ++c)
            dot += load(a.view(), src, c) * load(b.view(), i, c);
          store(want.view(), i, 0, dot);
        }
        check_same(got, want, "gathered dot");
        CHECK(error == 4);
      }
    }
  }
}

TEST_CASE(
    "rowdot rows: one dot of v_dim columns per (token, head), heads at their column offsets") {
  // v_dim 16: heads start on whole chunks (the 16-byte path); v_dim 6: elements only.
  for (const std::int64_t v_dim : {16, 6}) {
    const std::int64_t rows = 5, heads = 3;
    HostMat dout(rows, heads * v_dim, heads * v_dim, 0, DType::bf16);
    HostMat out(rows, heads * v_dim, heads * v_dim, 0, DType::bf16);
    dout.integers(3, 5);
    out.integers(4, 5);
    const bool vec_ok = rowdot_vec(dout.view(), out.view(), v_dim);
    CHECK(vec_ok == (v_dim == 16));
    for (bool vec : vec_ok ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      for (std::int64_t size : kTeams) {
        CAPTURE(v_dim);
        CAPTURE(vec);
        CAPTURE(size);
        std::vector<float> got(static_cast<std::size_t>(rows * heads), kCanary);
        HostTeam team{size};
        for (std::int64_t w = 0; w < rows * heads; ++w)
          rowdot_row(team, dout.view(), out.view(), heads, v_dim, w, got.data(), vec);
        std::int64_t wrong = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t h = 0; h < heads; ++h) {
            float want = 0.0f;
            for (std::int64_t c = h * v_dim; c < (h + 1) * v_dim; ++c)
              want += load(dout.view(), r, c) * load(out.view(), r, c);
            if (got[static_cast<std::size_t>(r * heads + h)] != want) ++wrong;
          }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("rmsnorm rows: forward and input gradient equal the cpu backend's row functions") {
  const std::int64_t rows = 4;
  const float eps = 1e-6f;
  for (const RowShape& s : kRows) {
    for (DType t : {DType::bf16, DType::f32}) {
      HostMat x(rows, s.cols, s.ld, s.offset, t), dy(rows, s.cols, s.ld, s.offset, t);
      HostMat w(1, s.cols, s.cols, 0, t), y(rows, s.cols, s.ld, s.offset, t);
      HostMat rstd(rows, 1, 1, 0, DType::f32);
      x.integers(5, 4);
      dy.integers(6, 4);
      w.integers(7, 3);
      for (bool vec : paths({x.view(), w.view(), y.view()})) {
        for (std::int64_t size : kTeams) {
          CAPTURE(s.what);
          CAPTURE(dtype_name(t));
          CAPTURE(vec);
          CAPTURE(size);
          HostTeam team{size};
          HostMat got_y = y.clone(), got_rstd = rstd.clone();
          HostMat want_y = y.clone(), want_rstd = rstd.clone();
          for (std::int64_t r = 0; r < rows; ++r)
            rmsnorm_forward_row(team, x.view(), w.view(), eps, got_y.view(), got_rstd.view(), r,
                                vec);
          const std::vector<float> wv = row_of(w.view(), 0);
          for (std::int64_t r = 0; r < rows; ++r) {
            std::vector<float> out(wv.size());
            const float rs =
                rmsnorm_row_forward(row_of(x.view(), r).data(), wv.data(), s.cols, eps, out.data());
            put_row(want_y.view(), r, out);
            store(want_rstd.view(), r, 0, rs);
          }
          check_same(got_y, want_y, "rmsnorm y");
          check_same(got_rstd, want_rstd, "rmsnorm rstd");

          // The gradient in place of dy, as the backend may call it.
          HostMat got_dx = dy.clone(), want_dx = dy.clone();
          for (std::int64_t r = 0; r < rows; ++r)
            rmsnorm_dx_row(team, got_dx.view(), x.view(), w.view(), want_rstd.view(), got_dx.view(),
                           r, vec);
          for (std::int64_t r = 0; r < rows; ++r) {
            std::vector<float> dx(wv.size()), dw(wv.size(), 0.0f);
            rmsnorm_row_backward(row_of(dy.view(), r).data(), row_of(x.view(), r).data(), wv.data(),
                                 load(want_rstd.view(), r, 0), s.cols, dx.data(), dw.data());
            put_row(want_dx.view(), r, dx);
          }
          check_same(got_dx, want_dx, "rmsnorm dx in place");
        }
      }
    }
  }
}

// The cpu backend's cross_entropy_row over a copy of each row, into want (logits and loss).
void cross_entropy_reference(const HostMat& logits, const std::vector<std::int32_t>& labels,
                             float scale, HostMat& want, HostMat& want_loss) {
  const Mat in = logits.view();
  for (std::int64_t r = 0; r < in.rows; ++r) {
    const std::int32_t label = labels[static_cast<std::size_t>(r)];
    if (label < 0 || label >= in.cols) continue;
    std::vector<float> z = row_of(in, r);
    const float loss = cross_entropy_row(z.data(), in.cols, label, scale);
    put_row(want.view(), r, z);
    store(want_loss.view(), r, 0, loss);
  }
}

TEST_CASE("cross-entropy rows: loss and gradient in place, as the cpu backend's row function") {
  const float scale = 0.25f;
  for (const RowShape& s : kRows) {
    // Labels in the first chunk, in the tail, the last column, and two out of range.
    const std::vector<std::int32_t> labels = {1, static_cast<std::int32_t>(s.cols - 2),
                                              static_cast<std::int32_t>(s.cols - 1),
                                              static_cast<std::int32_t>(s.cols), -3};
    const std::int64_t rows = static_cast<std::int64_t>(labels.size());
    for (DType t : {DType::bf16, DType::f32}) {
      for (bool constant : {true, false}) {
        HostMat logits(rows, s.cols, s.ld, s.offset, t);
        if (constant) {
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < s.cols; ++c)
              store(logits.view(), r, c, 0.5f * static_cast<float>(r) - 1.0f);
        } else {
          logits.randomise(8);
        }
        for (bool vec : paths({logits.view()})) {
          for (std::int64_t size : kTeams) {
            CAPTURE(s.what);
            CAPTURE(dtype_name(t));
            CAPTURE(constant);
            CAPTURE(vec);
            CAPTURE(size);
            HostMat got = logits.clone(), want = logits.clone();
            HostMat got_loss(rows, 1, 1, 0, DType::f32);
            HostMat want_loss = got_loss.clone();
            const Mat label_view{const_cast<std::int32_t*>(labels.data()), rows, 1, 1, DType::i32};
            int error = 0;
            HostTeam team{size};
            for (std::int64_t r = 0; r < rows; ++r)
              cross_entropy_grad_row(team, got.view(), load_i32(label_view, r, 0), scale,
                                     got_loss.view(), r, &error, 5, vec);
            cross_entropy_reference(logits, labels, scale, want, want_loss);
            CHECK(error == 5);
            if (constant) {
              check_same(got, want, "cross-entropy gradient");
              check_same(got_loss, want_loss, "cross-entropy loss");
              continue;
            }
            // Random rows: only the FP32 order of the sum of exp differs. Its relative error is
            // at most (terms on the longest chain) x 2^-24 for each order: under 1e-4 with 1003
            // terms, and the loss (its log) moves by as much in absolute terms. The gradient
            // stored as BF16 may round to the neighbouring value on top of that: one BF16 ulp,
            // at most 2^-7 relative. A misread element is off by O(1) and fails.
            const double rel = t == DType::bf16 ? 1.0 / 128 : 1e-4;
            std::int64_t wrong = 0;
            for (std::int64_t i = 0; i < got.total(); ++i) {
              const double g = got.raw(i), w = want.raw(i);
              if (std::fabs(g - w) > rel * std::fabs(w) + 1e-7) ++wrong;
            }
            CHECK(wrong == 0);
            for (std::int64_t r = 0; r < rows; ++r)
              CHECK(load(got_loss.view(), r, 0) ==
                    doctest::Approx(load(want_loss.view(), r, 0)).epsilon(1e-4));
          }
        }
      }
    }
  }
}

TEST_CASE("softmax rows: probabilities over the visible keys, zeros past them, the log-sum-exp") {
  // seq 9: rows of 36 and 18 bytes (elements only); 16: whole chunks; 44: chunks and a tail.
  for (const std::int64_t seq : {9, 16, 44}) {
    for (bool causal : {true, false}) {
      for (bool constant : {true, false}) {
        const std::int64_t heads = 2, heads_total = 5, tokens = 2 * seq;
        const ScoreChunk ch{seq, heads, seq, 2, causal};  // the second sequence, heads 2 and 3
        HostMat s(heads * seq, seq, seq, 0, DType::f32);
        if (constant) {
          for (std::int64_t r = 0; r < heads * seq; ++r)
            for (std::int64_t c = 0; c < seq; ++c) store(s.view(), r, c, 0.125f * r - 2.0f);
        } else {
          s.randomise(9);
        }
        HostMat p(heads * seq, seq, seq, 0, DType::bf16);
        HostMat stats(tokens, heads_total, heads_total, 0, DType::f32);
        for (bool vec : paths({s.view(), p.view()})) {
          for (std::int64_t size : kTeams) {
            CAPTURE(seq);
            CAPTURE(causal);
            CAPTURE(constant);
            CAPTURE(vec);
            CAPTURE(size);
            HostMat got = p.clone(), want = p.clone();
            HostMat got_stats = stats.clone(), want_stats = stats.clone();
            HostTeam team{size};
            for (std::int64_t blk = 0; blk < heads * seq; ++blk)
              softmax_row(team, ch, s.view(), got.view(), got_stats.view(), blk, vec);
            // The plain loop over a row, in FP32.
            for (std::int64_t blk = 0; blk < heads * seq; ++blk) {
              const std::int64_t i = blk % seq, n = causal ? i + 1 : seq;
              float mx = -INFINITY, sum = 0.0f;
              for (std::int64_t j = 0; j < n; ++j) mx = std::fmax(mx, load(s.view(), blk, j));
              for (std::int64_t j = 0; j < n; ++j) sum += ::expf(load(s.view(), blk, j) - mx);
              const float lse = mx + ::logf(sum);
              for (std::int64_t j = 0; j < seq; ++j)
                store(want.view(), blk, j, j < n ? ::expf(load(s.view(), blk, j) - lse) : 0.0f);
              store(want_stats.view(), seq + i, 2 + blk / seq, lse);
            }
            if (constant) {
              check_same(got, want, "probabilities");
              check_same(got_stats, want_stats, "log-sum-exp");
              continue;
            }
            // Random rows: the sums' FP32 order moves the log-sum-exp by at most (terms on the
            // longest chain) x 2^-24, under 1e-4, and a probability by as much relative, before
            // its BF16 rounding, which may then land on the neighbouring value: one BF16 ulp, at
            // most 2^-7 relative. A masked key given a probability, or a key's probability from
            // another, is off by O(1).
            std::int64_t wrong = 0;
            for (std::int64_t e = 0; e < got.total(); ++e) {
              const double g = got.raw(e), w = want.raw(e);
              if (std::fabs(g - w) > std::fabs(w) / 128) ++wrong;
            }
            CHECK(wrong == 0);
            for (std::int64_t e = 0; e < got_stats.total(); ++e)
              CHECK(got_stats.raw(e) == doctest::Approx(want_stats.raw(e)).epsilon(1e-4));
          }
        }
      }
    }
  }
}

TEST_CASE("scatter rows: each destination adds its sources' sum, in position order, once") {
  for (const RowShape& s : kRows) {
    const std::int64_t sources = 9, dests = 4;
    HostMat src(sources, s.cols, s.ld, s.offset, DType::bf16);
    HostMat dst(dests, s.cols, s.ld, s.offset, DType::f32);
    src.randomise(10);
    dst.randomise(11);
    // Sources sorted by destination (what the radix sort gives): 0 <- {4, 1}, 2 <- {0, 8, 3},
    // 3 <- {2, 7, 5, 6}; destination 1 has none.
    const std::vector<int> order = {4, 1, 0, 8, 3, 2, 7, 5, 6};
    const std::vector<int> first = {0, 2, 2, 5}, last = {2, 2, 5, 9};
    std::vector<float> scale(static_cast<std::size_t>(sources));
    for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = 0.375f * static_cast<float>(i) - 1.0f;
    const Mat sc{scale.data(), sources, 1, 1, DType::f32};
    for (bool scaled : {false, true}) {
      for (bool vec : paths({src.view(), dst.view()})) {
        for (std::int64_t size : kTeams) {
          CAPTURE(s.what);
          CAPTURE(scaled);
          CAPTURE(vec);
          CAPTURE(size);
          HostMat got = dst.clone(), want = dst.clone();
          HostTeam team{size};
          for (std::int64_t d = 0; d < dests; ++d) {
            const auto u = static_cast<std::size_t>(d);
            scatter_row(team, src.view(), sc, scaled, order.data(), first[u], last[u], got.view(),
                        d, vec);
          }
          // Per column: the sources' sum in position order, then added once (the same FP32
          // operations in the same order, so bit for bit).
          for (std::int64_t d = 0; d < dests; ++d) {
            const auto u = static_cast<std::size_t>(d);
            if (first[u] == last[u]) continue;
            for (std::int64_t c = 0; c < s.cols; ++c) {
              float acc = 0.0f;
              for (int p = first[u]; p < last[u]; ++p) {
                const int i = order[static_cast<std::size_t>(p)];
                acc +=
                    (scaled ? scale[static_cast<std::size_t>(i)] : 1.0f) * load(src.view(), i, c);
              }
              store(want.view(), d, c, load(want.view(), d, c) + acc);
            }
          }
          check_same(got, want, "scatter");
        }
      }
    }
  }
}

}  // namespace
}  // namespace moebench::cuda
