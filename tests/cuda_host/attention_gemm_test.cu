// The cuda backend's batched-GEMM attention (harness/backends/cuda/attention_gemm.cuh) run on the
// CPU: its orchestration, unchanged, over a host executor that carries out each
// cublasGemmStridedBatchedEx call by the column-major contract cuBLAS documents (and refuses the
// leading dimensions cuBLAS would refuse), and the softmax, the dot products and the
// probabilities through the kernels' own work (row_work.cuh, probs_work). Compared with the cpu
// backend's attention on the same BF16-rounded values, this checks without a GPU what a GPU test
// would: the row-major to column-major translation, every operand's pointer, leading dimension
// and batch stride, the head chunks, and the shared rope key's reduction over heads and chunks.
//
// Tolerances, as in tests/gpu: the outputs are BF16 (rounded once, half an ulp is 2^-9 of the
// value), within 1e-2 of the largest magnitude; what goes through the BF16 probabilities and
// their gradient within 3e-2. A wrong operand, stride or head is O(1) of the scale and fails.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/cuda/attention_gemm.cuh"
#include "harness/backends/cuda/row_work.cuh"
#include "tests/cuda_host/attention_host.hpp"
#include "tests/cuda_host/emulated_grid.hpp"

namespace moebench::cuda {
namespace {

using namespace host_attention;  // NOLINT: the cases' shared helpers

// Element i of a raw operand of `type`, and a write of one.
float element(const void* p, cudaDataType_t type, long long i) {
  if (type == CUDA_R_16BF) return __bfloat162float(static_cast<const bf16*>(p)[i]);
  REQUIRE(type == CUDA_R_32F);
  return static_cast<const float*>(p)[i];
}
void put(void* p, cudaDataType_t type, long long i, float v) {
  if (type == CUDA_R_16BF) {
    static_cast<bf16*>(p)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}
// The executor attention_gemm.cuh asks for, on host memory.
struct HostAttention {
  std::size_t budget = std::size_t{1} << 30;
  HostScratch scratch_buffer;
  int gemms = 0;

  // cuBLAS: C_i = alpha op(A_i) op(B_i) + beta C_i, column-major, element (r, c) of X at
  // X[r + c ld]; beta == 0 does not read C.
  void gemm(const GemmCall& g) {
    ++gemms;
    REQUIRE(g.m >= 0);
    REQUIRE(g.n >= 0);
    REQUIRE(g.k >= 0);
    REQUIRE(g.batch >= 1);
    // cuBLAS's own argument checks (CUBLAS_STATUS_INVALID_VALUE otherwise).
    REQUIRE(g.lda >= std::max(1, g.op_a == CUBLAS_OP_N ? g.m : g.k));
    REQUIRE(g.ldb >= std::max(1, g.op_b == CUBLAS_OP_N ? g.k : g.n));
    REQUIRE(g.ldc >= std::max(1, g.m));
    for (int i = 0; i < g.batch; ++i) {
      const long long a0 = i * g.stride_a, b0 = i * g.stride_b, c0 = i * g.stride_c;
      for (int col = 0; col < g.n; ++col) {
        for (int r = 0; r < g.m; ++r) {
          float acc = 0.0f;
          for (int kk = 0; kk < g.k; ++kk) {
            const long long ai =
                g.op_a == CUBLAS_OP_N ? r + 1LL * kk * g.lda : kk + 1LL * r * g.lda;
            const long long bi =
                g.op_b == CUBLAS_OP_N ? kk + 1LL * col * g.ldb : col + 1LL * kk * g.ldb;
            acc += element(g.a, g.a_type, a0 + ai) * element(g.b, g.b_type, b0 + bi);
          }
          const long long ci = c0 + r + 1LL * col * g.ldc;
          const float old = g.beta != 0.0f ? g.beta * element(g.c, g.c_type, ci) : 0.0f;
          put(g.c, g.c_type, ci, g.alpha * acc + old);
        }
      }
    }
  }
  // The kernels' row work (row_work.cuh) and probs_work, over an emulated block (and warp), 16
  // bytes at a time where the rows allow, as attention.cu decides.
  void softmax(const ScoreChunk& ch, const float* s, bf16* p, const Mat& stats) {
    const Mat sm = ch.rows(s, DType::f32), pm = ch.rows(p, DType::bf16);
    HostTeam block{64};
    for (std::int64_t blk = 0; blk < ch.heads * ch.seq; ++blk)
      softmax_row(block, ch, sm, pm, stats, blk, vec_rows_ok(sm) && vec_rows_ok(pm));
  }
  void probs(const ScoreChunk& ch, const float* s, const float* dp, const float* d,
             std::int64_t heads_total, const Mat& stats, bf16* out) {
    const bool vec = probs_vec(ch, s, dp, out);
    run_grid(dim3(1, 3), 64,
             [&](const GridPos& p) { probs_work(p, ch, s, dp, d, heads_total, stats, out, vec); });
  }
  void rowdot(const Mat& dout, const Mat& out, std::int64_t heads, std::int64_t v_dim, float* d) {
    const bool vec = rowdot_vec(dout, out, v_dim);
    HostTeam warp{32};
    for (std::int64_t w = 0; w < dout.rows * heads; ++w)
      rowdot_row(warp, dout, out, heads, v_dim, w, d, vec);
  }
  void fill(const Mat& x, float value) {
    for (std::int64_t r = 0; r < x.rows; ++r)
      for (std::int64_t c = 0; c < x.cols; ++c) store(x, r, c, value);
  }
  void convert(const Mat& src, const Mat& dst) {
    REQUIRE(src.rows == dst.rows);
    REQUIRE(src.cols == dst.cols);
    for (std::int64_t r = 0; r < src.rows; ++r)
      for (std::int64_t c = 0; c < src.cols; ++c) store(dst, r, c, load(src, r, c));
  }
  void* scratch(std::size_t bytes) { return scratch_buffer.get(bytes); }
  std::size_t score_budget() const { return budget; }
};

// MLA's operands (q, kv per head [k_nope | v], the shared rope key) and plain attention's
// (q, k, v packed per head): the orchestration on the host against the cpu backend.
void run_case(bool mla, bool causal, std::size_t budget) {
  CAPTURE(mla);
  CAPTURE(causal);
  CAPTURE(budget);
  CpuCompute c(1);
  const auto [md, s, rows, qc, vc] = mla_case(causal);
  const std::int64_t kc = mla ? md.kv_width() : qc;  // kv, or k
  Pair q = pair(c, rows, qc, 1), k = pair(c, rows, kc, 2), kr = pair(c, rows, md.dr, 3);
  Pair v = pair(c, rows, vc, 4), dout = pair(c, rows, vc, 5);
  Pair o = pair(c, rows, vc, 6), dq = pair(c, rows, qc, 7), dk = pair(c, rows, kc, 8);
  Pair dkr = pair(c, rows, md.dr, 9), dv = pair(c, rows, vc, 10);
  Stats st = stats_pair(c, rows, md.heads);
  const Mat stats = st.dv();
  const Tensor& stats_ref = st.ref;
  const auto operands = [&](Mat qm, Mat km, Mat krm, Mat vm) {
    return mla ? AttentionOperands::mla(md, qm, km, krm) : AttentionOperands::dense(s, qm, km, vm);
  };

  HostAttention x;
  x.budget = budget;
  gemm_attention_forward(x, s, operands(q.dv(), k.dv(), kr.dv(), v.dv()), o.dv(), stats);
  c.attention_forward(s, operands(q.cv(), k.cv(), kr.cv(), v.cv()), o.cv(), stats_ref);
  check_close(o.dv(), c, o.ref, 1e-2, "out");
  check_close(stats, c, stats_ref, 1e-4, "log-sum-exp");
  // Three GEMMs a chunk with the rope key (two for the scores), two without.
  const std::int64_t chunks = budget < 1000 ? md.heads : 1;
  CHECK(x.gemms == s.batch * chunks * (mla ? 3 : 2));

  // Backward from the same (host) output on both sides.
  o.sync_ref(c);
  gemm_attention_backward(x, s, operands(q.dv(), k.dv(), kr.dv(), v.dv()), o.dv(), dout.dv(), stats,
                          operands(dq.dv(), dk.dv(), dkr.dv(), dv.dv()));
  c.attention_backward(s, operands(q.cv(), k.cv(), kr.cv(), v.cv()), o.cv(), dout.cv(), stats_ref,
                       operands(dq.cv(), dk.cv(), dkr.cv(), dv.cv()));
  check_close(dq.dv(), c, dq.ref, 3e-2, "dq");
  check_close(dk.dv(), c, dk.ref, 3e-2, mla ? "dkv (dk_nope and dv)" : "dk");
  if (mla) {
    check_close(dkr.dv(), c, dkr.ref, 3e-2, "dkrope (the heads' sum)");
  } else {
    check_close(dv.dv(), c, dv.ref, 1e-2, "dv");
  }
}

TEST_CASE(
    "batched-GEMM attention on the host: MLA's operands in place and plain, whole and "
    "one head per chunk") {
  for (bool mla : {true, false}) {
    for (bool causal : {true, false}) {
      run_case(mla, causal, std::size_t{1} << 30);
      run_case(mla, causal, 1);  // one head per chunk: the rope key's sum spans the chunks
    }
  }
}

TEST_CASE("row_major_batched: row-major C = op(A) op(B) as cuBLAS's column-major C^T") {
  // A 2 x 3 times B 3 x 2 (row-major), no transposes: cuBLAS gets B first, m = n = 2, k = 3.
  const GemmCall g =
      row_major_batched(false, false, 2, 2, 3, 1.0f, Operand{nullptr, CUDA_R_32F, 3, 6},
                        Operand{nullptr, CUDA_R_32F, 2, 0}, 0.0f, nullptr, CUDA_R_32F, 2, 4, 5);
  CHECK(g.op_a == CUBLAS_OP_N);
  CHECK(g.m == 2);
  CHECK(g.k == 3);
  CHECK(g.lda == 2);  // B's ld
  CHECK(g.ldb == 3);  // A's ld
  CHECK(g.stride_a == 0);
  CHECK(g.stride_b == 6);
  CHECK(g.batch == 5);
  CHECK_THROWS_AS(row_major_batched(false, false, 2, 2, 3, 1.0f, Operand{nullptr, CUDA_R_32F, 3, 6},
                                    Operand{nullptr, CUDA_R_32F, 2, 0}, 0.0f, nullptr, CUDA_R_32F,
                                    std::int64_t{1} << 32, 4, 5),
                  RuntimeError);
}

}  // namespace
}  // namespace moebench::cuda
