// The cuda backend's device selection, memory, transfers and synchronisation.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "harness/backends/cuda/cuda_backend.hpp"

namespace moebench {

namespace {

std::string cuda_version_string(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string uuid_string(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  std::snprintf(s, sizeof(s),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

int visible_device_count() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // not sticky; leave the runtime clean for the message below
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    std::ostringstream os;
    os << "backend 'cuda': no CUDA device is visible ("
       << (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices")
       << (visible ? std::string("; CUDA_VISIBLE_DEVICES=") + visible : std::string())
       << "); use --backend cpu on a machine without a GPU";
    throw UsageError(os.str());
  }
  return count;
}

// Frees a tensor's memory on the compute stream, after the work queued there (the step may drop
// a buffer that queued work still reads; a communication lane that reads it was waited for on
// that stream before). Once the backend is gone, synchronously. Statuses are ignored: a deleter
// cannot throw, an earlier fault is reported by the call that meets it, and at exit the runtime
// may already be unloading.
void release_device_memory(const std::shared_ptr<cuda::AllocStream>& on, void* p) {
  (void)cudaSetDevice(on->device);
  if (on->stream != nullptr) {
    (void)cudaFreeAsync(p, on->stream);
  } else {
    (void)cudaFree(p);
  }
}

std::string allocation_failure(std::size_t bytes, int device, cudaError_t e) {
  std::size_t free_bytes = 0, total_bytes = 0;
  (void)cudaMemGetInfo(&free_bytes, &total_bytes);
  std::ostringstream os;
  os << "cannot allocate " << bytes << " bytes on device " << device << ": "
     << cudaGetErrorString(e) << ", " << free_bytes << " of " << total_bytes
     << " bytes free outside the memory pool";
  return os.str();
}

}  // namespace

namespace cuda {

// Copies `rows` rows of `width` bytes between pitched buffers; one linear copy when both sides
// are dense (the flat n x 1 parameter tensors would otherwise be millions of 4-byte rows).
void copy_rows(void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
               std::size_t width, std::size_t rows, cudaMemcpyKind kind, cudaStream_t stream) {
  if (rows == 1 || (dpitch == width && spitch == width)) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, width * rows, kind, stream));
  } else {
    CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, stream));
  }
}

}  // namespace cuda

int cuda_device_for_rank(int local_rank) {
  MB_CHECK(local_rank >= 0, "local rank " << local_rank);
  return local_rank % visible_device_count();
}

DeviceInfo cuda_device_info(int ordinal) {
  DeviceInfo info;
  info.visible_devices = visible_device_count();
  MB_CHECK(ordinal >= 0 && ordinal < info.visible_devices,
           "CUDA device " << ordinal << " of " << info.visible_devices);
  info.ordinal = ordinal;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  info.name = prop.name;
  info.uuid = uuid_string(prop.uuid);
  char bus[32] = {};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), ordinal));
  info.pci_bus_id = bus;
  info.total_memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  info.compute_capability_major = prop.major;
  info.compute_capability_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.l2_cache_bytes = prop.l2CacheSize;
  int v = 0;
  CUDA_CHECK(cudaDriverGetVersion(&v));
  info.driver_cuda_version = cuda_version_string(v);
  CUDA_CHECK(cudaRuntimeGetVersion(&v));
  info.runtime_version = cuda_version_string(v);
  const std::size_t lt = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  info.cublas_version = std::to_string(lt / 10000) + "." + std::to_string((lt / 100) % 100) + "." +
                        std::to_string(lt % 100);
  return info;
}

std::unique_ptr<Compute> make_cuda_compute(int local_rank) {
  return std::make_unique<cuda::CudaCompute>(cuda_device_for_rank(local_rank));
}

namespace cuda {

bool is_float(DType t) {
  return t == DType::f32 || t == DType::bf16;
}

DeviceScratch::~DeviceScratch() {
  if (data_ != nullptr) (void)cudaFree(data_);  // at teardown; nothing to report
}

void* DeviceScratch::get(std::size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_ && data_ != nullptr) return data_;
  if (data_ != nullptr) {
    CUDA_CHECK(cudaFreeAsync(data_, stream));  // after the work queued so far
    data_ = nullptr;
    bytes_ = 0;
  }
  const std::size_t mib = std::size_t{1} << 20;
  const std::size_t want = std::max<std::size_t>(mib, (bytes + mib - 1) / mib * mib);
  const cudaError_t e = cudaMallocAsync(&data_, want, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    data_ = nullptr;
    int device = 0;
    (void)cudaGetDevice(&device);
    throw RuntimeError("cuda backend: scratch memory: " + allocation_failure(want, device, e));
  }
  bytes_ = want;
  return data_;
}

HostStaging::~HostStaging() {
  for (Slab& s : slabs_) {  // teardown: the backend synchronised its stream first
    if (s.done != nullptr) (void)cudaEventDestroy(s.done);
    if (s.data != nullptr) (void)cudaFreeHost(s.data);
  }
}

void HostStaging::copy_to_device(void* dst, const void* host, std::size_t bytes,
                                 cudaStream_t stream) {
  if (bytes > kLargest) {
    CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream));
    return;
  }
  Slab* free_slab = nullptr;
  for (Slab& s : slabs_) {
    if (s.bytes < bytes) continue;
    const cudaError_t q = cudaEventQuery(s.done);
    if (q == cudaErrorNotReady) continue;
    CUDA_CHECK(q);
    if (free_slab == nullptr || s.bytes < free_slab->bytes) free_slab = &s;  // the smallest fit
  }
  if (free_slab == nullptr) {
    constexpr std::size_t kSmallest = std::size_t{64} << 10;
    Slab s;
    s.bytes = std::max(kSmallest, std::bit_ceil(bytes));
    CUDA_CHECK(cudaHostAlloc(&s.data, s.bytes, cudaHostAllocDefault));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    slabs_.push_back(s);
    free_slab = &slabs_.back();
  }
  std::memcpy(free_slab->data, host, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, free_slab->data, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(free_slab->done, stream));
}

CudaCompute::CudaCompute(int device) : device_(device) {
  CUDA_CHECK(cudaSetDevice(device_));
  info_ = cuda_device_info(device_);
  multiprocessors_ = std::max(1, info_.multiprocessors);
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  int pools = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_));
  if (pools == 0) {
    throw RuntimeError("cuda backend: device " + std::to_string(device_) + " (" + info_.name +
                       ") has no stream-ordered memory pools (cudaMallocAsync), which the step "
                       "allocates from; a driver for CUDA 11.2 or newer has them");
  }
  // The pool keeps what the step frees rather than handing it back to the driver at every
  // synchronisation: after the first step, allocations are served from it.
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_));
  std::uint64_t keep_all = UINT64_MAX;
  CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  alloc_stream_ = std::make_shared<AllocStream>(AllocStream{device_, stream_});
  // Null where cuDNN cannot run (not built in, or no handle): attention then runs as batched
  // GEMMs under auto, and --attention-impl cudnn is refused with the reason, rather than every
  // run failing here.
  cudnn_ = CudnnAttention::create(stream_, cudnn_unavailable_);
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  gemm_ = std::make_unique<GemmEngine>(stream_, cublas_);
  CUDA_CHECK(
      cudaHostAlloc(reinterpret_cast<void**>(&error_host_), sizeof(int), cudaHostAllocMapped));
  *error_host_ = kNoError;
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&error_device_), error_host_, 0));
}

// Statuses are ignored here: a destructor cannot throw, and a fault was already reported.
CudaCompute::~CudaCompute() {
  (void)cudaSetDevice(device_);
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  if (alloc_stream_ != nullptr) alloc_stream_->stream = nullptr;  // later frees: synchronous
  cudnn_.reset();
  gemm_.reset();
  if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  if (error_host_ != nullptr) (void)cudaFreeHost(error_host_);
  for (cudaEvent_t e : marks_) (void)cudaEventDestroy(e);
}

int CudaCompute::mark() {
  if (marks_used_ == marks_.size()) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    marks_.push_back(e);
  }
  CUDA_CHECK(cudaEventRecord(marks_[marks_used_], stream_));
  return static_cast<int>(marks_used_++);
}

std::vector<double> CudaCompute::mark_times_s() {
  std::vector<double> t;
  t.reserve(marks_used_);
  for (std::size_t i = 0; i < marks_used_; ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[0], marks_[i]));
    t.push_back(1e-3 * static_cast<double>(ms));
  }
  return t;
}

unsigned CudaCompute::blocks_for(std::int64_t n, int threads) const {
  const std::int64_t want = (n + threads - 1) / threads;
  const std::int64_t cap = static_cast<std::int64_t>(multiprocessors_) * 32;
  return static_cast<unsigned>(std::clamp<std::int64_t>(want, 1, cap));
}

Tensor CudaCompute::do_alloc(std::int64_t rows, std::int64_t cols, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * dtype_size(dtype);
  CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  // Never zero bytes, so an empty tensor still has storage (Tensor::empty() means "none").
  const cudaError_t e = cudaMallocAsync(&p, std::max<std::size_t>(bytes, 256), stream_);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky
    std::ostringstream os;
    os << "cuda backend: a " << rows << "x" << cols << " " << dtype_name(dtype)
       << " tensor: " << allocation_failure(bytes, device_, e);
    throw RuntimeError(os.str());
  }
  std::shared_ptr<AllocStream> on = alloc_stream_;
  return Tensor(std::shared_ptr<void>(p, [on](void* q) { release_device_memory(on, q); }), rows,
                cols, dtype);
}

void CudaCompute::do_upload(const float* host, const Mat& dst) {
  if (dst.numel() == 0) return;
  const std::size_t row_bytes = static_cast<std::size_t>(dst.cols) * sizeof(float);
  // Through pinned staging (HostStaging), so `host` may be reused at once and the host never
  // blocks; the conversion to bf16 then runs on the stream.
  const std::size_t bytes = static_cast<std::size_t>(dst.numel()) * sizeof(float);
  if (dst.dtype == DType::f32 && dst.contiguous()) {
    staging_.copy_to_device(dst.data, host, bytes, stream_);
    return;
  }
  void* staged = scratch_.get(bytes, stream_);
  staging_.copy_to_device(staged, host, bytes, stream_);
  const Mat dense{staged, dst.rows, dst.cols, dst.cols, DType::f32};
  if (dst.dtype == DType::f32) {
    copy_rows(dst.data, static_cast<std::size_t>(dst.ld) * sizeof(float), staged, row_bytes,
              row_bytes, static_cast<std::size_t>(dst.rows), cudaMemcpyDeviceToDevice, stream_);
  } else {
    convert(dense, dst);
  }
}

// The routing indices the step uploads after every dispatch: pinned staging, as above.
void CudaCompute::do_upload_i32(const std::int32_t* host, const Mat& dst) {
  if (dst.numel() == 0) return;
  const std::size_t row_bytes = static_cast<std::size_t>(dst.cols) * sizeof(std::int32_t);
  const std::size_t bytes = static_cast<std::size_t>(dst.numel()) * sizeof(std::int32_t);
  if (dst.contiguous()) {
    staging_.copy_to_device(dst.data, host, bytes, stream_);
    return;
  }
  void* staged = scratch_.get(bytes, stream_);
  staging_.copy_to_device(staged, host, bytes, stream_);
  copy_rows(dst.data, static_cast<std::size_t>(dst.ld) * sizeof(std::int32_t), staged, row_bytes,
            row_bytes, static_cast<std::size_t>(dst.rows), cudaMemcpyDeviceToDevice, stream_);
}

void CudaCompute::do_download(const Mat& src, float* host) {
  if (src.numel() > 0) {
    const std::size_t row_bytes = static_cast<std::size_t>(src.cols) * sizeof(float);
    if (src.dtype == DType::f32) {
      copy_rows(host, row_bytes, src.data, static_cast<std::size_t>(src.ld) * sizeof(float),
                row_bytes, static_cast<std::size_t>(src.rows), cudaMemcpyDeviceToHost, stream_);
    } else {
      const std::size_t bytes = static_cast<std::size_t>(src.numel()) * sizeof(float);
      void* staged = scratch_.get(bytes, stream_);
      convert(src, Mat{staged, src.rows, src.cols, src.cols, DType::f32});
      CUDA_CHECK(cudaMemcpyAsync(host, staged, bytes, cudaMemcpyDeviceToHost, stream_));
    }
  }
  synchronize();
}

void CudaCompute::do_download_i32(const Mat& src, std::int32_t* host) {
  if (src.numel() > 0) {
    const std::size_t row_bytes = static_cast<std::size_t>(src.cols) * sizeof(std::int32_t);
    copy_rows(host, row_bytes, src.data, static_cast<std::size_t>(src.ld) * sizeof(std::int32_t),
              row_bytes, static_cast<std::size_t>(src.rows), cudaMemcpyDeviceToHost, stream_);
  }
  synchronize();
}

void CudaCompute::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  check_device_errors();
}

void CudaCompute::check_device_errors() {
  const int code = *static_cast<volatile int*>(error_host_);
  if (code == kNoError) return;
  *error_host_ = kNoError;
  const char* op = code == kBadGatherIndex         ? "gather_rows"
                   : code == kBadScatterIndex      ? "scatter_add_rows"
                   : code == kBadGatherScaledIndex ? "gather_rows_scaled"
                   : code == kBadDotIndex          ? "gathered_row_dot"
                   : code == kBadLabel             ? "cross_entropy"
                                                   : "an op";
  throw RuntimeError(std::string("cuda backend: ") + op +
                     " met an index outside its range (a row of its source or destination, or "
                     "a label outside the vocabulary; detected on the device, the element was "
                     "skipped)");
}

std::int64_t CudaCompute::memory_available_bytes() const {
  CUDA_CHECK(cudaSetDevice(device_));
  std::size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // The pool keeps what the step freed (the release threshold above), which the driver counts as
  // used; this process's next allocations are served from it first.
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_));
  std::uint64_t reserved = 0, used = 0;
  CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  const std::uint64_t idle = reserved > used ? reserved - used : 0;
  return static_cast<std::int64_t>(free_bytes + idle);
}

// What the backend will still allocate for itself: at most the attention score budget (one
// head's scores may exceed it: that is counted in the memory estimate's workspace). The cuBLASLt
// workspace, the CUDA context and NCCL's buffers exist before the memory check, so the free
// memory it reads already lacks them; the FP8 operand copies are in the estimate's workspace.
std::int64_t CudaCompute::reserved_bytes() const {
  return static_cast<std::int64_t>(score_budget_);
}

void CudaCompute::do_zero(const Mat& x) {
  if (x.numel() == 0) return;
  const std::size_t elem = dtype_size(x.dtype);
  if (x.contiguous()) {
    CUDA_CHECK(cudaMemsetAsync(x.data, 0, static_cast<std::size_t>(x.numel()) * elem, stream_));
  } else {
    CUDA_CHECK(cudaMemset2DAsync(x.data, static_cast<std::size_t>(x.ld) * elem, 0,
                                 static_cast<std::size_t>(x.cols) * elem,
                                 static_cast<std::size_t>(x.rows), stream_));
  }
}

void CudaCompute::do_copy(const Mat& src, const Mat& dst) {
  if (src.numel() == 0) return;
  if (src.dtype != dst.dtype) {  // float to float: the interface checked it
    convert(src, dst);
    return;
  }
  const std::size_t elem = dtype_size(src.dtype);
  copy_rows(dst.data, static_cast<std::size_t>(dst.ld) * elem, src.data,
            static_cast<std::size_t>(src.ld) * elem, static_cast<std::size_t>(src.cols) * elem,
            static_cast<std::size_t>(src.rows), cudaMemcpyDeviceToDevice, stream_);
}

std::string CudaCompute::gemm_path() const {
  const std::string bf16 =
      "cublasLt: bf16 A/B, bf16 or fp32 C, fp32 compute, the heuristic's algorithm per shape "
      "class (m and k to the next power of two), checked for each new shape (" +
      std::to_string(gemm_->heuristic_queries()) + " heuristic queries, " +
      std::to_string(gemm_->algo_reuses()) + " shapes reused their class's algorithm; " +
      std::to_string(gemm_->lt_calls()) + " calls, " + std::to_string(gemm_->fallback_calls()) +
      " by cublasGemmEx where cublasLt had no algorithm; plans cublasLt refused: " +
      gemm_->refusals() +
      (grouped_impl_ == GroupedGemmImpl::grouped
           ? "; " + std::to_string(grouped_loop_problems_) +
                 " problems of --grouped-gemm grouped calls ran here, one GEMM each: cuBLAS's "
                 "grouped GEMM takes no C wider than bf16"
           : std::string()) +
      ")";
  if (linear_precision_ != LinearPrecision::fp8) return bf16;
  const std::string scaling = fp8_recipe_ == Fp8Recipe::tensor ? "per-tensor scaling (SCALAR_32F)"
                              : fp8_recipe_ == Fp8Recipe::blockwise
                                  ? "blockwise scaling (VEC128_32F activations, "
                                    "BLK128x128_32F weights)"
                                  : "mxfp8 scaling (VEC32_UE8M0, 1x32 tiles)";
  return "linear layers: cublasLt fp8 e4m3 " + std::string(to_string(fp8_recipe_)) + " recipe, " +
         scaling +
         " (fp32 compute, no fast accumulation, K padded; weights quantised once per step; "
         "shapes without an fp8 algorithm run bf16); router and attention: " +
         bf16;
}

std::string CudaCompute::grouped_gemm_path() const {
  if (grouped_impl_ == GroupedGemmImpl::grouped && linear_precision_ != LinearPrecision::fp8) {
    return "one cublasGemmGroupedBatchedEx over the local experts where A, B and C are bf16 "
           "(fp32 compute; " +
           std::to_string(grouped_calls_) + " calls), one cublasLt GEMM per " +
           "problem otherwise (" + std::to_string(grouped_loop_problems_) + " problems" +
           (grouped_loop_why_.empty() ? std::string() : ", the last because " + grouped_loop_why_) +
           ")";
  }
  return std::string("one cublasLt GEMM per problem, in order on the compute stream") +
         (linear_precision_ == LinearPrecision::fp8
              ? " (fp8 e4m3, the recipe's scales per problem's operands)"
              : "");
}

std::optional<KernelCalls> CudaCompute::kernel_calls() const {
  KernelCalls k;
  k.attention_cudnn = cudnn_attention_calls_;
  k.attention_gemm = gemm_attention_calls_;
  k.attention_cudnn_refused = cudnn_ ? cudnn_->refused() : 0;
  k.gemm_cublaslt = gemm_->lt_calls();
  k.gemm_fallbacks = gemm_->fallback_calls();
  k.grouped_calls = grouped_calls_;
  k.grouped_loop_problems = grouped_loop_problems_;
  k.fp8 = fp8_gemm_counts();
  return k;
}

// What ran, counted per call: a shape cuDNN refused runs the batched GEMMs under auto.
std::string CudaCompute::attention_path() const {
  const std::string gemm =
      "cublas strided-batched bf16 GEMMs per head + fused causal softmax kernels (fp32 scores, "
      "log-sum-exp saved)";
  const std::string cudnn =
      cudnn_ ? "cuDNN fused flash attention (SDPA, bf16, fp32 softmax; " + cudnn_->versions() + ")"
             : std::string();
  if (cudnn_attention_calls_ > 0 && gemm_attention_calls_ == 0) return cudnn;
  if (cudnn_attention_calls_ > 0) {
    return cudnn + " where cuDNN took the shape (" + std::to_string(cudnn_attention_calls_) +
           " calls), else " + gemm + " (" + std::to_string(gemm_attention_calls_) + " calls)";
  }
  if (attention_impl_ != AttentionImpl::gemm && gemm_attention_calls_ == 0 && cudnn_) {
    return cudnn + " (no attention has run yet)";
  }
  // Only the batched GEMMs: say why cuDNN did not run.
  if (attention_impl_ == AttentionImpl::gemm) return gemm + " (--attention-impl gemm)";
  if (!cudnn_) return gemm + " (cuDNN unavailable: " + cudnn_unavailable_ + ")";
  if (cudnn_->refused() == 0) return gemm + " (q is not one block per head: cuDNN not asked)";
  return gemm + " (cuDNN refused " + std::to_string(cudnn_->refused()) +
         " graph(s), the last because: " + cudnn_->last_refusal() + ")";
}

void CudaCompute::set_attention_impl(AttentionImpl a) {
  if (a == AttentionImpl::cudnn && !cudnn_) {
    throw UsageError("--attention-impl cudnn: cuDNN attention cannot run here: " +
                     cudnn_unavailable_ + "; use --attention-impl auto or gemm");
  }
  attention_impl_ = a;
}

bool CudaCompute::use_cudnn(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v,
                            const Mat& out, const Mat& stats) {
  if (attention_impl_ == AttentionImpl::gemm || !cudnn_) return false;
  if (cudnn_->supports(s, q, k, v, out, stats)) return true;
  if (attention_impl_ == AttentionImpl::cudnn) {
    throw UsageError("--attention-impl cudnn: cuDNN has no flash attention plan for " +
                     std::to_string(s.batch) + " x " + std::to_string(s.seq_len) + " tokens, " +
                     std::to_string(s.heads) + " heads of " + std::to_string(s.qk_dim) + "/" +
                     std::to_string(s.v_dim) + " (" + cudnn_->last_refusal() +
                     "); use --attention-impl auto or gemm");
  }
  return false;
}

}  // namespace cuda
}  // namespace moebench
