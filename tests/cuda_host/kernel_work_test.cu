// The cuda backend's per-thread kernel work (harness/backends/cuda/kernel_work.cuh) run on the
// CPU: each function is called for every thread of an emulated grid, exactly as the kernels call
// it on the device, over host memory, and the result is compared with a plain loop over the
// elements calling the same arithmetic. This checks, without a GPU, what a GPU test cannot
// isolate: that the split over threads visits every element of the view once and nothing
// outside it (canaries around every view), the 16-byte paths (BF16 pairs unpacked in order,
// FP32 quads, tails past the last whole chunk), strided and misaligned views falling back to
// single elements, and the grids' striding when the grid is smaller than the work.
//
// Exact comparison: the emulated kernel and the loop run the same FP32 operations in the same
// order per element on the same host, so the rounded results are bit-identical; any difference is
// a wrong, lost, repeated or misplaced element.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/kernel_work.cuh"
#include "harness/backends/cuda/row_work.cuh"
#include "harness/math/elementwise.hpp"
#include "harness/math/random.hpp"
#include "tests/cuda_host/emulated_grid.hpp"
#include "tests/cuda_host/host_mat.hpp"

namespace moebench::cuda {
namespace {

// The grids each case runs on: as the backend sizes them for a large device, and one far smaller
// than the work (every thread strides over several rows and columns).
std::vector<dim3> grids(std::int64_t rows, std::int64_t x_items) {
  return {cell_grid_for(rows, x_items, 64, 132 * 32), dim3(2, 3)};
}

// Dense and 16-byte aligned (the vector path, with and without a tail), strided with an aligned
// pitch, strided with an odd pitch, and one element off alignment.
const ViewShape kShapes[] = {
    {1, 1003, 1003, 0, "one row of 1003 (125 chunks and a tail of 3)"},
    {37, 64, 64, 0, "37 x 64 dense"},
    {9, 61, 72, 0, "9 x 61 in rows of 72 (aligned pitch, tail of 5)"},
    {7, 40, 43, 0, "7 x 40 in rows of 43 (odd pitch)"},
    {5, 48, 48, 1, "5 x 48, one element off alignment"},
};

// The backend's choice for element-wise ops: dense views as one row, vec where every view allows.
Mat shaped(const Mat& m, bool flat) {
  return flat ? as_one_row(m) : m;
}

TEST_CASE("vec_rows_ok: 16-byte aligned bases and pitches only") {
  HostMat a(4, 16, 16, 0, DType::bf16), b(4, 16, 20, 0, DType::bf16), c(4, 16, 16, 1, DType::f32);
  HostMat d(4, 16, 20, 0, DType::f32), e(1, 5, 5, 0, DType::bf16);
  CHECK(vec_rows_ok(a.view()));   // pitch 32 bytes
  CHECK(!vec_rows_ok(b.view()));  // pitch 40 bytes
  CHECK(!vec_rows_ok(c.view()));  // base 4 bytes off
  CHECK(vec_rows_ok(d.view()));   // pitch 80 bytes
  CHECK(vec_rows_ok(e.view()));   // one row: only the base matters
  CHECK(!vec_rows_ok(Mat{a.view().data, 4, 16, 16, DType::i32}));
}

TEST_CASE("load_vec and store_vec: eight elements in order, rounded to the dtype") {
  for (DType t : {DType::bf16, DType::f32}) {
    HostMat m(2, 16, 16, 0, t);
    m.randomise(1);
    const Mat v = m.view();
    const float neighbour = load(v, 0, 8);
    float got[kVec];
    load_vec(v, 1, 8, got);
    for (int j = 0; j < kVec; ++j) CHECK(got[j] == load(v, 1, 8 + j));
    const float put[kVec] = {1.0f, -2.5f, 3.140625f, 1.0e-3f, 7.0f, -0.0f, 65504.0f, 1.00390625f};
    store_vec(v, 0, 0, put);
    for (int j = 0; j < kVec; ++j) {
      HostMat one(1, 1, 1, 0, t);
      store(one.view(), 0, 0, put[j]);  // the scalar path's rounding
      CHECK(load(v, 0, j) == load(one.view(), 0, 0));
    }
    CHECK(load(v, 0, 8) == neighbour);  // the next chunk untouched
  }
}

TEST_CASE("cell_grid_for: rows on y up to 65,535, columns on x, within the block budget") {
  const dim3 a = cell_grid_for(10, 1000, 256, 4224);
  CHECK(a.y == 10);
  CHECK(a.x == 4);
  const dim3 b = cell_grid_for(100000, 7168, 256, 4224);
  CHECK(b.y == 65535);
  CHECK(b.x == 1);
  const dim3 c = cell_grid_for(1, std::int64_t{1} << 40, 256, 4224);
  CHECK(c.y == 1);
  CHECK(c.x == 4224);
  const dim3 d = cell_grid_for(0, 0, 256, 4224);
  CHECK(d.x == 1);
  CHECK(d.y == 1);
}

// Runs an element-wise op on every shape, dtype mix, grid and path (vec where allowed, and the
// element path always), against `ref` applied to a copy element by element.
using Views = std::vector<Mat>;
void check_elementwise(const char* op, std::vector<DType> dtypes,
                       const std::function<void(const GridPos&, const Views&, bool)>& work,
                       const std::function<void(const Views&, std::int64_t, std::int64_t)>& ref,
                       std::size_t outputs_from,
                       const std::function<void(std::vector<HostMat>&)>& prepare = nullptr) {
  for (const ViewShape& s : kShapes) {
    std::vector<HostMat> in;
    for (std::size_t i = 0; i < dtypes.size(); ++i) {
      in.emplace_back(s.rows, s.cols, s.ld, s.offset, dtypes[i]);
      in.back().randomise(10 + i);
    }
    if (prepare) prepare(in);
    const bool flat = s.ld == s.cols || s.rows <= 1;
    for (bool vec : {false, true}) {
      Views base;
      for (const HostMat& m : in) base.push_back(shaped(m.view(), flat));
      bool vec_ok = true;
      for (const Mat& m : base) vec_ok = vec_ok && vec_rows_ok(m);
      if (vec && !vec_ok) continue;
      const Mat& first = base[0];
      for (const dim3 g : grids(first.rows, cell_columns(first.cols, vec))) {
        CAPTURE(op);
        CAPTURE(s.what);
        CAPTURE(vec);
        CAPTURE(g.x);
        CAPTURE(g.y);
        std::vector<HostMat> got, want;
        Views got_v, want_v;
        for (const HostMat& m : in) {
          got.push_back(m.clone());
          want.push_back(m.clone());
        }
        for (std::size_t i = 0; i < in.size(); ++i) {
          got_v.push_back(shaped(got[i].view(), flat));
          want_v.push_back(want[i].view());
        }
        run_grid(g, 64, [&](const GridPos& p) { work(p, got_v, vec); });
        for (std::int64_t r = 0; r < s.rows; ++r)
          for (std::int64_t c = 0; c < s.cols; ++c) ref(want_v, r, c);
        for (std::size_t i = outputs_from; i < in.size(); ++i)
          check_same(got[i], want[i], std::string(op) + " output " + std::to_string(i));
      }
    }
  }
}

TEST_CASE("element-wise work: convert, fill, axpby, scale over every shape, path and grid") {
  check_elementwise(
      "convert bf16 -> f32", {DType::bf16, DType::f32},
      [](const GridPos& g, const Views& v, bool vec) { convert_work(g, v[0], v[1], vec); },
      [](const Views& v, std::int64_t r, std::int64_t c) { store(v[1], r, c, load(v[0], r, c)); },
      1);
  check_elementwise(
      "convert f32 -> bf16", {DType::f32, DType::bf16},
      [](const GridPos& g, const Views& v, bool vec) { convert_work(g, v[0], v[1], vec); },
      [](const Views& v, std::int64_t r, std::int64_t c) { store(v[1], r, c, load(v[0], r, c)); },
      1);
  check_elementwise(
      "fill", {DType::bf16},
      [](const GridPos& g, const Views& v, bool vec) { fill_work(g, v[0], 0.3f, vec); },
      [](const Views& v, std::int64_t r, std::int64_t c) { store(v[0], r, c, 0.3f); }, 0);
  for (float beta : {0.0f, -1.5f}) {
    check_elementwise(
        beta == 0.0f ? "axpby beta 0" : "axpby", {DType::f32, DType::bf16},
        [beta](const GridPos& g, const Views& v, bool vec) {
          axpby_work(g, 0.5f, v[0], beta, v[1], vec);
        },
        [beta](const Views& v, std::int64_t r, std::int64_t c) {
          store(v[1], r, c,
                axpby_value(0.5f, load(v[0], r, c), beta, beta == 0.0f ? 0.0f : load(v[1], r, c)));
        },
        1);
    check_elementwise(
        beta == 0.0f ? "scale by 0" : "scale", {DType::bf16},
        [beta](const GridPos& g, const Views& v, bool vec) { scale_work(g, v[0], beta, vec); },
        [beta](const Views& v, std::int64_t r, std::int64_t c) {
          store(v[0], r, c, beta == 0.0f ? 0.0f : beta * load(v[0], r, c));
        },
        0);
  }
}

TEST_CASE("fill_random work: element (r, c) gets u(seed, stream, r * cols + c) whatever the path") {
  check_elementwise(
      "fill_random", {DType::bf16},
      [](const GridPos& g, const Views& v, bool vec) {
        fill_random_work(g, v[0], 7, 3, 0.5f, vec);
      },
      [](const Views& v, std::int64_t r, std::int64_t c) {
        store(v[0], r, c, 0.5f * uniform_pm1(7, 3, static_cast<std::uint64_t>(r * v[0].cols + c)));
      },
      0);
}

TEST_CASE("adamw work: parameters, moments and the FP32 master, with and without it") {
  AdamWStep step;
  step.step = 3;
  step.lr = 1e-2f;
  step.weight_decay = 0.1f;
  step.grad_scale = 0.5f;
  const AdamWCoeffs k = adamw_coeffs(step);
  // The second moment is non-negative, as AdamW keeps it (else its square root is NaN).
  auto non_negative_v = [](std::vector<HostMat>& in) {
    const Mat v = in[3].view();
    for (std::int64_t r = 0; r < v.rows; ++r)
      for (std::int64_t c = 0; c < v.cols; ++c) store(v, r, c, std::abs(load(v, r, c)));
  };
  for (bool master : {false, true}) {
    std::vector<DType> dtypes = {DType::bf16, DType::f32, DType::f32, DType::f32};
    if (master) dtypes.push_back(DType::f32);
    check_elementwise(
        master ? "adamw with master" : "adamw", dtypes,
        [k, master](const GridPos& g, const Views& v, bool vec) {
          adamw_work(g, k, v[0], v[1], v[2], v[3], master ? v[4] : Mat{}, vec);
        },
        [k, master](const Views& v, std::int64_t r, std::int64_t c) {
          const Mat& value = master ? v[4] : v[0];
          float p = load(value, r, c), mv = load(v[2], r, c), vv = load(v[3], r, c);
          adamw_update(k, &p, load(v[1], r, c), &mv, &vv);
          if (master) store(v[4], r, c, p);
          store(v[0], r, c, p);
          store(v[2], r, c, mv);
          store(v[3], r, c, vv);
        },
        0, non_negative_v);
  }
}

TEST_CASE(
    "rmsnorm weight-gradient work: chunks of rows summed in order, then the chunks, into dw") {
  // 150 rows: two whole chunks of 64 and a partial one; 70 columns in rows of 72.
  const std::int64_t rows = 150, cols = 70;
  const std::int64_t chunks = (rows + kRmsnormRowsPerChunk - 1) / kRmsnormRowsPerChunk;
  HostMat dy(rows, cols, 72, 0, DType::bf16), x(rows, cols, 72, 0, DType::bf16);
  HostMat rstd(rows, 1, 1, 0, DType::f32), dw(1, cols, cols, 0, DType::f32);
  dy.randomise(80);
  x.randomise(81);
  rstd.randomise(82);
  dw.randomise(83);
  // The definition, in the same FP32 order: per chunk its rows in order, then the chunks in order.
  HostMat want = dw.clone();
  for (std::int64_t c = 0; c < cols; ++c) {
    float total = 0.0f;
    for (std::int64_t ch = 0; ch < chunks; ++ch) {
      float acc = 0.0f;
      for (std::int64_t r = ch * kRmsnormRowsPerChunk;
           r < std::min(rows, (ch + 1) * kRmsnormRowsPerChunk); ++r)
        acc += load(dy.view(), r, c) * load(x.view(), r, c) * load(rstd.view(), r, 0);
      total += acc;
    }
    store(want.view(), 0, c, load(want.view(), 0, c) + total);
  }
  for (const dim3 g : {cell_grid_for(chunks, cols, 64, 4224), dim3(1, 2)}) {
    CAPTURE(g.x);
    CAPTURE(g.y);
    std::vector<float> partial(static_cast<std::size_t>(chunks * cols), NAN);
    HostMat got = dw.clone();
    run_grid(g, 64, [&](const GridPos& p) {
      rmsnorm_dw_partial_work(p, dy.view(), x.view(), rstd.view(), partial.data());
    });
    run_grid(dim3(1, 1), 32, [&](const GridPos& p) {
      rmsnorm_dw_finish_work(p, partial.data(), chunks, got.view());
    });
    check_same(got, want, "rmsnorm dw");
  }
}

TEST_CASE("swiglu work: gate and up halves of one row, forward and backward") {
  // f = 48 (vector path: the up half starts on a chunk) and f = 50 (element path only).
  for (std::int64_t f : {48, 50}) {
    for (const dim3 g : {dim3(1, 1), dim3(3, 2), cell_grid_for(13, f, 64, 4224)}) {
      CAPTURE(f);
      CAPTURE(g.x);
      CAPTURE(g.y);
      HostMat gu(13, 2 * f, 2 * f, 0, DType::bf16), dout(13, f, f, 0, DType::bf16);
      gu.randomise(20);
      dout.randomise(21);
      for (bool vec : {false, true}) {
        if (vec && (f % kVec != 0 || !vec_rows_ok(gu.view()))) continue;
        CAPTURE(vec);
        HostMat out(13, f, f, 0, DType::bf16), out_ref(13, f, f, 0, DType::bf16);
        run_grid(g, 32,
                 [&](const GridPos& p) { swiglu_forward_work(p, gu.view(), out.view(), vec); });
        for (std::int64_t r = 0; r < 13; ++r)
          for (std::int64_t c = 0; c < f; ++c)
            store(out_ref.view(), r, c,
                  swiglu_forward(load(gu.view(), r, c), load(gu.view(), r, f + c)));
        check_same(out, out_ref, "swiglu forward");
        HostMat dgu(13, 2 * f, 2 * f, 0, DType::bf16), dgu_ref(13, 2 * f, 2 * f, 0, DType::bf16);
        run_grid(g, 32, [&](const GridPos& p) {
          swiglu_backward_work(p, gu.view(), dout.view(), dgu.view(), vec);
        });
        for (std::int64_t r = 0; r < 13; ++r) {
          for (std::int64_t c = 0; c < f; ++c) {
            float dg, du;
            swiglu_backward(load(gu.view(), r, c), load(gu.view(), r, f + c),
                            load(dout.view(), r, c), &dg, &du);
            store(dgu_ref.view(), r, c, dg);
            store(dgu_ref.view(), r, f + c, du);
          }
        }
        check_same(dgu, dgu_ref, "swiglu backward");
      }
    }
  }
}

TEST_CASE("rope work: every pair of every head rotated once, the rest of the row untouched") {
  const std::int64_t seq = 6, rows = 2 * seq, heads = 3, stride = 24, offset = 8, dim = 16;
  for (const dim3 g : {dim3(1, 1), dim3(1, 5), cell_grid_for(rows, heads * dim / 2, 64, 4224)}) {
    for (bool inverse : {false, true}) {
      CAPTURE(g.x);
      CAPTURE(g.y);
      CAPTURE(inverse);
      HostMat x(rows, heads * stride + 2, heads * stride + 5, 0, DType::bf16);
      x.randomise(30);
      HostMat want = x.clone();
      run_grid(g, 32, [&](const GridPos& p) {
        rope_work(p, x.view(), seq, heads, stride, offset, dim, 10000.0f, inverse);
      });
      const Mat w = want.view();
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t h = 0; h < heads; ++h) {
          float seg[16];
          for (std::int64_t i = 0; i < dim; ++i) seg[i] = load(w, r, h * stride + offset + i);
          rope_rotate(seg, dim, r % seq, 10000.0f, inverse);
          for (std::int64_t i = 0; i < dim; ++i) store(w, r, h * stride + offset + i, seg[i]);
        }
      }
      check_same(x, want, "rope");
    }
  }
}

TEST_CASE("gather work: rows by index, scaled or not, bad indices reported and skipped") {
  for (const ViewShape& s : kShapes) {
    HostMat src(11, s.cols, s.ld, s.offset, DType::bf16);
    src.randomise(40);
    const std::vector<std::int32_t> index = {3, 0, 10, 3, 99, -1, 7};
    const std::int64_t n = static_cast<std::int64_t>(index.size());
    std::vector<float> scale(index.size());
    for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = 0.25f * static_cast<float>(i) - 0.5f;
    const Mat idx{const_cast<std::int32_t*>(index.data()), n, 1, 1, DType::i32};
    const Mat sc{scale.data(), n, 1, 1, DType::f32};
    for (bool scaled : {false, true}) {
      for (bool vec : {false, true}) {
        HostMat dst(n, s.cols, s.ld, s.offset, DType::bf16);
        if (vec && !(vec_rows_ok(src.view()) && vec_rows_ok(dst.view()))) continue;
        for (const dim3 g : grids(n, cell_columns(s.cols, vec))) {
          CAPTURE(s.what);
          CAPTURE(scaled);
          CAPTURE(vec);
          CAPTURE(g.x);
          CAPTURE(g.y);
          HostMat got = dst.clone(), want = dst.clone();
          int error = 0;
          run_grid(g, 64, [&](const GridPos& p) {
            gather_work(p, src.view(), idx, sc, scaled, got.view(), &error, 9, vec);
          });
          for (std::int64_t i = 0; i < n; ++i) {
            const std::int32_t r = index[static_cast<std::size_t>(i)];
            if (r < 0 || r >= 11) continue;
            for (std::int64_t c = 0; c < s.cols; ++c) {
              const float v = load(src.view(), r, c);
              store(want.view(), i, c, scaled ? scale[static_cast<std::size_t>(i)] * v : v);
            }
          }
          check_same(got, want, "gather");
          CHECK(error == 9);
        }
      }
    }
  }
}

// The whole of rows.cu's scatter_add_rows on the host: keys and ranges by the kernels' work, the
// radix sort as a stable sort by key (what cub's stable radix sort gives), the rows by
// row_work.cuh's scatter_row. 23 source rows into 6: destinations with several sources, one with
// none, and indices past either end (reported, never applied).
TEST_CASE(
    "scatter_add_rows work: keys, stable sort, each destination's range, its sum added once") {
  const std::int64_t n = 23, dst_rows = 6;
  std::vector<std::int32_t> index(n);
  for (std::int64_t i = 0; i < n; ++i) index[i] = static_cast<std::int32_t>((i * 5 + 3) % 8);
  index[9] = -1;
  for (std::int32_t& d : index)
    if (d == 4) d = 2;  // destination 4 gets nothing
  const Mat idx{index.data(), n, 1, 1, DType::i32};
  for (const ViewShape& s : kShapes) {
    HostMat src(n, s.cols, s.ld, s.offset, DType::bf16),
        dst(dst_rows, s.cols, s.ld, s.offset, DType::bf16);
    src.randomise(90);
    dst.randomise(91);
    // The definition: per destination, its sources in ascending order summed in FP32, added once.
    HostMat want = dst.clone();
    for (std::int64_t d = 0; d < dst_rows; ++d) {
      if (d == 4) continue;
      for (std::int64_t c = 0; c < s.cols; ++c) {
        float acc = 0.0f;
        for (std::int64_t i = 0; i < n; ++i)
          if (index[static_cast<std::size_t>(i)] == d) acc += load(src.view(), i, c);
        store(want.view(), d, c, load(want.view(), d, c) + acc);
      }
    }
    const bool vec_ok = vec_rows_ok(src.view()) && vec_rows_ok(dst.view());
    for (bool vec : {false, true}) {
      if (vec && !vec_ok) continue;
      for (const dim3 g : {dim3(1, 1), dim3(3, 1)}) {
        CAPTURE(s.what);
        CAPTURE(vec);
        CAPTURE(g.x);
        std::vector<unsigned> keys(n, 0xdeadu);
        std::vector<int> order(n, -7), start(dst_rows, 0), end(dst_rows, 0);
        int error = 0;
        run_grid(g, 4, [&](const GridPos& p) {
          scatter_keys_work(p, idx, dst_rows, keys.data(), order.data(), &error, 2);
        });
        CHECK(error == 2);
        std::vector<std::pair<unsigned, int>> sorted(n);
        for (std::int64_t i = 0; i < n; ++i) sorted[i] = {keys[i], order[i]};
        std::stable_sort(sorted.begin(), sorted.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (std::int64_t i = 0; i < n; ++i) {
          keys[i] = sorted[i].first;
          order[i] = sorted[i].second;
        }
        run_grid(g, 4, [&](const GridPos& p) {
          segment_bounds_work(p, keys.data(), n, dst_rows, start.data(), end.data());
        });
        CHECK(start[4] == end[4]);
        HostMat got = dst.clone();
        HostTeam team{64};
        for (std::int64_t d = 0; d < dst_rows; ++d)
          scatter_row(team, src.view(), Mat{}, false, order.data(), start[d], end[d], got.view(), d,
                      vec);
        check_same(got, want, "scatter_add_rows");
      }
    }
  }
}

// MLA-like operands by head, heads 1..3 of 5: kv per head [k_nope 6 | v 4] in rows of 52 (a
// strided view), the rope key (3) shared by the heads.
TEST_CASE("gather and scatter heads work: MLA's key and value packed, the gradient back") {
  const std::int64_t rows = 7, heads = 5, dn = 6, dr = 3, dv = 4, h0 = 1, hn = 3, w = dn + dr;
  HostMat kv(rows, heads * (dn + dv), 52, 0, DType::bf16), kr(rows, dr, dr, 0, DType::bf16);
  kv.randomise(60);
  kr.randomise(61);
  const HeadCols k{kv.view(), dn + dv, dn}, rope{kr.view(), 0, dr};
  const HeadCols v{kv.view().col_slice(dn, heads * (dn + dv) - dn), dn + dv, dv};
  for (const dim3 g : grids(rows, hn * w)) {
    CAPTURE(g.x);
    CAPTURE(g.y);
    HostMat kp(rows, hn * w, hn * w, 0, DType::bf16), vp(rows, hn * dv, hn * dv, 0, DType::bf16);
    HostMat k_want = kp.clone(), v_want = vp.clone();
    run_grid(g, 64, [&](const GridPos& p) { gather_heads_work(p, k, rope, h0, kp.view()); });
    run_grid(g, 64, [&](const GridPos& p) { gather_heads_work(p, v, HeadCols{}, h0, vp.view()); });
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t hl = 0; hl < hn; ++hl) {
        const std::int64_t kv0 = (h0 + hl) * (dn + dv);
        for (std::int64_t j = 0; j < w; ++j) {
          store(k_want.view(), r, hl * w + j,
                j < dn ? load(kv.view(), r, kv0 + j) : load(kr.view(), r, j - dn));
        }
        for (std::int64_t j = 0; j < dv; ++j)
          store(v_want.view(), r, hl * dv + j, load(kv.view(), r, kv0 + dn + j));
      }
    }
    check_same(kp, k_want, "gather heads: key");
    check_same(vp, v_want, "gather heads: value");

    // Back: dk's k_nope columns and dv to their kv columns, the rope columns summed over the
    // chunk's heads (FP32, head order), added to the held sum where accumulating.
    for (bool accumulate : {false, true}) {
      CAPTURE(accumulate);
      HostMat dkv = kv.clone(), dkr = kr.clone();
      HostMat kv_want = kv.clone(), kr_want = kr.clone();
      const HeadCols dk{dkv.view(), dn + dv, dn}, drope{dkr.view(), 0, dr};
      const HeadCols dvh{dkv.view().col_slice(dn, heads * (dn + dv) - dn), dn + dv, dv};
      run_grid(g, 64, [&](const GridPos& p) {
        scatter_heads_work(p, kp.view(), h0, hn, dk, drope, accumulate);
      });
      run_grid(g, 64, [&](const GridPos& p) {
        scatter_heads_work(p, vp.view(), h0, hn, dvh, HeadCols{}, false);
      });
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t hl = 0; hl < hn; ++hl) {
          const std::int64_t kv0 = (h0 + hl) * (dn + dv);
          for (std::int64_t j = 0; j < dn; ++j)
            store(kv_want.view(), r, kv0 + j, load(kp.view(), r, hl * w + j));
          for (std::int64_t j = 0; j < dv; ++j)
            store(kv_want.view(), r, kv0 + dn + j, load(vp.view(), r, hl * dv + j));
        }
        for (std::int64_t j = 0; j < dr; ++j) {
          float sum = accumulate ? load(kr.view(), r, j) : 0.0f;
          for (std::int64_t hl = 0; hl < hn; ++hl) sum += load(kp.view(), r, hl * w + dn + j);
          store(kr_want.view(), r, j, sum);
        }
      }
      check_same(dkv, kv_want, "scatter heads: k_nope and v into kv");
      check_same(dkr, kr_want, "scatter heads: the shared rope key's sum");
    }
  }
}

// The statistics between the step's rows x heads (here heads 2..4 of 6, a column slice of rows
// of 6) and cuDNN's packed [batch, heads, seq, 1], both ways, against plain loops: every packed
// element written, the step's columns outside the slice untouched.
TEST_CASE("move stats work: rows x heads to cuDNN's packed [batch, heads, seq, 1] and back") {
  const std::int64_t batch = 3, seq = 11, heads = 6, h0 = 2, hn = 3, rows = batch * seq;
  HostMat step(rows, heads, heads, 0, DType::f32);
  step.randomise(70);
  const Mat slice = step.view().col_slice(h0, hn);
  for (const dim3 g : grids(batch * hn, seq)) {
    CAPTURE(g.x);
    CAPTURE(g.y);
    HostMat packed(batch * hn, seq, seq, 0, DType::f32);  // canaries where nothing was written
    run_grid(g, 4, [&](const GridPos& p) { move_stats_work(p, slice, seq, packed.view(), true); });
    HostMat want(batch * hn, seq, seq, 0, DType::f32);
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t h = 0; h < hn; ++h)
        for (std::int64_t t = 0; t < seq; ++t)
          store(want.view(), b * hn + h, t, load(step.view(), b * seq + t, h0 + h));
    check_same(packed, want, "stats to cuDNN's layout");

    // Back into a copy of the step's stats whose slice holds NaNs.
    HostMat back = step.clone();
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t h = 0; h < hn; ++h)
        store(back.view(), r, h0 + h, std::numeric_limits<float>::quiet_NaN());
    run_grid(g, 4, [&](const GridPos& p) {
      move_stats_work(p, back.view().col_slice(h0, hn), seq, packed.view(), false);
    });
    check_same(back, step, "stats from cuDNN's layout");
  }
}

TEST_CASE("probs work: causal probabilities and their gradient over a chunk of heads") {
  // seq 9: rows of 36 and 18 bytes, the element path only; seq 16: the 16-byte path, two chunks.
  for (const std::int64_t seq : {9, 16}) {
    const std::int64_t heads = 2, heads_total = 5, rows = 2 * seq;
    const ScoreChunk ch{seq, heads, seq, 3, true};  // the second sequence, heads 3 and 4
    HostMat s(heads * seq, seq, seq, 0, DType::f32), dp(heads * seq, seq, seq, 0, DType::f32);
    s.randomise(1);
    dp.randomise(2);
    std::vector<float> d(static_cast<std::size_t>(rows * heads_total));
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = uniform_pm1(1, 3, i);
    HostMat stats(rows, heads_total, heads_total, 0, DType::f32);
    stats.randomise(50);
    const float* sp = static_cast<const float*>(s.view().data);
    const float* dpp = static_cast<const float*>(dp.view().data);
    for (bool with_dp : {false, true}) {
      for (bool vec : {false, true}) {
        HostMat out(heads * seq, seq, seq, 0, DType::bf16);
        const bool vec_ok =
            probs_vec(ch, sp, dpp, static_cast<const __nv_bfloat16*>(out.view().data));
        CHECK(vec_ok == (seq % kVec == 0));
        if (vec && !vec_ok) continue;
        for (const dim3 g : {dim3(1, 1), dim3(2, 4),
                             cell_grid_for(heads * seq, cell_columns(seq, vec), 64, 4224)}) {
          CAPTURE(seq);
          CAPTURE(with_dp);
          CAPTURE(vec);
          CAPTURE(g.x);
          CAPTURE(g.y);
          HostMat got = out.clone(), want = out.clone();
          run_grid(g, 4, [&](const GridPos& p) {
            probs_work(p, ch, sp, with_dp ? dpp : nullptr, d.data(), heads_total, stats.view(),
                       static_cast<__nv_bfloat16*>(got.view().data), vec);
          });
          for (std::int64_t h = 0; h < heads; ++h) {
            for (std::int64_t i = 0; i < seq; ++i) {
              const std::int64_t blk = h * seq + i;
              const float lse = load(stats.view(), seq + i, 3 + h);
              const float dd = d[static_cast<std::size_t>((seq + i) * heads_total + 3 + h)];
              for (std::int64_t j = 0; j < seq; ++j) {
                float v = 0.0f;
                if (j <= i) {
                  v = ::expf(load(s.view(), blk, j) - lse);
                  if (with_dp) v *= load(dp.view(), blk, j) - dd;
                }
                store(want.view(), blk, j, v);
              }
            }
          }
          check_same(got, want, "probs");
        }
      }
    }
  }
}

}  // namespace
}  // namespace moebench::cuda
