// GEMMs of the cuda backend through cuBLASLt: BF16 A and B, BF16 or FP32 C, FP32 accumulation.
// The step's matrices are row-major; cuBLASLt's are column-major, and a row-major matrix is the
// column-major view of its transpose, so row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is our B and its second our A.
//
// Plans: the descriptors are made once per exact shape; the algorithm once per shape class
// (gemm_size_class of m and k, everything else exact). The first shape of a class gets the
// heuristic's choice; a later one (an expert's new token count under router, random or zipf
// routing) reuses it once cublasLtMatmulAlgoCheck accepts it, so a new token count costs a check
// on the host, not a heuristic query.
//
// Grouped GEMMs (the experts): --grouped-gemm loop runs one cuBLASLt call per problem, in order
// on the stream, exactly the dense path the roofline reference measures; grouped runs one
// cublasGemmGroupedBatchedEx (below), where cuBLAS picks the kernels itself, for the calls whose
// dtypes it takes (grouped_gemm_path.hpp: BF16 A, B and C), the loop for the others.
#include <cstring>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/grouped_gemm_path.hpp"
#include "harness/compute/gemm_shape.hpp"
#include "harness/core/hash.hpp"

namespace moebench::cuda {

namespace {

// cuBLASLt's recommended workspace for Hopper and Blackwell.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
// More distinct shapes than this (routing that changes every step) starts the cache over.
constexpr std::size_t kMaxPlans = 4096;

// The alignment the kernels may assume: the lowest set bit of the address and of the row
// pitch in bytes (every row of a strided view starts at one), capped at 256.
std::uint32_t alignment_of(const Mat& m) {
  const auto address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(m.data));
  const auto pitch = static_cast<std::uint64_t>(m.ld) * dtype_size(m.dtype);
  const std::uint64_t v = address | pitch | 256;
  return static_cast<std::uint32_t>(v & (~v + 1));
}

cudaDataType_t cuda_type(DType t) {
  return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, T value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)));
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof(value)));
}

// Destroys a preference on every path out of plan().
struct PreferenceGuard {
  cublasLtMatmulPreference_t p = nullptr;
  ~PreferenceGuard() {
    if (p != nullptr) (void)cublasLtMatmulPreferenceDestroy(p);
  }
};

}  // namespace

std::size_t GemmEngine::KeyHash::operator()(const Key& k) const {
  std::size_t h = 0;
  auto mix = [&h](std::uint64_t v) { hash_mix(h, v); };
  for (std::int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc}) mix(static_cast<std::uint64_t>(v));
  mix((k.trans_a ? 1u : 0u) | (k.trans_b ? 2u : 0u) | (k.fp8 ? 4u : 0u) |
      (static_cast<unsigned>(k.c_dtype) << 3));
  mix((static_cast<std::uint64_t>(k.align_a) << 32) ^
      (static_cast<std::uint64_t>(k.align_b) << 16) ^ k.align_c);
  mix((static_cast<std::uint64_t>(k.scale_mode_a) << 8) |
      static_cast<std::uint64_t>(k.scale_mode_b));
  return h;
}

GemmEngine::GemmEngine(cudaStream_t stream, cublasHandle_t fallback)
    : stream_(stream), fallback_(fallback) {
  CUBLAS_CHECK(cublasLtCreate(&lt_));
  CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspace_bytes_ = kWorkspaceBytes;
}

// Statuses are ignored: a destructor cannot throw.
GemmEngine::~GemmEngine() {
  for (auto& [key, plan] : plans_) destroy(plan);
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
}

void GemmEngine::destroy(Plan& p) {
  if (p.a != nullptr) (void)cublasLtMatrixLayoutDestroy(p.a);
  if (p.b != nullptr) (void)cublasLtMatrixLayoutDestroy(p.b);
  if (p.c != nullptr) (void)cublasLtMatrixLayoutDestroy(p.c);
  if (p.desc != nullptr) (void)cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

const GemmEngine::Plan& GemmEngine::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  if (plans_.size() >= kMaxPlans) {
    // The plans are only descriptors; no queued work refers to them. The class algorithms stay.
    for (auto& [k, p] : plans_) destroy(p);
    plans_.clear();
  }
  Plan& p = plans_[key];
  try {
    try {
      describe(key, p);
    } catch (const RuntimeError& e) {
      // An FP8 descriptor this cuBLAS does not take (a scale mode it lacks): the caller's BF16
      // path, named and counted. A BF16 descriptor that fails is the run's end.
      if (!key.fp8) throw;
      destroy(p);
      p.use_fallback = true;
      const std::string what = e.what();
      const auto at = what.find("CUBLAS_STATUS_");
      ++refusals_["fp8 " + (at == std::string::npos
                                ? std::string("descriptor")
                                : what.substr(at, what.find_first_of(" (", at) - at))];
      return p;
    }
    Key class_key = key;
    class_key.m = gemm_size_class(key.m);
    class_key.k = gemm_size_class(key.k);
    if (auto it = class_algos_.find(class_key);
        it != class_algos_.end() && accepts(p, it->second)) {
      p.algo = it->second;
      ++algo_reuses_;
      return p;
    }
    choose(key, p);
    if (!p.use_fallback && class_algos_.size() < kMaxPlans) class_algos_.emplace(class_key, p.algo);
  } catch (...) {
    destroy(p);
    plans_.erase(key);
    throw;
  }
  return p;
}

void GemmEngine::describe(const Key& key, Plan& p) const {
  const cublasOperation_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A = B
  const cublasOperation_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B = A
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  // Stored column-major shapes: a row-major R x C view with leading dimension ld is a
  // column-major C x R matrix with the same ld.
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const cudaDataType_t ab_type = key.fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  if (key.fp8) {
    // Hopper's FP8 tensor cores accumulate with limited precision unless cuBLASLt promotes
    // partial sums to FP32 registers (DeepSeek-V3 sec. 3.3.2 promotes every 128 elements for
    // the same reason): fast accumulation stays off.
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<std::int8_t>(0));
    // Block scaling (--fp8-recipe blockwise, mxfp8): cuBLASLt's A is our B_q, its B our A_q.
    if (key.scale_mode_a != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F ||
        key.scale_mode_b != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) {
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
               static_cast<std::int32_t>(key.scale_mode_b));
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
               static_cast<std::int32_t>(key.scale_mode_a));
    }
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab_type, u(key.trans_b ? key.k : key.n),
                                          u(key.trans_b ? key.n : key.k), key.ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab_type, u(key.trans_a ? key.m : key.k),
                                          u(key.trans_a ? key.k : key.m), key.lda));
  CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&p.c, cuda_type(key.c_dtype), u(key.n), u(key.m), key.ldc));
}

// A class's algorithm for this exact shape: cuBLASLt checks it (host only, no heuristic search)
// and it fits the workspace.
bool GemmEngine::accepts(const Plan& p, const cublasLtMatmulAlgo_t& algo) const {
  cublasLtMatmulHeuristicResult_t result;
  std::memset(&result, 0, sizeof(result));
  const cublasStatus_t s = cublasLtMatmulAlgoCheck(lt_, p.desc, p.a, p.b, p.c, p.c, &algo, &result);
  return s == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= workspace_bytes_;
}

void GemmEngine::choose(const Key& key, Plan& p) {
  PreferenceGuard pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
           static_cast<std::uint64_t>(workspace_bytes_));
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);

  cublasLtMatmulHeuristicResult_t result;
  std::memset(&result, 0, sizeof(result));
  int returned = 0;
  ++heuristic_queries_;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref.p,
                                                          1, &result, &returned);
  // Any status but success, or no algorithm (an odd shape or alignment no cuBLASLt kernel takes,
  // or a descriptor this cuBLAS refuses): the fallback, with why counted.
  const cublasStatus_t why = s != CUBLAS_STATUS_SUCCESS ? s : result.state;
  if (why != CUBLAS_STATUS_SUCCESS || returned == 0) {
    p.use_fallback = true;
    ++refusals_[std::string(key.fp8 ? "fp8 " : "bf16 ") +
                (why != CUBLAS_STATUS_SUCCESS ? cublasGetStatusName(why) : "no algorithm")];
    return;
  }
  p.algo = result.algo;
}

std::string GemmEngine::refusals() const {
  std::string out;
  for (const auto& [why, plans] : refusals_) {
    out += (out.empty() ? "" : ", ") + why + " x " + std::to_string(plans);
  }
  return out.empty() ? "none" : out;
}

void GemmEngine::run(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                     float beta, const Mat& c) {
  MB_CHECK(a.dtype == DType::bf16 && b.dtype == DType::bf16 && is_float(c.dtype),
           "gemm engine: A " << dtype_name(a.dtype) << ", B " << dtype_name(b.dtype) << ", C "
                             << dtype_name(c.dtype));
  Key key{};
  key.m = c.rows;
  key.n = c.cols;
  key.k = trans_a ? a.rows : a.cols;
  key.lda = a.ld;
  key.ldb = b.ld;
  key.ldc = c.ld;
  key.trans_a = trans_a;
  key.trans_b = trans_b;
  key.c_dtype = c.dtype;
  key.align_a = alignment_of(a);
  key.align_b = alignment_of(b);
  key.align_c = alignment_of(c);
  key.fp8 = false;
  const Plan& p = plan(key);
  if (p.use_fallback) {
    ++fallback_calls_;
    CUBLAS_CHECK(cublasGemmEx(fallback_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, cublas_int(key.n, "gemm N"),
                              cublas_int(key.m, "gemm M"), cublas_int(key.k, "gemm K"), &alpha,
                              b.data, CUDA_R_16BF, cublas_int(b.ld, "ldb"), a.data, CUDA_R_16BF,
                              cublas_int(a.ld, "lda"), &beta, c.data, cuda_type(c.dtype),
                              cublas_int(c.ld, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  ++lt_calls_;
  CUBLAS_CHECK(cublasLtMatmul(lt_, p.desc, &alpha, b.data, p.a, a.data, p.b, &beta, c.data, p.c,
                              c.data, p.c, &p.algo, workspace_, workspace_bytes_, stream_));
}

const GemmEngine::Plan* GemmEngine::fp8_plan(std::int64_t m, std::int64_t n, std::int64_t k,
                                             const Mat& c, int scale_mode_a, int scale_mode_b) {
  MB_CHECK(k % 16 == 0 && is_float(c.dtype), "fp8 gemm: k " << k << ", C " << dtype_name(c.dtype));
  // Row-major C = A_q B_q^T with both copies K-major: in the generic key that is trans_a = false
  // (A_q is m x k) and trans_b = true (B_q is n x k), i.e. cuBLASLt's "TN" (its A = our B_q,
  // transposed; its B = our A_q, not transposed), the only layout FP8 takes on Hopper.
  Key key{};
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = k;
  key.ldb = k;
  key.ldc = c.ld;
  key.trans_a = false;
  key.trans_b = true;
  key.c_dtype = c.dtype;
  key.align_a = 256;  // the copies are carved at 256-byte boundaries with ld a multiple of 16
  key.align_b = 256;
  key.align_c = alignment_of(c);
  key.fp8 = true;
  key.scale_mode_a = scale_mode_a;
  key.scale_mode_b = scale_mode_b;
  const Plan& p = plan(key);
  return p.use_fallback ? nullptr : &p;
}

void GemmEngine::run_fp8(const Plan& p, float alpha, const void* a_q, const void* b_q,
                         const void* descale_a, const void* descale_b, float beta, const Mat& c) {
  // The scale pointers change with every call (each GEMM's scalars live in scratch); the
  // descriptor is host data read when the call is enqueued, so setting them here is safe.
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, descale_b);
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, descale_a);
  CUBLAS_CHECK(cublasLtMatmul(lt_, p.desc, &alpha, b_q, p.a, a_q, p.b, &beta, c.data, p.c, c.data,
                              p.c, &p.algo, workspace_, workspace_bytes_, stream_));
}

void CudaCompute::do_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a_in, const Mat& b_in,
                          float beta, const Mat& c) {
  Mat a = a_in;
  Mat b = b_in;
  const auto [m, n, k] = gemm_shape(trans_a, trans_b, a, b, c);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    scale_in_place(c, beta);  // an empty sum (an expert with no tokens in a weight gradient)
    return;
  }
  // The library multiplies BF16 by BF16: an FP32 operand (the router's logit gradient) is
  // rounded to BF16 into scratch first, as a BF16 trainer would store it.
  const std::size_t a_bytes =
      a.dtype == DType::f32 ? Carver::round(static_cast<std::size_t>(a.numel()) * 2) : 0;
  const std::size_t b_bytes =
      b.dtype == DType::f32 ? Carver::round(static_cast<std::size_t>(b.numel()) * 2) : 0;
  if (a_bytes + b_bytes > 0) {
    Carver carve(scratch_.get(a_bytes + b_bytes, stream_));
    if (a_bytes > 0) {
      const Mat a16{carve.take<std::uint16_t>(a.numel()), a.rows, a.cols, a.cols, DType::bf16};
      convert(a, a16);
      a = a16;
    }
    if (b_bytes > 0) {
      const Mat b16{carve.take<std::uint16_t>(b.numel()), b.rows, b.cols, b.cols, DType::bf16};
      convert(b, b16);
      b = b16;
    }
  }
  gemm_->run(trans_a, trans_b, alpha, a, b, beta, c);
}

// One grouped call for the experts: row-major C_i = op(A_i) op(B_i) is column-major
// C_i^T = op(B_i)^T op(A_i)^T, as in GemmEngine::run, each problem its own group of one (the
// experts' row counts differ). cuBLAS picks its kernels itself, so a new token count costs no
// heuristic query. The pointer arrays go to the device through the pinned staging and a scratch
// buffer of their own, ordered on the stream like everything else; the host arrays are read when
// the call is enqueued.
void CudaCompute::do_grouped_gemm(bool trans_a, bool trans_b, float alpha,
                                  std::span<const GemmProblem> p, float beta) {
  GroupedGemmChoice choice{grouped_impl_ == GroupedGemmImpl::grouped, ""};
  DType c_dtype = DType::bf16;
  std::vector<const GemmProblem*> run;
  for (const GemmProblem& g : p) {
    const auto [m, n, k] = gemm_shape(trans_a, trans_b, g.a, g.b, g.c);
    if (m == 0 || n == 0) continue;
    if (k == 0) {
      scale_in_place(g.c, beta);  // an empty sum
      continue;
    }
    const GroupedGemmChoice one =
        grouped_gemm_choice(grouped_impl_, g.a.dtype, g.b.dtype, g.c.dtype);
    if (choice.grouped && !one.grouped) choice = one;
    if (run.empty()) c_dtype = g.c.dtype;
    if (choice.grouped && g.c.dtype != c_dtype) choice = {false, "the problems' C dtypes differ"};
    run.push_back(&g);
  }
  if (!choice.grouped || run.size() < 2) {
    if (grouped_impl_ == GroupedGemmImpl::grouped) {
      grouped_loop_problems_ += static_cast<std::int64_t>(run.size());
      if (!choice.grouped) grouped_loop_why_ = choice.why;
    }
    for (const GemmProblem* g : run) do_gemm(trans_a, trans_b, alpha, g->a, g->b, beta, g->c);
    return;
  }
  ++grouped_calls_;
  const std::size_t count = run.size();
  std::vector<cublasOperation_t> op_a(count, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  std::vector<cublasOperation_t> op_b(count, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  std::vector<int> ms(count), ns(count), ks(count), lda(count), ldb(count), ldc(count);
  std::vector<int> sizes(count, 1);
  std::vector<float> alphas(count, alpha), betas(count, beta);
  std::vector<const void*> pointers(3 * count);  // cuBLAS's A (our B), B (our A), C
  for (std::size_t i = 0; i < count; ++i) {
    const GemmProblem& g = *run[i];
    const auto [m, n, k] = gemm_shape(trans_a, trans_b, g.a, g.b, g.c);
    ms[i] = cublas_int(n, "grouped gemm N");
    ns[i] = cublas_int(m, "grouped gemm M");
    ks[i] = cublas_int(k, "grouped gemm K");
    lda[i] = cublas_int(g.b.ld, "ldb");
    ldb[i] = cublas_int(g.a.ld, "lda");
    ldc[i] = cublas_int(g.c.ld, "ldc");
    pointers[i] = g.b.data;
    pointers[count + i] = g.a.data;
    pointers[2 * count + i] = g.c.data;
  }
  const std::size_t bytes = pointers.size() * sizeof(void*);
  auto* device_pointers = static_cast<const void**>(group_pointers_.get(bytes, stream_));
  staging_.copy_to_device(device_pointers, pointers.data(), bytes, stream_);
  CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
      cublas_, op_a.data(), op_b.data(), ms.data(), ns.data(), ks.data(), alphas.data(),
      device_pointers, CUDA_R_16BF, lda.data(), device_pointers + count, CUDA_R_16BF, ldb.data(),
      betas.data(), const_cast<void* const*>(device_pointers + 2 * count), cuda_type(c_dtype),
      ldc.data(), static_cast<int>(count), sizes.data(), CUBLAS_COMPUTE_32F));
}

}  // namespace moebench::cuda
