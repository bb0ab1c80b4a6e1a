// The cuda backend against the cpu backend: every op runs on both with the same seeded inputs
// (uploaded from the same host values, already rounded to BF16 where the device stores BF16, so
// both start from identical numbers), and the results are compared with a stated tolerance.
//
// Tolerances are relative to the reference tensor's scale (max |ref|): the device stores
// activations, weights and gradients in BF16 (8 significant bits; one rounding is at most 2^-9,
// about 0.2%, of an element) and accumulates in FP32, so an op whose result is rounded to BF16
// once stays within kOne = 1e-2 of the scale (five half-ulps, room for FP32 summation order and
// the device's math functions being a few FP32 ulps from glibc's); ops that go through BF16
// intermediates (attention's probabilities and their gradient) within kChained = 3e-2. A wrong,
// lost or misplaced element is O(1) of the scale and fails either. FP32 results computed from
// identical FP32 inputs (router, AdamW moments) are held to 1e-5.
//
// MOEBENCH_GPU_TEST_BACKEND=cpu runs the same comparisons against a second cpu backend (checks
// the test itself on a machine without a GPU); the cuda-only cases are skipped then.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "harness/backends/cuda/cuda_compute.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/compute/compute.hpp"
#include "workloads/ops/random.hpp"
#include "workloads/ops/route.hpp"

namespace moebench {
namespace {

using Vec = std::vector<float>;
using IVec = std::vector<std::int32_t>;

constexpr double kOne = 1e-2;
constexpr double kChained = 3e-2;

// Round to nearest even BF16, as __float2bfloat16_rn does (finite inputs).
float round_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, sizeof(r));
  return r;
}

struct Backends {
  std::unique_ptr<Compute> cpu = make_compute(ComputeBackend::cpu, 0, 1);
  std::unique_ptr<Compute> dev =
      make_compute(parse_compute_backend(std::getenv("MOEBENCH_GPU_TEST_BACKEND")
                                             ? std::getenv("MOEBENCH_GPU_TEST_BACKEND")
                                             : "cuda"),
                   0, 1);
};

Backends& backends() {
  static Backends b;
  return b;
}
Compute& cpu() {
  return *backends().cpu;
}
Compute& dev() {
  return *backends().dev;
}
CudaComputeApi* cuda_api() {
  return dynamic_cast<CudaComputeApi*>(&dev());
}

// A tensor on both backends holding the same values: FP32 on the cpu; on the device, the
// activation dtype (BF16 on cuda) unless `f32`.
struct Twin {
  Tensor c;
  Tensor d;
  Mat cv() const { return c.view(); }
  Mat dv() const { return d.view(); }
};

bool device_bf16(bool f32) {
  return !f32 && dev().activation_dtype() == DType::bf16;
}

Vec random_host(std::size_t n, std::uint64_t stream, float scale, bool round) {
  Vec v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = scale * uniform_pm1(77, stream, i);
    if (round) v[i] = round_bf16(v[i]);
  }
  return v;
}

Twin twin(std::int64_t rows, std::int64_t cols, const Vec& host, bool f32 = false) {
  Twin t{cpu().alloc(rows, cols, DType::f32),
         dev().alloc(rows, cols, f32 ? DType::f32 : dev().activation_dtype())};
  cpu().upload(host.data(), t.c);
  dev().upload(host.data(), t.d);
  return t;
}

Twin twin_random(std::int64_t rows, std::int64_t cols, std::uint64_t stream, float scale = 1.0f,
                 bool f32 = false) {
  return twin(rows, cols,
              random_host(static_cast<std::size_t>(rows * cols), stream, scale, device_bf16(f32)),
              f32);
}

Twin twin_index(const IVec& idx) {
  const auto n = static_cast<std::int64_t>(idx.size());
  Twin t{cpu().alloc(n, 1, DType::i32), dev().alloc(n, 1, DType::i32)};
  cpu().upload_i32(idx.data(), t.c);
  dev().upload_i32(idx.data(), t.d);
  return t;
}

Vec read(Compute& c, Mat m) {
  Vec v(static_cast<std::size_t>(m.numel()));
  c.download(m, v.data());
  return v;
}

IVec read_i32(Compute& c, Mat m) {
  IVec v(static_cast<std::size_t>(m.numel()));
  c.download_i32(m, v.data());
  return v;
}

// Every element within tol * max|ref| (and a floor for an all-zero reference).
void check_close(const Vec& got, const Vec& ref, double tol, const std::string& what) {
  REQUIRE(got.size() == ref.size());
  double scale = 0.0;
  for (float r : ref) scale = std::max(scale, static_cast<double>(std::abs(r)));
  const double limit = tol * std::max(scale, 1e-6);
  std::size_t wrong = 0, worst = 0;
  double worst_err = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (!(err <= limit)) ++wrong;  // NaN counts as wrong
    if (!(err <= worst_err)) {
      worst_err = err;
      worst = i;
    }
  }
  INFO(what << ": " << wrong << " of " << ref.size() << " beyond " << limit << " (scale " << scale
            << "); worst element " << worst << ": got " << got[worst] << ", expected "
            << ref[worst]);
  CHECK(wrong == 0);
}

void check_twin(const Twin& t, double tol, const std::string& what) {
  check_close(read(dev(), t.dv()), read(cpu(), t.cv()), tol, what);
}

TEST_CASE("fill_random gives the cpu backend's values, rounded to the storage type") {
  for (bool f32 : {false, true}) {
    Twin t = twin(9, 13, Vec(9 * 13, 0.0f), f32);
    // A strided view too: element (r, c) depends on r * cols + c, not on ld.
    const Mat cv = t.cv().col_slice(2, 7), dv = t.dv().col_slice(2, 7);
    cpu().fill_random(t.c, 5, 17, 0.3f);
    dev().fill_random(t.d, 5, 17, 0.3f);
    cpu().fill_random(cv, 6, 3, 2.0f);
    dev().fill_random(dv, 6, 3, 2.0f);
    Vec ref = read(cpu(), t.cv());
    if (device_bf16(f32)) {
      for (float& x : ref) x = round_bf16(x);
    }
    CHECK(read(dev(), t.dv()) == ref);  // exact: the same integer hash, one rounding
  }
}

TEST_CASE("upload, download, copy, zero, fill and axpby on strided views and across dtypes") {
  Twin a = twin_random(7, 10, 1);
  CHECK(read(dev(), a.dv()) == read(cpu(), a.cv()));  // BF16-exact values survive the trip
  Twin b = twin_random(7, 10, 2, 1.0f, true);
  // copy between strided views, BF16 -> FP32 and back.
  cpu().copy(a.cv().col_slice(1, 4), b.cv().col_slice(5, 4));
  dev().copy(a.dv().col_slice(1, 4), b.dv().col_slice(5, 4));
  check_twin(b, 0.0, "copy bf16 -> f32");
  cpu().copy(b.cv().row_slice(2, 3), a.cv().row_slice(0, 3));
  dev().copy(b.dv().row_slice(2, 3), a.dv().row_slice(0, 3));
  check_twin(a, kOne, "copy f32 -> bf16");
  cpu().zero(a.cv().col_slice(3, 3));
  dev().zero(a.dv().col_slice(3, 3));
  cpu().fill(a.cv().row_slice(6, 1).col_slice(0, 2), -2.5f);
  dev().fill(a.dv().row_slice(6, 1).col_slice(0, 2), -2.5f);
  check_twin(a, kOne, "zero and fill");
  cpu().axpby(0.5f, b.cv(), -1.5f, a.cv());
  dev().axpby(0.5f, b.dv(), -1.5f, a.dv());
  check_twin(a, kOne, "axpby");
  // beta = 0 must not read y: a NaN there stays out of the result.
  Twin y = twin_random(7, 10, 3);
  cpu().fill(y.c, std::numeric_limits<float>::quiet_NaN());
  dev().fill(y.d, std::numeric_limits<float>::quiet_NaN());
  cpu().axpby(2.0f, a.cv(), 0.0f, y.cv());
  dev().axpby(2.0f, a.dv(), 0.0f, y.dv());
  check_twin(y, kOne, "axpby beta 0");
}

// Runs `set` on the device backend (an implementation or recipe it may not have); false, and
// the case says why it skips, where the backend refuses it with a usage error.
template <typename Set>
bool device_takes(Set&& set) {
  try {
    set();
    return true;
  } catch (const UsageError& e) {
    MESSAGE("skipped on this device: " << e.what());
    return false;
  }
}

// Uploads go through pinned staging slabs and tensors are freed on the stream: back-to-back
// uploads from one host buffer, rewritten between them, must each land, also into strided
// views; and a tensor dropped while a queued copy still reads it must keep its values for that
// copy even when a new tensor of the same size is allocated (and filled) at once.
TEST_CASE("uploads reuse the host buffer at once; a dropped tensor stays valid for queued work") {
  constexpr int kRounds = 40;
  std::vector<Tensor> dev_idx, dev_rows;
  IVec host(4096);
  Vec rows_host(64 * 24);
  for (int r = 0; r < kRounds; ++r) {
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::int32_t>(i) * 7 + r;
    dev_idx.push_back(dev().alloc(static_cast<std::int64_t>(host.size()), 1, DType::i32));
    dev().upload_i32(host.data(), dev_idx.back());
    for (std::size_t i = 0; i < rows_host.size(); ++i) {
      rows_host[i] = round_bf16(static_cast<float>(i % 97) * 0.25f - static_cast<float>(r));
    }
    dev_rows.push_back(dev().alloc(64, 32, DType::f32));
    dev().upload(rows_host.data(), dev_rows.back().view().col_slice(4, 24));
  }
  for (int r = 0; r < kRounds; ++r) {
    const IVec got = read_i32(dev(), dev_idx[static_cast<std::size_t>(r)]);
    bool same = true;
    for (std::size_t i = 0; i < got.size(); ++i)
      same = same && got[i] == static_cast<int>(i) * 7 + r;
    CHECK_MESSAGE(same, "index upload " << r);
    const Vec rows = read(dev(), dev_rows[static_cast<std::size_t>(r)].view().col_slice(4, 24));
    bool rows_same = true;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows_same = rows_same &&
                  rows[i] == round_bf16(static_cast<float>(i % 97) * 0.25f - static_cast<float>(r));
    }
    CHECK_MESSAGE(rows_same, "strided f32 upload " << r);
  }
  const std::int64_t n = std::int64_t{1} << 22;
  Tensor target = dev().alloc(n, 1, DType::f32);
  {
    Tensor source = dev().alloc(n, 1, DType::f32);
    dev().fill(source, 3.0f);
    dev().copy(source, target);  // queued; `source` is dropped before it runs
  }
  Tensor reuse = dev().alloc(n, 1, DType::f32);  // may get the same memory, after the copy
  dev().fill(reuse, -1.0f);
  const Vec got = read(dev(), target.view());
  CHECK(std::all_of(got.begin(), got.end(), [](float v) { return v == 3.0f; }));
}

TEST_CASE("gemm: every transpose, strided and unaligned views, bf16 and f32 C, beta 0 and 1") {
  struct Shape {
    std::int64_t m, n, k;
  };
  for (const Shape s : {Shape{37, 45, 29}, Shape{128, 96, 192}, Shape{1, 64, 16}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (bool c_f32 : {false, true}) {
        CAPTURE(s.m);
        CAPTURE(s.n);
        CAPTURE(s.k);
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(c_f32);
        const std::int64_t ar = ta ? s.k : s.m, ac = ta ? s.m : s.k;
        const std::int64_t br = tb ? s.n : s.k, bc = tb ? s.k : s.n;
        // Views of wider tensors: ld > cols and (with offset 3) pointers off 16-byte alignment.
        Twin a = twin_random(ar, ac + 5, 10 + t);
        Twin b = twin_random(br, bc + 3, 20 + t);
        Twin c = twin_random(s.m, s.n + 4, 30 + t, 1.0f, c_f32);
        const Mat a_c = a.cv().col_slice(3, ac), a_d = a.dv().col_slice(3, ac);
        const Mat b_c = b.cv().col_slice(1, bc), b_d = b.dv().col_slice(1, bc);
        const Mat c_c = c.cv().col_slice(2, s.n), c_d = c.dv().col_slice(2, s.n);
        cpu().gemm(ta, tb, 0.75f, a_c, b_c, 1.0f, c_c);
        dev().gemm(ta, tb, 0.75f, a_d, b_d, 1.0f, c_d);
        check_twin(c, kOne, "gemm beta 1");
        // beta = 0 ignores C, NaN included.
        cpu().fill(c_c, std::numeric_limits<float>::quiet_NaN());
        dev().fill(c_d, std::numeric_limits<float>::quiet_NaN());
        cpu().gemm(ta, tb, 1.0f, a_c, b_c, 0.0f, c_c);
        dev().gemm(ta, tb, 1.0f, a_d, b_d, 0.0f, c_d);
        check_twin(c, kOne, "gemm beta 0");
      }
    }
  }
}

TEST_CASE("gemm: an FP32 operand (the router's logit gradient) and an empty sum") {
  // BF16-exact values held in FP32, so the device's rounding of the operand loses nothing.
  Twin dl = twin(24, 16, random_host(24 * 16, 40, 1.0f, device_bf16(false)), true);
  Twin w = twin_random(8, 16, 41);
  Twin x = twin_random(24, 8, 42);
  Twin dw = twin_random(8, 16, 43);
  cpu().gemm(false, true, 1.0f, dl.cv(), w.cv(), 1.0f, x.cv());
  dev().gemm(false, true, 1.0f, dl.dv(), w.dv(), 1.0f, x.dv());
  check_twin(x, kOne, "gemm with f32 A");
  cpu().gemm(true, false, 1.0f, x.cv(), dl.cv(), 0.0f, dw.cv());
  dev().gemm(true, false, 1.0f, x.dv(), dl.dv(), 0.0f, dw.dv());
  check_twin(dw, kOne, "gemm with f32 B");
  // k = 0 (an expert without tokens in a weight gradient): C = beta C.
  cpu().gemm(true, false, 1.0f, x.cv().row_slice(0, 0), dl.cv().row_slice(0, 0), 0.5f, dw.cv());
  dev().gemm(true, false, 1.0f, x.dv().row_slice(0, 0), dl.dv().row_slice(0, 0), 0.5f, dw.dv());
  check_twin(dw, kOne, "gemm k = 0");
}

// The experts' GEMMs of one MoE layer on both backends: tokens x (h) in row blocks per expert,
// each expert's (h x f) weight and weight gradient. problems(on_dev, which) gives the forward
// (0: y = x W), dgrad (1: dx = dy W^T) or wgrad (2: dW = x^T dy) problems, one per expert.
struct ExpertGemms {
  Twin x, y, dy, dx;
  std::vector<Twin> w, dw;
  std::vector<std::int64_t> rows;

  // f32_dw: the weight gradients in FP32, as the step's main gradients are.
  template <typename WeightScale>
  ExpertGemms(std::vector<std::int64_t> expert_rows, std::uint64_t seed, WeightScale weight_scale,
              bool f32_dw = false)
      : rows(std::move(expert_rows)) {
    constexpr std::int64_t h = 64, f = 48;
    std::int64_t total = 0;
    for (auto r : rows) total += r;
    x = twin_random(total, h, seed);
    y = twin_random(total, f, seed + 1);
    dy = twin_random(total, f, seed + 2);
    dx = twin_random(total, h, seed + 3);
    for (std::size_t e = 0; e < rows.size(); ++e) {
      w.push_back(twin_random(h, f, seed + 10 + e, weight_scale(e)));
      dw.push_back(twin_random(h, f, seed + 20 + e, 1.0f, f32_dw));
    }
  }

  std::vector<GemmProblem> problems(bool on_dev, int which) const {
    std::vector<GemmProblem> p;
    std::int64_t first = 0;
    for (std::size_t e = 0; e < rows.size(); ++e) {
      auto v = [&](const Twin& t) { return on_dev ? t.dv() : t.cv(); };
      const auto slice = [&](const Twin& t) { return v(t).row_slice(first, rows[e]); };
      if (which == 0) p.push_back({slice(x), v(w[e]), slice(y)});
      if (which == 1) p.push_back({slice(dy), v(w[e]), slice(dx)});
      if (which == 2) p.push_back({slice(x), slice(dy), v(dw[e])});
      first += rows[e];
    }
    return p;
  }
};

// Both implementations on the device (--grouped-gemm loop and grouped; the cpu device has only
// the loop and skips the other), an expert with no rows among them (skipped by both), and the
// weight gradient accumulating (beta 1) into BF16 and into FP32 main gradients as the step does.
// cuBLAS's grouped GEMM takes no FP32 C for BF16 A and B: that weight gradient must run one GEMM
// per problem (grouped_gemm_path.hpp), and the counts say so.
TEST_CASE("grouped_gemm: experts' row blocks of one matrix, forward, dgrad and wgrad") {
  for (GroupedGemmImpl impl : {GroupedGemmImpl::loop, GroupedGemmImpl::grouped}) {
    for (bool f32_dw : {false, true}) {
      CAPTURE(to_string(impl));
      CAPTURE(f32_dw);
      if (!device_takes([&] { dev().set_grouped_gemm_impl(impl); })) continue;
      const std::vector<std::int64_t> rows = {17, 40, 0, 1, 70};
      ExpertGemms t(
          rows, 50, [](std::size_t) { return 0.2f; }, f32_dw);
      Twin &y = t.y, &dx = t.dx;
      std::vector<Twin>& dw = t.dw;
      auto problems = [&](bool on_dev, int which) { return t.problems(on_dev, which); };
      const bool ta[] = {false, false, true}, tb[] = {false, true, false};
      Twin* out[] = {&y, &dx, nullptr};
      const std::optional<KernelCalls> before = dev().kernel_calls();
      for (int which = 0; which < 3; ++which) {
        CAPTURE(which);
        const float beta = which == 2 ? 1.0f : 0.0f;
        cpu().grouped_gemm(ta[which], tb[which], 1.0f, problems(false, which), beta);
        dev().grouped_gemm(ta[which], tb[which], 1.0f, problems(true, which), beta);
        if (out[which] != nullptr) {
          check_twin(*out[which], kOne, "grouped gemm");
        } else {
          for (std::size_t e = 0; e < dw.size(); ++e) check_twin(dw[e], kOne, "grouped wgrad");
        }
      }
      const std::optional<KernelCalls> after = dev().kernel_calls();
      if (cuda_api() != nullptr && impl == GroupedGemmImpl::grouped) {
        REQUIRE((before && after));
        // Forward and dgrad grouped (4 experts with rows); wgrad grouped only into BF16.
        CHECK(after->grouped_calls - before->grouped_calls == (f32_dw ? 2 : 3));
        CHECK(after->grouped_loop_problems - before->grouped_loop_problems == (f32_dw ? 4 : 0));
        CHECK(cuda_api()->grouped_gemm_path().find("cublasGemmGroupedBatchedEx") !=
              std::string::npos);
      }
      dev().set_grouped_gemm_impl(GroupedGemmImpl::loop);
    }
  }
}

// Token counts that change with the routing: the first count of a size class asks cuBLASLt's
// heuristic, the later ones in the class reuse its algorithm (where cuBLASLt's check accepts it)
// and still compute the right product; the forward varies m, the weight gradient k.
TEST_CASE("gemm: new token counts in one size class reuse its algorithm and stay right") {
  CudaComputeApi* api = cuda_api();
  const std::int64_t queries0 = api != nullptr ? api->gemm_heuristic_queries() : 0;
  const std::int64_t reuses0 = api != nullptr ? api->gemm_algo_reuses() : 0;
  const std::vector<std::int64_t> counts = {1001, 1003, 1017, 1024, 1009, 1013};
  constexpr std::int64_t h = 256, f = 96;
  Twin w = twin_random(h, f, 60, 0.1f);
  Twin dw = twin_random(h, f, 61, 1.0f, true);
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const std::int64_t t = counts[i];
    CAPTURE(t);
    Twin x = twin_random(t, h, 62 + i);
    Twin y = twin_random(t, f, 70 + i);
    cpu().gemm(false, false, 1.0f, x.cv(), w.cv(), 0.0f, y.cv());
    dev().gemm(false, false, 1.0f, x.dv(), w.dv(), 0.0f, y.dv());
    check_twin(y, kOne, "forward, m in one class");
    cpu().gemm(true, false, 1.0f, x.cv(), y.cv(), 1.0f, dw.cv());
    dev().gemm(true, false, 1.0f, x.dv(), y.dv(), 1.0f, dw.dv());
    check_twin(dw, kOne, "weight gradient, k in one class");
  }
  if (api != nullptr) {
    // At most one query per GEMM form (forward, weight gradient) and a little slack for a count
    // whose shape cuBLASLt's check refuses; every other count reused its class's algorithm.
    const std::int64_t queries = api->gemm_heuristic_queries() - queries0;
    const std::int64_t reuses = api->gemm_algo_reuses() - reuses0;
    CAPTURE(queries);
    CAPTURE(reuses);
    CHECK(queries <= 4);
    CHECK(queries + reuses == 2 * static_cast<std::int64_t>(counts.size()));
    CHECK(api->gemm_path().find("heuristic queries") != std::string::npos);
  }
}

TEST_CASE("rmsnorm forward and backward; the weight gradient accumulates") {
  const std::int64_t rows = 70, cols = 300;  // more rows than one 64-row chunk of the dw sum
  Twin x = twin_random(rows, cols, 80, 2.0f);
  Twin w = twin_random(1, cols, 81);
  Twin y = twin_random(rows, cols, 82);
  Twin rstd = twin_random(rows, 1, 83, 1.0f, true);
  cpu().rmsnorm_forward(x.cv(), w.cv(), 1e-6f, y.cv(), rstd.cv());
  dev().rmsnorm_forward(x.dv(), w.dv(), 1e-6f, y.dv(), rstd.dv());
  check_twin(y, kOne, "rmsnorm y");
  check_twin(rstd, 1e-5, "rmsnorm rstd");  // FP32, from identical inputs
  Twin dy = twin_random(rows, cols, 84);
  Twin dx = twin_random(rows, cols, 85);
  Twin dw = twin_random(1, cols, 86);
  cpu().rmsnorm_backward(dy.cv(), x.cv(), w.cv(), rstd.cv(), dx.cv(), dw.cv());
  dev().rmsnorm_backward(dy.dv(), x.dv(), w.dv(), rstd.dv(), dx.dv(), dw.dv());
  check_twin(dx, kOne, "rmsnorm dx");
  check_twin(dw, kOne, "rmsnorm dweight");
}

TEST_CASE("rope forward and backward on heads inside a wider row") {
  const std::int64_t seq = 40, rows = 2 * seq, heads = 3, stride = 24, offset = 8, dim = 16;
  Twin x = twin_random(rows, heads * stride + 2, 90);
  cpu().rope_forward(x.cv(), seq, heads, stride, offset, dim, 10000.0f);
  dev().rope_forward(x.dv(), seq, heads, stride, offset, dim, 10000.0f);
  check_twin(x, kOne, "rope forward");
  cpu().rope_backward(x.cv(), seq, heads, stride, offset, dim, 10000.0f);
  dev().rope_backward(x.dv(), seq, heads, stride, offset, dim, 10000.0f);
  check_twin(x, kOne, "rope backward");
}

TEST_CASE("swiglu forward and backward") {
  Twin gu = twin_random(33, 2 * 50, 100, 3.0f);
  Twin out = twin_random(33, 50, 101);
  Twin dout = twin_random(33, 50, 102);
  Twin dgu = twin_random(33, 100, 103);
  cpu().swiglu_forward(gu.cv(), out.cv());
  dev().swiglu_forward(gu.dv(), out.dv());
  check_twin(out, kOne, "swiglu out");
  cpu().swiglu_backward(gu.cv(), dout.cv(), dgu.cv());
  dev().swiglu_backward(gu.dv(), dout.dv(), dgu.dv());
  check_twin(dgu, kOne, "swiglu dgate_up");
}

void run_attention(const AttentionShape& s) {
  const std::int64_t rows = s.batch * s.seq_len;
  const std::int64_t qk = s.heads * s.qk_dim, vd = s.heads * s.v_dim;
  Twin q = twin_random(rows, qk, 110);
  Twin k = twin_random(rows, qk, 111);
  Twin v = twin_random(rows, vd, 112);
  Twin o = twin_random(rows, vd, 113);
  Twin stats = twin_random(rows, s.heads, 114, 1.0f, true);
  cpu().attention_forward(s, q.cv(), k.cv(), v.cv(), o.cv(), stats.cv());
  dev().attention_forward(s, q.dv(), k.dv(), v.dv(), o.dv(), stats.dv());
  check_twin(o, kOne, "attention out");
  // The scores are BF16 products summed in FP32: the log-sum-exp agrees to FP32 order effects.
  check_twin(stats, 1e-4, "attention log-sum-exp");
  // Backward from the same (device) output on both sides, so only backward differs.
  const Vec o_dev = read(dev(), o.dv());
  cpu().upload(o_dev.data(), o.c);
  Twin dout = twin_random(rows, vd, 115);
  Twin dq = twin_random(rows, qk, 116), dk = twin_random(rows, qk, 117);
  Twin dv = twin_random(rows, vd, 118);
  cpu().attention_backward(s, q.cv(), k.cv(), v.cv(), o.cv(), dout.cv(), stats.cv(), dq.cv(),
                           dk.cv(), dv.cv());
  dev().attention_backward(s, q.dv(), k.dv(), v.dv(), o.dv(), dout.dv(), stats.dv(), dq.dv(),
                           dk.dv(), dv.dv());
  check_twin(dv, kOne, "attention dv");
  check_twin(dq, kChained, "attention dq");
  check_twin(dk, kChained, "attention dk");
}

// Both implementations on the device: the batched GEMMs, and cuDNN's fused flash attention
// (--attention-impl cudnn) where the binary has it; the same tolerances, since both keep the
// softmax in FP32 and round P and the outputs to BF16 once. A device without cuDNN attention
// says so and skips it.
TEST_CASE("attention with MLA's head dims (192 for q/k, 128 for v), causal and not") {
  for (AttentionImpl impl : {AttentionImpl::gemm, AttentionImpl::cudnn}) {
    CAPTURE(to_string(impl));
    if (!device_takes([&] { dev().set_attention_impl(impl); })) continue;
    AttentionShape s;
    s.batch = 2;
    s.seq_len = 48;
    s.heads = 3;
    s.qk_dim = 192;
    s.v_dim = 128;
    s.scale = 1.0f / std::sqrt(192.0f);
    run_attention(s);
    s.causal = false;
    s.seq_len = 33;
    run_attention(s);
    if (cuda_api() != nullptr && impl == AttentionImpl::cudnn) {
      CHECK(cuda_api()->attention_path().find("cuDNN fused flash attention") == 0);
    }
    dev().set_attention_impl(AttentionImpl::automatic);
  }
}

TEST_CASE("attention split into chunks of heads gives the same result") {
  CudaComputeApi* api = cuda_api();
  if (api == nullptr) return;
  api->set_attention_impl(AttentionImpl::gemm);  // the chunks are the batched GEMMs'
  api->set_attention_score_budget(1);            // one head per chunk
  AttentionShape s;
  s.batch = 1;
  s.seq_len = 64;
  s.heads = 4;
  s.qk_dim = 192;
  s.v_dim = 128;
  s.scale = 1.0f / std::sqrt(192.0f);
  run_attention(s);
  api->set_attention_score_budget(std::size_t{1} << 30);
  api->set_attention_impl(AttentionImpl::automatic);
}

// MLA's operands in place (q, kv = per head [k_nope | v], the rope key shared by the heads)
// against the cpu backend on the same operands (itself checked against plain attention over
// built k and v, tests/unit/attention_operands_test.cpp). The rope key's gradient sums 16 heads'
// BF16 products in FP32 on both paths, so kChained holds for it as for dk.
void run_mla_attention(const AttentionShape& s, const MlaDims& d) {
  const std::int64_t rows = s.batch * s.seq_len;
  Twin q = twin_random(rows, d.heads * d.dq(), 210), kv = twin_random(rows, d.kv_width(), 211);
  Twin kr = twin_random(rows, d.dr, 212), o = twin_random(rows, d.heads * d.dv, 213);
  Twin stats = twin_random(rows, s.heads, 214, 1.0f, true);
  cpu().attention_forward(s, AttentionOperands::mla(d, q.cv(), kv.cv(), kr.cv()), o.cv(),
                          stats.cv());
  dev().attention_forward(s, AttentionOperands::mla(d, q.dv(), kv.dv(), kr.dv()), o.dv(),
                          stats.dv());
  check_twin(o, kOne, "mla attention out");
  check_twin(stats, 1e-4, "mla attention log-sum-exp");
  const Vec o_dev = read(dev(), o.dv());
  cpu().upload(o_dev.data(), o.c);
  Twin dout = twin_random(rows, d.heads * d.dv, 215), dq = twin_random(rows, d.heads * d.dq(), 216);
  Twin dkv = twin_random(rows, d.kv_width(), 217), dkr = twin_random(rows, d.dr, 218);
  cpu().attention_backward(s, AttentionOperands::mla(d, q.cv(), kv.cv(), kr.cv()), o.cv(),
                           dout.cv(), stats.cv(),
                           AttentionOperands::mla(d, dq.cv(), dkv.cv(), dkr.cv()));
  dev().attention_backward(s, AttentionOperands::mla(d, q.dv(), kv.dv(), kr.dv()), o.dv(),
                           dout.dv(), stats.dv(),
                           AttentionOperands::mla(d, dq.dv(), dkv.dv(), dkr.dv()));
  check_twin(dq, kChained, "mla attention dq");
  check_twin(dkv, kChained, "mla attention dkv (dk_nope and dv)");
  check_twin(dkr, kChained, "mla attention dkrope (summed over heads)");
}

// Both implementations: the batched GEMMs read kv and krope in place (krope at batch stride 0);
// cuDNN gets k and v gathered into packed scratch, its gradients scattered back. With a score
// budget of one byte, one head per chunk: the rope key's gradient then sums over chunks.
TEST_CASE("attention on MLA's operands in place, whole and one head per chunk") {
  for (AttentionImpl impl : {AttentionImpl::gemm, AttentionImpl::cudnn}) {
    CAPTURE(to_string(impl));
    if (!device_takes([&] { dev().set_attention_impl(impl); })) continue;
    const MlaDims d{16, 128, 64, 128};
    AttentionShape s{2,   40, d.heads, d.dq(), d.dv, 1.0f / std::sqrt(192.0f),
                     true};  // 2 x 40 tokens
    run_mla_attention(s, d);
    if (CudaComputeApi* api = cuda_api()) {
      api->set_attention_score_budget(1);
      s.causal = false;
      run_mla_attention(s, d);
      api->set_attention_score_budget(std::size_t{1} << 30);
    }
    dev().set_attention_impl(AttentionImpl::automatic);
  }
}

// The smallest gap between two choice scores (score + bias) of a token: a near-tie lets the
// device's last-bit differences pick another expert.
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

TEST_CASE("adamw on BF16 parameters and gradients with FP32 moments, two steps") {
  const std::int64_t n = 1000;
  Twin param = twin_random(n, 1, 160);
  Twin grad = twin_random(n, 1, 161, 0.1f);
  Twin m = twin(n, 1, Vec(n, 0.0f), true);
  Twin v = twin(n, 1, Vec(n, 0.0f), true);
  AdamWStep s;
  s.lr = 1e-2f;
  s.weight_decay = 0.1f;
  s.grad_scale = 0.5f;
  for (int step = 1; step <= 2; ++step) {
    s.step = step;
    cpu().adamw(s, param.cv(), grad.cv(), m.cv(), v.cv(), Mat{});
    dev().adamw(s, param.dv(), grad.dv(), m.dv(), v.dv(), Mat{});
    check_twin(m, 1e-5, "adamw m");
    check_twin(v, 1e-5, "adamw v");
    check_twin(param, kOne, "adamw param");
    // Continue from the device's rounded parameters on both sides.
    const Vec p_dev = read(dev(), param.dv());
    cpu().upload(p_dev.data(), param.c);
  }
}

TEST_CASE("adamw on BF16 parameters with FP32 master weights: the master carries the update") {
  const std::int64_t n = 1000;
  Twin param = twin_random(n, 1, 170);
  Twin master = twin_random(n, 1, 170, 1.0f, true);  // the same values, FP32 on both sides
  Twin grad = twin_random(n, 1, 171, 0.1f);
  Twin m = twin(n, 1, Vec(n, 0.0f), true);
  Twin v = twin(n, 1, Vec(n, 0.0f), true);
  AdamWStep s;
  s.lr = 1e-4f;  // updates below BF16's resolution: only a master copy keeps them
  s.grad_scale = 0.5f;
  for (int step = 1; step <= 3; ++step) {
    s.step = step;
    cpu().adamw(s, param.cv(), grad.cv(), m.cv(), v.cv(), master.cv());
    dev().adamw(s, param.dv(), grad.dv(), m.dv(), v.dv(), master.dv());
    check_twin(m, 1e-5, "adamw m");
    check_twin(v, 1e-5, "adamw v");
    // FP32 on both sides, the same arithmetic: 1e-6 of the scale (FP32 rounding only).
    check_twin(master, 1e-6, "adamw master");
    // The device's BF16 param is its master rounded (2^-9 relative: kOne of the scale).
    check_close(read(dev(), param.dv()), read(dev(), master.dv()), kOne, "adamw param");
  }
}

TEST_CASE(
    "adamw with BF16 moments (--optimizer-state-dtype bf16): FP32 arithmetic, rounded "
    "moments") {
  const std::int64_t n = 1000;
  Twin param = twin_random(n, 1, 180);
  Twin master = twin_random(n, 1, 180, 1.0f, true);
  Twin grad = twin_random(n, 1, 181, 0.1f);
  Twin m = twin(n, 1, Vec(n, 0.0f));  // the device's in BF16, the host's FP32
  Twin v = twin(n, 1, Vec(n, 0.0f));
  REQUIRE(m.d.dtype() == dev().activation_dtype());
  AdamWStep s;
  s.lr = 1e-3f;
  s.grad_scale = 0.5f;
  for (int step = 1; step <= 2; ++step) {
    s.step = step;
    cpu().adamw(s, param.cv(), grad.cv(), m.cv(), v.cv(), master.cv());
    dev().adamw(s, param.dv(), grad.dv(), m.dv(), v.dv(), master.dv());
    // The moments are the host's rounded to BF16 once (2^-9 relative: kOne of the scale).
    check_twin(m, kOne, "adamw bf16 m");
    check_twin(v, kOne, "adamw bf16 v");
    // The master's update reads the rounded moments: within BF16's relative error of lr.
    check_twin(master, 1e-5, "adamw master with bf16 moments");
    // Continue from the device's rounded moments on both sides.
    for (Twin* t : {&m, &v}) {
      const Vec d = read(dev(), t->dv());
      cpu().upload(d.data(), t->c);
    }
    const Vec md = read(dev(), master.dv());
    cpu().upload(md.data(), master.c);
  }
}

// --precision fp8. Both backends quantise the same inputs (BF16 values, uploaded to both) with
// the same amax, scale and e4m3_round, so their E4M3 operands are identical; what differs is the
// FP32 accumulation order and the device's BF16 output rounding (2^-9 of an element), within
// kOne of the scale. A wrong scale, a transposed or mis-padded operand, or a lost beta C is O(1).
struct LinearPrecisionGuard {  // both backends back to standard whatever a case does
  ~LinearPrecisionGuard() {
    for (Compute* c : {&cpu(), &dev()}) {
      c->set_linear_precision(LinearPrecision::standard);
      c->set_fp8_recipe(Fp8Recipe::tensor);
      c->begin_step();
    }
  }
};

// Tensors of a case are freed and reallocated, maybe at the same address: a weight's kept fp8
// copy must not outlive them (in the step, weights live for the run).
void new_step() {
  cpu().begin_step();
  dev().begin_step();
}

std::int64_t fp8_gemms() {
  return dev().fp8_gemm_counts().gemms;
}
std::int64_t fp8_fallbacks() {
  return dev().fp8_gemm_counts().fallbacks;
}

TEST_CASE("fp8 linear_gemm: NN, NT, TN, beta 0 and 1, bf16 and f32 C, K padded, vs the emulation") {
  LinearPrecisionGuard guard;
  cpu().set_linear_precision(LinearPrecision::fp8);
  dev().set_linear_precision(LinearPrecision::fp8);  // the H200 has FP8 tensor cores (cc 9.0)
  if (cuda_api() != nullptr) CHECK(cuda_api()->gemm_path().find("fp8 e4m3") != std::string::npos);
  // m and n multiples of 16; k = 40 exercises the zero padding of K to 48.
  const std::int64_t m = 48, n = 64, k = 40;
  const bool ta[] = {false, false, true}, tb[] = {false, true, false};
  for (int t = 0; t < 3; ++t) {
    for (float beta : {0.0f, 1.0f}) {
      for (bool f32_c : {false, true}) {
        CAPTURE(t);
        CAPTURE(beta);
        CAPTURE(f32_c);
        new_step();
        Twin a = ta[t] ? twin_random(k, m, 80, 2.0f) : twin_random(m, k, 80, 2.0f);
        Twin b = tb[t] ? twin_random(n, k, 81, 0.05f) : twin_random(k, n, 81, 0.05f);
        Twin c = twin_random(m, n, 82, 1.0f, f32_c);
        const std::int64_t ran = fp8_gemms(), fell = fp8_fallbacks();
        cpu().linear_gemm(ta[t], tb[t], 0.5f, a.cv(), b.cv(), beta, c.cv());
        dev().linear_gemm(ta[t], tb[t], 0.5f, a.dv(), b.dv(), beta, c.dv());
        check_twin(c, kOne, "fp8 linear_gemm");
        if (cuda_api() != nullptr) {
          CHECK(fp8_gemms() == ran + 1);  // the FP8 path ran, not the BF16 fallback
          CHECK(fp8_fallbacks() == fell);
        }
      }
    }
  }
}

// --fp8-recipe blockwise (Hopper) and mxfp8 (Blackwell) against the cpu backend's emulation of
// the same recipe: the same BF16 inputs, tiles, amax, scales and rounding give identical E4M3
// operands and scales, so as above only accumulation order and the BF16 output differ (kOne). A
// scale at the wrong place in cuBLASLt's layout, or a tile cut differently, is O(1) for the
// elements it touches: the inputs' magnitudes vary by 2^12 along both dimensions. A recipe the
// device cannot run is refused with a usage error, and the case says so and skips it.
TEST_CASE("fp8 recipes blockwise and mxfp8: forward, data and weight gradient vs the emulation") {
  LinearPrecisionGuard guard;
  // K = 300: partial 128- and 32-wide tiles; N = 256 spans two 128 x 128 weight blocks.
  const std::int64_t m = 64, n = 256, k = 300;
  for (Fp8Recipe recipe : {Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    CAPTURE(to_string(recipe));
    cpu().set_linear_precision(LinearPrecision::fp8);
    dev().set_linear_precision(LinearPrecision::fp8);
    cpu().set_fp8_recipe(recipe);
    if (!device_takes([&] { dev().set_fp8_recipe(recipe); })) continue;
    const bool ta[] = {false, false, true}, tb[] = {false, true, false};
    for (int t = 0; t < 3; ++t) {
      CAPTURE(t);
      new_step();
      auto varied = [](Vec v, std::int64_t cols) {
        for (std::size_t i = 0; i < v.size(); ++i) {
          const auto r = static_cast<std::int64_t>(i) / cols,
                     c = static_cast<std::int64_t>(i) % cols;
          v[i] = round_bf16(v[i] * std::ldexp(1.0f, static_cast<int>((r * 7 + c / 37) % 13) - 6));
        }
        return v;
      };
      const std::int64_t ar = ta[t] ? k : m, ac = ta[t] ? m : k;
      const std::int64_t br = tb[t] ? n : k, bc = tb[t] ? k : n;
      Twin a =
          twin(ar, ac, varied(random_host(static_cast<std::size_t>(ar * ac), 84, 1.0f, true), ac));
      Twin b =
          twin(br, bc, varied(random_host(static_cast<std::size_t>(br * bc), 85, 1.0f, true), bc));
      Twin c = twin_random(m, n, 86);
      const std::int64_t ran = fp8_gemms(), kept = dev().fp8_gemm_counts().weight_quantisations;
      for (int micro_batch = 0; micro_batch < 2; ++micro_batch) {
        cpu().linear_gemm(ta[t], tb[t], 1.0f, a.cv(), b.cv(), 0.0f, c.cv());
        dev().linear_gemm(ta[t], tb[t], 1.0f, a.dv(), b.dv(), 0.0f, c.dv());
        check_twin(c, kOne, "fp8 recipe linear_gemm");
      }
      if (cuda_api() != nullptr) {
        CHECK(fp8_gemms() == ran + 2);  // block-scaled FP8, not the BF16 fallback
        // B is a weight without trans_a: quantised once for both micro-batches.
        CHECK(dev().fp8_gemm_counts().weight_quantisations == kept + (ta[t] ? 0 : 1));
        CHECK(cuda_api()->gemm_path().find(to_string(recipe)) != std::string::npos);
      }
    }
  }
}

TEST_CASE("fp8 saved inputs: the weight gradient from the saved copy equals the one from x") {
  LinearPrecisionGuard guard;
  // 300 tokens: partial 32- and 128-wide tiles along the weight gradient's K.
  const std::int64_t tokens = 300, in = 64, out = 256;
  for (Fp8Recipe recipe : {Fp8Recipe::tensor, Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    CAPTURE(to_string(recipe));
    cpu().set_linear_precision(LinearPrecision::fp8);
    dev().set_linear_precision(LinearPrecision::fp8);
    cpu().set_fp8_recipe(recipe);
    if (!device_takes([&] { dev().set_fp8_recipe(recipe); })) continue;
    new_step();
    Twin x = twin_random(tokens, in, 91), dy = twin_random(tokens, out, 92);
    Twin want = twin(in, out, Vec(static_cast<std::size_t>(in * out), 0.0f));
    Twin got = twin(in, out, Vec(static_cast<std::size_t>(in * out), 0.0f));
    dev().linear_gemm(true, false, 1.0f, x.dv(), dy.dv(), 0.0f, want.dv());
    const Fp8Input saved = dev().save_linear_input(x.dv(), got.dv());
    const Fp8Input saved_cpu = cpu().save_linear_input(x.cv(), got.cv());
    CHECK(saved_cpu.fp8);
    if (cuda_api() != nullptr) {
      CHECK(saved.fp8);
      // One byte an element plus the scales, against BF16's two.
      CHECK(saved.data.bytes() < static_cast<std::size_t>(tokens * in) * 2);
    }
    dev().fill(x.dv(), 7.0f);  // the gradient reads only the copy
    dev().linear_wgrad(1.0f, saved, dy.dv(), 0.0f, got.dv());
    cpu().linear_wgrad(1.0f, saved_cpu, dy.cv(), 0.0f, got.cv());
    CHECK(read(dev(), got.dv()) == read(dev(), want.dv()));
    check_twin(got, kOne, "fp8 saved input weight gradient");
  }
}

TEST_CASE("fp8 linear_grouped_gemm: per-expert scales, forward, dgrad and wgrad vs the emulation") {
  LinearPrecisionGuard guard;
  cpu().set_linear_precision(LinearPrecision::fp8);
  dev().set_linear_precision(LinearPrecision::fp8);
  const std::vector<std::int64_t> rows = {16, 48, 32};
  // Weights of very different magnitudes: a scale shared across experts would show.
  ExpertGemms t(rows, 90, [](std::size_t e) { return e == 1 ? 1e-3f : 0.2f; });
  Twin &y = t.y, &dx = t.dx;
  std::vector<Twin>& dw = t.dw;
  auto problems = [&](bool on_dev, int which) { return t.problems(on_dev, which); };
  const bool ta[] = {false, false, true}, tb[] = {false, true, false};
  const float beta[] = {0.0f, 0.0f, 1.0f};  // wgrad accumulates, as the step's does
  for (int which = 0; which < 3; ++which) {
    CAPTURE(which);
    const std::int64_t ran = fp8_gemms();
    cpu().linear_grouped_gemm(ta[which], tb[which], 1.0f, problems(false, which), beta[which]);
    dev().linear_grouped_gemm(ta[which], tb[which], 1.0f, problems(true, which), beta[which]);
    if (cuda_api() != nullptr) CHECK(fp8_gemms() == ran + static_cast<std::int64_t>(rows.size()));
    if (which == 0) {
      // Per expert: each expert's rows against its own scale (the small expert's output is
      // 1e-3 of the others', so a tensor-wide check would hide it).
      std::int64_t first = 0;
      for (std::size_t e = 0; e < rows.size(); ++e) {
        check_close(read(dev(), y.dv().row_slice(first, rows[e])),
                    read(cpu(), y.cv().row_slice(first, rows[e])), kOne, "fp8 grouped forward");
        first += rows[e];
      }
    } else if (which == 1) {
      check_twin(dx, kOne, "fp8 grouped dgrad");
    } else {
      for (std::size_t e = 0; e < dw.size(); ++e) check_twin(dw[e], kOne, "fp8 grouped wgrad");
    }
  }
}

TEST_CASE("fp8 against bf16 on the device: within the E4M3 error, not equal") {
  LinearPrecisionGuard guard;
  const std::int64_t m = 64, n = 64, k = 256;
  const Vec av = random_host(m * k, 120, 1.0f, device_bf16(false));
  const Vec bv = random_host(k * n, 121, 1.0f, device_bf16(false));
  Twin a = twin(m, k, av), b = twin(k, n, bv);
  Tensor std_out = dev().alloc(m, n, DType::f32), fp8_out = dev().alloc(m, n, DType::f32);
  dev().linear_gemm(false, false, 1.0f, a.dv(), b.dv(), 0.0f, std_out);
  dev().set_linear_precision(LinearPrecision::fp8);
  dev().linear_gemm(false, false, 1.0f, a.dv(), b.dv(), 0.0f, fp8_out);
  const Vec s = read(dev(), std_out), q = read(dev(), fp8_out);
  // Each E4M3 input is within 2^-4 of its value relatively, so each product within ~2 x 2^-4:
  // |fp8 - bf16| <= 0.13 x sum_p |a_ip b_pj| (+ the BF16 path's own ~1e-3 of it). Random signs
  // make the mean error far smaller, but not zero.
  double mean = 0.0;
  std::size_t beyond = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double abs_sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p) abs_sum += std::abs(av[i * k + p] * bv[p * n + j]);
      const double err = std::abs(static_cast<double>(q[i * n + j]) - s[i * n + j]);
      if (!(err <= 0.13 * abs_sum)) ++beyond;
      mean += err / abs_sum;
    }
  }
  mean /= static_cast<double>(m * n);
  MESSAGE("fp8 vs bf16: mean |difference| " << mean << " of sum |a b|");
  CHECK(beyond == 0);
  CHECK(mean > 1e-4);
  CHECK(mean < 0.02);
}

TEST_CASE("device information, memory, and stream marks timing a GEMM") {
  CudaComputeApi* api = cuda_api();
  if (api == nullptr) return;
  const DeviceInfo info = *api->device_info();
  CHECK(!info.name.empty());
  CHECK(info.uuid.rfind("GPU-", 0) == 0);
  CHECK(info.uuid.size() == 40);
  CHECK(info.pci_bus_id.size() >= 12);
  CHECK(info.total_memory_bytes > 0);
  CHECK(info.compute_capability_major >= 7);
  CHECK(info.multiprocessors > 0);
  CHECK(!info.driver_cuda_version.empty());
  CHECK(!info.runtime_version.empty());
  CHECK(!info.cublas_version.empty());
  CHECK(api->device() == info.ordinal);
  CHECK(api->stream_handle() != nullptr);
  const std::int64_t free_bytes = dev().memory_available_bytes();
  CHECK(free_bytes > 0);
  CHECK(free_bytes <= info.total_memory_bytes);
  {
    // What the memory pool keeps after a free is still this process's to allocate: 1 GiB taken
    // and dropped leaves the available memory where it was (64 MiB of slack for the driver's
    // own bookkeeping), where cudaMemGetInfo alone would read 1 GiB less.
    { const Tensor big = dev().alloc(std::int64_t{1} << 28, 1, DType::f32); }
    dev().synchronize();
    const std::int64_t after = dev().memory_available_bytes();
    CHECK(after >= free_bytes - (std::int64_t{64} << 20));
  }
  // The marks are events on the stream: 5 back-to-back BF16 GEMMs between two of them.
  const Tensor a = dev().alloc(1024, 1024), b = dev().alloc(1024, 1024),
               c = dev().alloc(1024, 1024);
  dev().fill_random(a, 1, 1, 1.0f);
  dev().fill_random(b, 1, 2, 1.0f);
  dev().gemm(false, false, 1.0f, a, b, 0.0f, c);  // warm: the plan is made here
  dev().synchronize();
  dev().clear_marks();
  dev().mark();
  for (int i = 0; i < 5; ++i) dev().gemm(false, false, 1.0f, a, b, 0.0f, c);
  dev().mark();
  dev().synchronize();
  const double seconds = dev().mark_times_s().at(1) / 5;
  dev().clear_marks();
  const double tflops = 2.0 * 1024.0 * 1024.0 * 1024.0 / seconds / 1e12;
  MESSAGE("bf16 GEMM 1024^3: " << seconds * 1e6 << " us, " << tflops << " TFLOP/s");
  CHECK(seconds > 0.0);
  CHECK(tflops < 10000.0);  // not a broken timer
}

}  // namespace
}  // namespace moebench
