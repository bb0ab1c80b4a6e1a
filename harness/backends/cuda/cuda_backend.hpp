// The cuda backend's class, shared by its .cu files (each defines a part of it): BF16 storage for
// activations, weights and gradients, FP32 where the step asks for it, i32 indices; one stream;
// GEMMs through cuBLASLt (gemm.cu), attention as batched cuBLAS GEMMs around fused softmax
// kernels (attention.cu), everything else in kernels.cu and rows.cu.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/backends/cuda/cuda_check.hpp"
#include "harness/backends/cuda/cuda_compute.hpp"
#include "harness/backends/cudnn/cudnn_attention.hpp"

namespace moebench::cuda {

bool is_float(DType t);

// Memory inside the step is stream-ordered (cudaMallocAsync and cudaFreeAsync on the compute
// stream, from the device's default pool, which keeps what is freed): no allocation or free
// synchronises the device, so nothing drains NCCL's streams behind the communicator's back, and
// a buffer freed while queued work still reads it is reused only after that work.
//
// The stream tensors are freed on, shared with each tensor's deleter: a tensor that outlives the
// backend (stream gone) is freed with a synchronous cudaFree instead.
struct AllocStream {
  int device = 0;
  cudaStream_t stream = nullptr;  // null once the backend is gone
};

// A device buffer that only grows, for an op's temporaries. An op takes all it needs with one
// get() (a later get() may move the buffer). Growing frees the old buffer on the stream, so work
// still reading it finishes first, and never waits on the host.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch();
  void* get(std::size_t bytes, cudaStream_t stream);
  std::size_t capacity() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Pinned host buffers that uploads copy through, so a host-to-device copy inside the step never
// comes from pageable memory (which may block the host until the stream reaches it, where a hung
// all-to-all would hang it unpolled). A slab is reused once the copy that last read it has
// completed (an event query, no wait); otherwise another is allocated. The host copies its data
// in first, so the caller's buffer is free at once, as with a pageable copy.
class HostStaging {
 public:
  HostStaging() = default;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  ~HostStaging();
  // Enqueues dst <- host (bytes) on the stream through a pinned slab.
  void copy_to_device(void* dst, const void* host, std::size_t bytes, cudaStream_t stream);
  std::size_t slabs() const { return slabs_.size(); }
  // Uploads larger than this (setup, not the step) copy from pageable memory directly.
  static constexpr std::size_t kLargest = std::size_t{16} << 20;

 private:
  struct Slab {
    void* data = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t done = nullptr;  // recorded after the copy that last read it
  };
  std::vector<Slab> slabs_;
};

// Hands out 256-byte aligned pieces of one scratch allocation.
class Carver {
 public:
  static std::size_t round(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(std::size_t count) {
    T* p = reinterpret_cast<T*>(base_ + offset_);
    offset_ += round(count * sizeof(T));
    return p;
  }

 private:
  char* base_;
  std::size_t offset_ = 0;
};

// cuBLASLt GEMMs on row-major views: one plan (descriptors and an algorithm) per shape,
// transposes, leading dimensions, dtypes and pointer alignments, kept for the run; the algorithm
// is the heuristic's for the first shape of its class (gemm_size_class of m and k), reused by the
// class's later shapes where cublasLtMatmulAlgoCheck accepts it (gemm.cu).
class GemmEngine {
 public:
  GemmEngine(cudaStream_t stream, cublasHandle_t fallback);
  GemmEngine(const GemmEngine&) = delete;
  GemmEngine& operator=(const GemmEngine&) = delete;
  ~GemmEngine();

  // C = alpha op(A) op(B) + beta C with A and B BF16, C BF16 or FP32 (callers convert first).
  void run(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
           const Mat& c);
  std::size_t plans() const { return plans_.size(); }
  // Since construction: heuristic queries made, and shapes that reused their class's algorithm.
  std::int64_t heuristic_queries() const { return heuristic_queries_; }
  std::int64_t algo_reuses() const { return algo_reuses_; }
  // Since construction: BF16 GEMMs run by cuBLASLt, and by cublasGemmEx where no cuBLASLt
  // algorithm took the shape.
  std::int64_t lt_calls() const { return lt_calls_; }
  std::int64_t fallback_calls() const { return fallback_calls_; }
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  // The plans cuBLASLt refused since construction, counted by why ("bf16 CUBLAS_STATUS_NOT_
  // SUPPORTED x 2, fp8 CUBLAS_STATUS_INVALID_VALUE x 1"; "none"): a BF16 plan then runs through
  // cublasGemmEx, an FP8 one through the caller's BF16 path. Any status counts as a refusal, not
  // only NOT_SUPPORTED: a cuBLAS older than the code may answer INVALID_VALUE for a block-scaled
  // descriptor it does not take.
  std::string refusals() const;

  struct Plan;
  // The FP8 plan of C[m x n] = A_q B_q^T from K-major E4M3 copies (fp8.cu says why that layout),
  // k a multiple of 16; the scale modes (cublasLtMatmulMatrixScale_t) of A_q and B_q, per tensor
  // by default. nullptr when cuBLASLt has no FP8 algorithm for it (the caller then runs the BF16
  // path). The pointer is valid until the next plan is made.
  const Plan* fp8_plan(std::int64_t m, std::int64_t n, std::int64_t k, const Mat& c,
                       int scale_mode_a = 0, int scale_mode_b = 0);
  // C = alpha (descale_a . a_q)(descale_b . b_q)^T + beta C; a_q is m x k and b_q n x k,
  // row-major with ld k; the descales are device pointers in the plan's scale modes (one FP32,
  // FP32 per tile, or E8M0 per tile), read by the kernel, never by the host.
  void run_fp8(const Plan& plan, float alpha, const void* a_q, const void* b_q,
               const void* descale_a, const void* descale_b, float beta, const Mat& c);

  struct Key {
    std::int64_t m, n, k, lda, ldb, ldc;
    bool trans_a, trans_b;
    DType c_dtype;
    std::uint32_t align_a, align_b, align_c;
    bool fp8;                                // E4M3 A and B in the TN layout, scale pointers
    int scale_mode_a = 0, scale_mode_b = 0;  // fp8: our A_q's and B_q's cuBLASLt scale modes
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool use_fallback = false;  // no cuBLASLt algorithm: cublasGemmEx instead
  };

 private:
  const Plan& plan(const Key& key);
  // The plan's descriptors for the key.
  void describe(const Key& key, Plan& p) const;
  // Whether cuBLASLt takes `algo` for the plan's descriptors within the workspace.
  bool accepts(const Plan& p, const cublasLtMatmulAlgo_t& algo) const;
  // The heuristic's algorithm for the key, or use_fallback where it has none.
  void choose(const Key& key, Plan& p);
  void destroy(Plan& p);

  cudaStream_t stream_;
  cublasHandle_t fallback_;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::unordered_map<Key, Plan, KeyHash> plans_;
  std::unordered_map<Key, cublasLtMatmulAlgo_t, KeyHash> class_algos_;  // m and k by class
  std::int64_t heuristic_queries_ = 0;
  std::int64_t algo_reuses_ = 0;
  std::int64_t lt_calls_ = 0;
  std::int64_t fallback_calls_ = 0;
  std::map<std::string, std::int64_t> refusals_;  // "fp8 CUBLAS_STATUS_..." -> plans
};

// Codes a kernel writes into the backend's error word when it meets a bad index (it skips that
// element); synchronize() and the downloads turn them into a RuntimeError.
enum DeviceError : int {
  kNoError = 0,
  kBadGatherIndex = 1,
  kBadScatterIndex = 2,
  kBadGatherScaledIndex = 3,
  kBadDotIndex = 4,
  kBadLabel = 5,
};

class CudaCompute final : public CudaComputeApi {
 public:
  explicit CudaCompute(int device);
  ~CudaCompute() override;

  ComputeBackend kind() const override { return ComputeBackend::cuda; }
  DType activation_dtype() const override { return DType::bf16; }

  void synchronize() override;
  std::int64_t memory_available_bytes() const override;
  std::int64_t reserved_bytes() const override;
  int mark() override;
  std::vector<double> mark_times_s() override;
  void clear_marks() override { marks_used_ = 0; }

  // --precision fp8 (fp8.cu): UsageError below compute capability 8.9 (no FP8 tensor cores).
  void set_linear_precision(LinearPrecision p) override;
  Fp8GemmCounts fp8_gemm_counts() const override {
    return {fp8_gemms_, fp8_fallbacks_, fp8_weight_quantisations_};
  }
  // UsageError where cuBLASLt has no kernels for the recipe on this device (fp8.cu).
  void set_fp8_recipe(Fp8Recipe r) override;
  // Frees the weights' quantised copies, on the stream.
  void begin_step() override;
  void set_grouped_gemm_impl(GroupedGemmImpl g) override { grouped_impl_ = g; }
  // cudnn: UsageError where cuDNN cannot run here (no cuDNN in the binary, or its handle could
  // not be created: cudnn_unavailable_ says which).
  void set_attention_impl(AttentionImpl a) override;

  std::optional<DeviceInfo> device_info() const override { return info_; }
  int device() const override { return device_; }
  void* stream_handle() const override { return stream_; }
  std::string gemm_path() const override;
  std::string grouped_gemm_path() const override;
  std::string attention_path() const override;
  void set_attention_score_budget(std::size_t bytes) override { score_budget_ = bytes; }
  std::optional<KernelCalls> kernel_calls() const override;
  std::int64_t gemm_heuristic_queries() const override { return gemm_->heuristic_queries(); }
  std::int64_t gemm_algo_reuses() const override { return gemm_->algo_reuses(); }

  cudaStream_t stream() const { return stream_; }
  // Grid size for a grid-stride loop over n items with `threads` per block.
  unsigned blocks_for(std::int64_t n, int threads) const;
  // The grid of a kernel_work.cuh function over `rows` rows (block rows, at most 65,535, the rest
  // by striding) and `x_items` items a row (threads along x), at most 32 blocks a multiprocessor.
  dim3 cell_grid(std::int64_t rows, std::int64_t x_items, int threads) const;
  // The launch of an element-wise kernel_work.cuh function over views of one shape: every view
  // rewritten as one row when all are dense (an empty view counts as dense), the 16-byte path
  // when all allow it, the grid over the first view (kernels.cu).
  struct CellLaunch {
    dim3 grid;
    bool vec;
  };
  CellLaunch cells(std::initializer_list<Mat*> views, int threads) const;

 protected:
  Tensor do_alloc(std::int64_t rows, std::int64_t cols, DType dtype) override;
  void do_upload(const float* host, const Mat& dst) override;
  void do_upload_i32(const std::int32_t* host, const Mat& dst) override;
  void do_download(const Mat& src, float* host) override;
  void do_download_i32(const Mat& src, std::int32_t* host) override;
  void do_zero(const Mat& x) override;
  void do_copy(const Mat& src, const Mat& dst) override;
  void do_axpby(float alpha, const Mat& x, float beta, const Mat& y) override;
  void do_fill_random(const Mat& x, std::uint64_t seed, std::uint64_t stream, float scale) override;
  void do_fill(const Mat& x, float value) override;
  void do_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
               const Mat& c) override;
  // --grouped-gemm grouped: one cublasGemmGroupedBatchedEx over the problems where cuBLAS takes
  // their dtypes (grouped_gemm_path.hpp: BF16 A, B and C), the loop otherwise (gemm.cu).
  void do_grouped_gemm(bool trans_a, bool trans_b, float alpha, std::span<const GemmProblem> p,
                       float beta) override;
  // One linear GEMM in FP8 (fp8.cu), or the BF16 path where cuBLASLt has no FP8 algorithm.
  void do_fp8_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta,
                   const Mat& c) override;
  // --fp8-saved-inputs: the weight gradient's A copy (op(A) = x^T, K-major, with its scales, as
  // quantise_fp8 makes it) in a tensor of its own; the weight gradient then quantises only dy.
  bool do_save_fp8_input(const Mat& x, const Mat& wgrad, Fp8Input& out) override;
  void do_fp8_wgrad(float alpha, const Fp8Input& x, const Mat& dy, float beta,
                    const Mat& c) override;
  void do_rmsnorm_forward(const Mat& x, const Mat& weight, float eps, const Mat& y,
                          const Mat& rstd) override;
  void do_rmsnorm_backward(const Mat& dy, const Mat& x, const Mat& weight, const Mat& rstd,
                           const Mat& dx, const Mat& dweight) override;
  void do_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
               std::int64_t offset, std::int64_t dim, float theta, bool inverse) override;
  void do_swiglu_forward(const Mat& gate_up, const Mat& out) override;
  void do_swiglu_backward(const Mat& gate_up, const Mat& dout, const Mat& dgate_up) override;
  // cuDNN's SDPA, or batched cuBLAS GEMMs over the operands in place (attention.cu).
  void do_attention_forward(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                            const Mat& stats) override;
  void do_attention_backward(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                             const Mat& dout, const Mat& stats,
                             const AttentionOperands& grad) override;
  void do_router_forward(const RouterParams& p, const Mat& logits, const Mat& bias,
                         std::int64_t first_token, const Mat& scores, const Mat& indices,
                         const Mat& weights) override;
  void do_router_backward(const RouterParams& p, const Mat& scores, const Mat& indices,
                          const Mat& dweights, const Mat& dlogits) override;
  void do_gather_rows(const Mat& src, const Mat& index, const Mat& dst) override;
  void do_scatter_add_rows(const Mat& src, const Mat& index, const Mat& scale,
                           const Mat& dst) override;
  void do_gather_rows_scaled(const Mat& src, const Mat& index, const Mat& scale,
                             const Mat& dst) override;
  void do_gathered_row_dot(const Mat& a, const Mat& index, const Mat& b, const Mat& out) override;
  void do_cross_entropy(const Mat& logits, const Mat& labels, float grad_scale,
                        const Mat& loss) override;  // loss.cu
  void do_adamw(const AdamWStep& s, const Mat& param, const Mat& grad, const Mat& m, const Mat& v,
                const Mat& master) override;

 private:
  // Enqueues dst = src element by element, converting between f32 and bf16 (kernels.cu).
  void convert(const Mat& src, const Mat& dst);
  // y = beta * y (an empty GEMM's C).
  void scale_in_place(const Mat& y, float beta);
  // Throws if a kernel reported a bad index since the last check (after a stream sync).
  void check_device_errors();

  int device_;
  DeviceInfo info_;
  int multiprocessors_ = 1;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<AllocStream> alloc_stream_;  // shared with the tensors' deleters
  HostStaging staging_;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<GemmEngine> gemm_;  // created after the handles, destroyed before them
  DeviceScratch scratch_;
  DeviceScratch group_pointers_;           // the grouped GEMM's device pointer arrays
  std::unique_ptr<CudnnAttention> cudnn_;  // null where cuDNN cannot run here, and why:
  std::string cudnn_unavailable_;
  // Whether this call runs cuDNN: the impl asks for it and cuDNN takes the shape (UsageError for
  // --attention-impl cudnn where it does not).
  bool use_cudnn(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                 const Mat& stats);
  // Attention through cuDNN where use_cudnn says so for every call it takes: packed operands in
  // place; others a chunk of heads at a time, k and v gathered into packed scratch and (with
  // grad) the gradients scattered back. Forward without dout and grad. False: nothing ran, the
  // batched-GEMM path is the one to run (attention.cu).
  bool cudnn_attention(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                       const Mat& stats, const Mat* dout, const AttentionOperands* grad);
  // attention_gemm.cuh's and attention_packed.cuh's executors on this backend (attention.cu).
  struct AttentionDevice;
  struct CudnnDevice;
  // Heads [h0, ...) of [a | b] into packed, and back (a shared part summed over the heads, added
  // to where accumulate) (attention_heads.cu, kernel_work.cuh).
  void gather_heads(const HeadCols& a, const HeadCols& b, std::int64_t h0, const Mat& packed);
  void scatter_heads(const Mat& packed, std::int64_t h0, std::int64_t heads, const HeadCols& a,
                     const HeadCols& b, bool accumulate);
  // The statistics between the step's rows x heads and cuDNN's packed [batch, heads, seq, 1]
  // (attention_heads.cu, kernel_work.cuh).
  void move_stats(const Mat& stats, std::int64_t seq, const Mat& packed, bool to_packed);
  // Forward and backward calls through each attention implementation.
  std::int64_t cudnn_attention_calls_ = 0, gemm_attention_calls_ = 0;
  // --grouped-gemm grouped: the grouped calls made, the problems run one GEMM each instead, and
  // why the last of those did.
  std::int64_t grouped_calls_ = 0, grouped_loop_problems_ = 0;
  std::string grouped_loop_why_;
  // The FP8 GEMM's quantised operands and per-tensor scalars (amax, descale), apart from
  // scratch_ because gemm() may use that one for the same call's BF16 fallback.
  DeviceScratch fp8_scratch_;
  std::int64_t fp8_gemms_ = 0;      // linear GEMMs run in FP8
  std::int64_t fp8_fallbacks_ = 0;  // linear GEMMs that fp8 asked for but ran BF16
  std::int64_t fp8_weight_quantisations_ = 0;
  int region_shared_bytes_ = 48 << 10;  // the tile quantisation's dynamic shared memory allowed
  // An operand's E4M3 copy (outer x kp, K-major) and its scales in cuBLASLt's layout (fp8.cu).
  struct Fp8Copy {
    void* data = nullptr;
    void* scales = nullptr;  // what cuBLASLt reads
    void* amax = nullptr;    // the scale region's start (tensor recipe: amax, then the descale)
  };
  Fp8Copy carve_fp8_copy(Fp8Operand which, bool trans_a, std::int64_t outer, std::int64_t kp,
                         void* base) const;
  // Quantises op(X) (which operand, by the linear GEMM convention) into `base` (fp8_copy_bytes
  // of it, laid out as carve_fp8_copy says).
  Fp8Copy quantise_fp8(const Mat& x, bool trans, Fp8Operand which, bool trans_a, std::int64_t outer,
                       std::int64_t kp, void* base);
  std::size_t fp8_copy_bytes(Fp8Operand which, bool trans_a, std::int64_t outer,
                             std::int64_t kp) const;
  // The weights' copies until begin_step(): one device allocation each, per view and transpose.
  std::unordered_map<Fp8WeightView, void*, Fp8WeightViewHash> fp8_weights_;
  std::size_t score_budget_ = std::size_t{1} << 30;
  int* error_host_ = nullptr;    // mapped pinned memory: kernels write, the host reads after sync
  int* error_device_ = nullptr;  // the same word as the device sees it
  std::vector<cudaEvent_t> marks_;  // a pool, reused every step
  std::size_t marks_used_ = 0;
};

}  // namespace moebench::cuda
