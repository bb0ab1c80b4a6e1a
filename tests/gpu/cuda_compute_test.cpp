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
#include "tests/gpu/gpu_fixture.hpp"

namespace moebench {
namespace {

using namespace gpu_test;

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
