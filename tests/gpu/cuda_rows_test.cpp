// The router, row movement, element-wise and loss kernels on the cuda backend against the cpu
// backend (tolerances: cuda_compute_test.cpp).
#include "tests/gpu/gpu_fixture.hpp"

namespace moebench {
namespace {

using namespace gpu_test;

float min_gap(const Vec& scores, const Vec& bias, std::int64_t row, std::int64_t experts) {
  std::vector<float> c;
  for (std::int64_t e = 0; e < experts; ++e) c.push_back(scores[row * experts + e] + bias[e]);
  std::sort(c.begin(), c.end());
  float gap = std::numeric_limits<float>::infinity();
  for (std::size_t i = 1; i < c.size(); ++i) gap = std::min(gap, c[i] - c[i - 1]);
  return gap;
}

TEST_CASE("router forward and backward in every routing mode") {
  const std::int64_t tokens = 200;
  for (std::int32_t mode : {kRouteBalanced, kRouteZipf, kRouteRouter}) {
    for (std::int32_t experts : {64, 60}) {  // 60: top-6 does not divide it (balanced fallback)
      CAPTURE(mode);
      CAPTURE(experts);
      RouterParams p;
      p.experts = experts;
      p.top_k = 6;
      p.groups = 4;
      p.topk_groups = 2;
      p.scaling = 2.5f;
      p.mode = mode;
      p.zipf_exponent = 1.2f;
      p.seed = 99;
      Twin logits = twin_random(tokens, experts, 120, 4.0f, true);
      Twin bias = twin_random(1, experts, 121, 0.05f, true);
      Twin scores = twin_random(tokens, experts, 122, 1.0f, true);
      Twin weights = twin_random(tokens, p.top_k, 123, 1.0f, true);
      Twin idx = twin_index(IVec(static_cast<std::size_t>(tokens * p.top_k), 0));
      const Mat idx_c = idx.cv().reshaped(tokens, p.top_k),
                idx_d = idx.dv().reshaped(tokens, p.top_k);
      cpu().router_forward(p, logits.cv(), bias.cv(), 1000, scores.cv(), idx_c, weights.cv());
      dev().router_forward(p, logits.dv(), bias.dv(), 1000, scores.dv(), idx_d, weights.dv());
      check_twin(scores, 1e-5, "router scores");
      const IVec ic = read_i32(cpu(), idx_c), id = read_i32(dev(), idx_d);
      if (mode == kRouteRouter) {
        // Allowed to differ only on a token with a near-tie in its choice scores.
        const Vec sc = read(cpu(), scores.cv()), bc = read(cpu(), bias.cv());
        int differing = 0;
        for (std::int64_t r = 0; r < tokens; ++r) {
          if (!std::equal(ic.begin() + r * p.top_k, ic.begin() + (r + 1) * p.top_k,
                          id.begin() + r * p.top_k)) {
            ++differing;
            CHECK(min_gap(sc, bc, r, experts) < 1e-5f);
          }
        }
        CHECK(differing <= 2);
        if (differing > 0) continue;  // the weights and gradients follow other experts there
      } else {
        CHECK(ic == id);  // functions of the token index only
      }
      check_twin(weights, 1e-5, "router weights");
      Twin dweights = twin_random(tokens, p.top_k, 124, 1.0f, true);
      Twin dlogits = twin_random(tokens, experts, 125, 1.0f, true);
      cpu().router_backward(p, scores.cv(), idx_c, dweights.cv(), dlogits.cv());
      dev().router_backward(p, scores.dv(), idx_d, dweights.dv(), dlogits.dv());
      check_twin(dlogits, 1e-5, "router dlogits");
    }
  }
  // No bias (an empty view) is the same as a zero bias.
  RouterParams p;
  p.experts = 16;
  p.top_k = 4;
  p.groups = 4;
  p.topk_groups = 2;
  p.mode = kRouteRouter;
  Twin logits = twin_random(32, 16, 130, 4.0f, true);
  Twin scores = twin_random(32, 16, 131, 1.0f, true);
  Twin weights = twin_random(32, 4, 132, 1.0f, true);
  Twin idx = twin_index(IVec(32 * 4, 0));
  cpu().router_forward(p, logits.cv(), Mat{}, 0, scores.cv(), idx.cv().reshaped(32, 4),
                       weights.cv());
  dev().router_forward(p, logits.dv(), Mat{}, 0, scores.dv(), idx.dv().reshaped(32, 4),
                       weights.dv());
  CHECK(read_i32(cpu(), idx.cv()) == read_i32(dev(), idx.dv()));
  check_twin(weights, 1e-5, "router weights without bias");
}

TEST_CASE("row movement: gather, scaled gather, scatter-add with repeats, gathered dot") {
  const std::int64_t src_rows = 30, cols = 70, n = 90;
  IVec index(n);
  for (std::int64_t i = 0; i < n; ++i) index[i] = static_cast<std::int32_t>((i * 7 + 3) % src_rows);
  Twin idx = twin_index(index);
  Twin src = twin_random(src_rows, cols, 140);
  Twin scale = twin_random(n, 1, 141, 1.0f, true);
  Twin dst = twin_random(n, cols, 142);
  cpu().gather_rows(src.cv(), idx.cv(), dst.cv());
  dev().gather_rows(src.dv(), idx.dv(), dst.dv());
  check_twin(dst, 0.0, "gather_rows");  // a copy
  cpu().gather_rows_scaled(src.cv(), idx.cv(), scale.cv(), dst.cv());
  dev().gather_rows_scaled(src.dv(), idx.dv(), scale.dv(), dst.dv());
  check_twin(dst, kOne, "gather_rows_scaled");
  // Destination rows 0..29 receive three source rows each, rows 30 and 31 none; all keep what
  // was there.
  Twin acc = twin_random(src_rows + 2, cols, 143);
  cpu().scatter_add_rows(dst.cv(), idx.cv(), scale.cv(), acc.cv());
  dev().scatter_add_rows(dst.dv(), idx.dv(), scale.dv(), acc.dv());
  check_twin(acc, kOne, "scatter_add_rows scaled");
  cpu().scatter_add_rows(dst.cv(), idx.cv(), Mat{}, acc.cv());
  dev().scatter_add_rows(dst.dv(), idx.dv(), Mat{}, acc.dv());
  check_twin(acc, kOne, "scatter_add_rows");
  // FP32 n x 1 columns, as the combine weights' gradient uses them.
  Twin col = twin_random(n, 1, 144, 1.0f, true);
  Twin col_acc = twin_random(src_rows, 1, 145, 1.0f, true);
  cpu().scatter_add_rows(col.cv(), idx.cv(), Mat{}, col_acc.cv());
  dev().scatter_add_rows(col.dv(), idx.dv(), Mat{}, col_acc.dv());
  check_twin(col_acc, 1e-5, "scatter_add_rows f32 column");
  Twin dot = twin_random(n, 1, 146, 1.0f, true);
  cpu().gathered_row_dot(src.cv(), idx.cv(), dst.cv(), dot.cv());
  dev().gathered_row_dot(src.dv(), idx.dv(), dst.dv(), dot.dv());
  check_twin(dot, kOne, "gathered_row_dot");
}

// The kernels' 16-byte paths and their element paths against the cpu backend, on views that
// select each: 16-byte aligned rows of 64 (whole chunks) and 67 (a tail of 3 past the last
// chunk) columns in rows of 80, and the same one element off alignment (element path only).
// tests/cuda_host checks the split over threads itself on the CPU; this checks the device runs it.
TEST_CASE("element-wise and row kernels on their 16-byte and element paths") {
  for (const std::int64_t cols : {64, 67}) {
    for (const std::int64_t offset : {0, 1}) {
      CAPTURE(cols);
      CAPTURE(offset);
      constexpr std::int64_t rows = 21, ld = 80;
      auto view = [&](const Twin& t, bool on_dev) {
        return (on_dev ? t.dv() : t.cv()).col_slice(offset, cols);
      };
      Twin x = twin_random(rows, ld, 300), y = twin_random(rows, ld, 301);
      Twin y32 = twin_random(rows, ld, 302, 1.0f, true);
      cpu().axpby(0.5f, view(x, false), -1.5f, view(y, false));
      dev().axpby(0.5f, view(x, true), -1.5f, view(y, true));
      check_twin(y, kOne, "axpby");
      cpu().copy(view(y, false), view(y32, false));
      dev().copy(view(y, true), view(y32, true));
      check_twin(y32, kOne, "copy bf16 -> f32");
      Twin w = twin_random(1, ld, 303), rstd = twin_random(rows, 1, 304, 1.0f, true);
      cpu().rmsnorm_forward(view(x, false), view(w, false), 1e-6f, view(y, false), rstd.cv());
      dev().rmsnorm_forward(view(x, true), view(w, true), 1e-6f, view(y, true), rstd.dv());
      check_twin(y, kOne, "rmsnorm y");
      check_twin(rstd, 1e-5, "rmsnorm rstd");
      Twin dx = twin_random(rows, ld, 305), dw = twin_random(1, ld, 306);
      cpu().rmsnorm_backward(view(y, false), view(x, false), view(w, false), rstd.cv(),
                             view(dx, false), view(dw, false));
      dev().rmsnorm_backward(view(y, true), view(x, true), view(w, true), rstd.dv(), view(dx, true),
                             view(dw, true));
      check_twin(dx, kOne, "rmsnorm dx");
      check_twin(dw, kOne, "rmsnorm dweight");
      // SwiGLU's [gate | up] rows: f = cols, the up half at column offset + cols.
      Twin gu = twin_random(rows, 2 * cols + 16, 307, 3.0f),
           dgu = twin_random(rows, 2 * cols + 16, 308);
      auto gate_up = [&](const Twin& t, bool on_dev) {
        return (on_dev ? t.dv() : t.cv()).col_slice(offset, 2 * cols);
      };
      cpu().swiglu_forward(gate_up(gu, false), view(y, false));
      dev().swiglu_forward(gate_up(gu, true), view(y, true));
      check_twin(y, kOne, "swiglu out");
      cpu().swiglu_backward(gate_up(gu, false), view(x, false), gate_up(dgu, false));
      dev().swiglu_backward(gate_up(gu, true), view(x, true), gate_up(dgu, true));
      check_twin(dgu, kOne, "swiglu dgate_up");
      IVec index(rows);
      for (std::int64_t i = 0; i < rows; ++i)
        index[i] = static_cast<std::int32_t>((i * 5 + 2) % rows);
      Twin idx = twin_index(index), scale = twin_random(rows, 1, 309, 1.0f, true);
      cpu().gather_rows(view(x, false), idx.cv(), view(y, false));
      dev().gather_rows(view(x, true), idx.dv(), view(y, true));
      check_twin(y, 0.0, "gather_rows");
      cpu().gather_rows_scaled(view(x, false), idx.cv(), scale.cv(), view(y, false));
      dev().gather_rows_scaled(view(x, true), idx.dv(), scale.dv(), view(y, true));
      check_twin(y, kOne, "gather_rows_scaled");
      // The row reductions (row_work.cuh): scatter-add, gathered dot, cross-entropy in place.
      cpu().scatter_add_rows(view(x, false), idx.cv(), scale.cv(), view(y, false));
      dev().scatter_add_rows(view(x, true), idx.dv(), scale.dv(), view(y, true));
      check_twin(y, kOne, "scatter_add_rows");
      Twin dot = twin_random(rows, 1, 311, 1.0f, true);
      cpu().gathered_row_dot(view(x, false), idx.cv(), view(y, false), dot.cv());
      dev().gathered_row_dot(view(x, true), idx.dv(), view(y, true), dot.dv());
      check_twin(dot, kOne, "gathered_row_dot");
      IVec labels(rows);
      for (std::int64_t i = 0; i < rows; ++i)
        labels[i] = static_cast<std::int32_t>((i * 13) % cols);
      Twin lab = twin_index(labels), loss = twin_random(rows, 1, 312, 1.0f, true);
      cpu().cross_entropy(view(x, false), lab.cv(), 0.5f, loss.cv());
      dev().cross_entropy(view(x, true), lab.dv(), 0.5f, loss.dv());
      check_twin(loss, 1e-5, "cross_entropy loss");
      check_twin(x, kOne, "cross_entropy dlogits");
    }
  }
  // A dense tensor whose element count leaves a tail past the last chunk: fill, fill_random.
  Twin flat = twin_random(1003, 1, 310);
  cpu().fill_random(flat.cv(), 9, 4, 0.5f);
  dev().fill_random(flat.dv(), 9, 4, 0.5f);
  check_twin(flat, kOne, "fill_random, 1003 elements");
  cpu().fill(flat.cv(), 0.75f);
  dev().fill(flat.dv(), 0.75f);
  check_twin(flat, 0.0, "fill, 1003 elements");
}

TEST_CASE("a bad row index is reported at the next synchronisation") {
  if (cuda_api() == nullptr) return;  // the cpu backend checks on the host instead
  Twin src = twin_random(4, 8, 150);
  Twin dst = twin_random(2, 8, 151);
  Twin idx = twin_index({1, 4});
  dev().gather_rows(src.dv(), idx.dv(), dst.dv());
  CHECK_THROWS_AS(dev().synchronize(), RuntimeError);
  dev().synchronize();  // reported once
  Twin bad = twin_index({0, -1, 3, 9});
  Twin rows = twin_random(4, 8, 152);
  dev().scatter_add_rows(rows.dv(), bad.dv(), Mat{}, src.dv());
  CHECK_THROWS_AS(dev().synchronize(), RuntimeError);
}

TEST_CASE("cross_entropy: the loss and its gradient in place, a vocabulary wider than a block") {
  // 300 rows of 1000 logits (four passes of a 256-thread block per row), labels spread over the
  // vocabulary including its first and last entries; a strided loss column.
  const std::int64_t rows = 300, vocab = 1000;
  Twin z = twin_random(rows, vocab, 160, 4.0f);
  IVec labels(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) labels[r] = static_cast<std::int32_t>((r * 337) % vocab);
  labels[0] = 0;
  labels[1] = static_cast<std::int32_t>(vocab - 1);
  Twin lab = twin_index(labels);
  Twin loss{cpu().alloc(rows, 2, DType::f32), dev().alloc(rows, 2, DType::f32)};
  cpu().zero(loss.cv());
  dev().zero(loss.dv());
  cpu().cross_entropy(z.cv(), lab.cv(), 0.25f, loss.cv().col_slice(1, 1));
  dev().cross_entropy(z.dv(), lab.dv(), 0.25f, loss.dv().col_slice(1, 1));
  // The loss is FP32 from the same BF16 logits: only summation order and expf differ.
  check_twin(loss, 1e-5, "cross_entropy loss");
  // The gradient is rounded to BF16 once.
  check_twin(z, kOne, "cross_entropy dlogits");
  if (cuda_api() == nullptr) return;
  Twin bad = twin_index(IVec(static_cast<std::size_t>(rows), static_cast<std::int32_t>(vocab)));
  dev().cross_entropy(z.dv(), bad.dv(), 1.0f, loss.dv().col_slice(0, 1));
  CHECK_THROWS_AS(dev().synchronize(), RuntimeError);
}

}  // namespace
}  // namespace moebench
