// --precision fp8 on the cuda backend: the linear layers' GEMMs with E4M3 inputs, one FP32 scale
// per operand (per tensor; each expert's weight and token slice are separate operands), FP32
// accumulation, output in the storage dtype (BF16, or FP32 where C is FP32).
//
// Per GEMM, all on the stream and without a host synchronisation:
//   1. amax of each operand, reduced on the device into scratch;
//   2. descale = amax / 448 (fp8_descale(fp8_scale(amax)), harness/math/fp8.hpp) beside it;
//   3. a quantised copy of each operand: x * scale rounded by the shared e4m3_round (the value
//      is then an E4M3 value, so the conversion to __nv_fp8_e4m3 is exact), written K-major;
//   4. one cuBLASLt FP8 matmul reading the descales through A/B_SCALE_POINTER.
//
// Layout: cuBLASLt's FP8 kernels on Hopper take only the "TN" form, K contiguous in both inputs.
// Row-major C[m x n] = op(A) op(B) is cuBLASLt's column-major C^T = op(B)^T op(A)^T, so its A is
// op(B)^T stored n x k row-major (K contiguous, used transposed) and its B is op(A) stored m x k
// row-major (K contiguous, not transposed). The quantise kernel writes exactly those copies:
// op(A) is A itself unless trans_a, op(B)^T is B itself only if trans_b; otherwise the copy is a
// tiled transpose. K is padded with zeros to a multiple of 16 (FP8 needs 16-byte aligned leading
// dimensions; zeros add nothing to the sums, so padding is exact). m, n and C's alignment are
// left as they are: where cuBLASLt has no FP8 algorithm for them, that GEMM runs the BF16 path
// and is counted in fp8_gemm_counts().fallbacks.
//
// --fp8-recipe blockwise and mxfp8 (fp8_recipe.hpp) quantise tile by tile instead: one block of
// quantize_region_kernel per region of whole tiles reads it once, along X's stored dimension,
// into shared memory, computes each tile's amax there, writes the same K-major copy and each
// tile's scale where cuBLASLt reads it (harness/math/fp8.hpp: VEC128_32F and
// BLK128x128_32F on Hopper, VEC32_UE8M0's 128 x 4 tiled layout on Blackwell). Their M and N must
// be multiples of 4 (the scale layouts' requirement); other shapes run BF16, as fallbacks.
//
// Weights (B without trans_a, the linear GEMM convention) are quantised once per step: the copy
// and its scales stay in a device allocation of their own until begin_step(), shared by every
// micro-batch's forward (B as stored) and data gradient (B transposed: a second copy). Without
// kept copies (--fp8-weight-copies per-gemm) a weight is quantised into scratch at every GEMM.
//
// The kernels' work is fp8_work.cuh's, run on the CPU by tests/cuda_host (the copies' layout,
// padding and scale placement). Not yet verified on a GPU: the block-scaled paths were written
// from cuBLASLt's documentation and are tested against the cpu backend's emulation by
// tests/gpu/cuda_compute_test.cpp.
#include <cuda_fp8.h>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "harness/backends/cuda/fp8_work.cuh"
#include "harness/compute/gemm_shape.hpp"
#include "harness/math/fp8.hpp"

#include <cstring>

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kKAlign = 16;

// Largest |x| into *amax (zeroed before); non-negative floats order as their bit patterns do, so
// an integer atomicMax on the bits is a float max. fmaxf drops NaN, as amax scaling would anyway.
__global__ void amax_kernel(Mat x, float* amax, bool vec) {
  __shared__ float shared[32];
  const float m = block_max(amax_part(grid_pos(), x, vec), shared);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
}

// descale[i] for amax[i], i < n.
__global__ void descale_kernel(const float* amax, float* descale, int n) {
  if (static_cast<int>(threadIdx.x) < n) {
    descale[threadIdx.x] = fp8_descale(fp8_scale(amax[threadIdx.x]));
  }
}

__global__ void quantize_kernel(Mat x, const float* amax, __nv_fp8_storage_t* dst,
                                std::int64_t ld) {
  quantize_work(grid_pos(), x, fp8_scale(*amax), dst, ld);
}

// One tile per block (fp8_work.cuh), blockDim (kTransposeTile, kTransposeRows).
__global__ void quantize_transpose_kernel(Mat x, const float* amax, __nv_fp8_storage_t* dst,
                                          std::int64_t ld) {
  __shared__ TransposeTile tile;
  const float scale = fp8_scale(*amax);
  const GridPos t{threadIdx.x, kTransposeTile, threadIdx.y, kTransposeRows};
  quantize_transpose_load(t, blockIdx.x, blockIdx.y, x, scale, tile);
  __syncthreads();
  quantize_transpose_store(t, blockIdx.x, blockIdx.y, x, tile, dst, ld);
}

// One block per region of whole tiles (fp8_work.cuh), blockDim (32, kRegionThreadRows); the
// region's values in dynamic shared memory.
constexpr int kRegionThreadRows = 4;
__global__ void quantize_region_kernel(Mat x, bool outer_is_row, std::int64_t outer, std::int64_t k,
                                       std::int64_t kp, Fp8Tile tile, int layout,
                                       __nv_fp8_storage_t* dst, void* scales) {
  extern __shared__ float region[];
  const Fp8Region r = fp8_region(tile, outer, kp, blockIdx.x);
  const GridPos t{threadIdx.x, blockDim.x, threadIdx.y, blockDim.y};
  fp8_region_load(t, x, outer_is_row, k, r, region);
  __syncthreads();
  fp8_region_row_max(t, tile, r, region);
  __syncthreads();
  fp8_region_scales(t, tile, layout, outer, kp, r, region, scales);
  __syncthreads();
  fp8_region_store(t, tile, kp, r, region, dst);
}

std::int64_t round_up(std::int64_t v, std::int64_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

namespace {

// The device's compute capability as one number (90: Hopper, 100: B200, 103: B300).
int capability(const DeviceInfo& d) {
  return d.compute_capability_major * 10 + d.compute_capability_minor;
}

ScaleLayout layout_of(Fp8Recipe r, bool weight) {
  if (r == Fp8Recipe::mxfp8) return kMx;
  return weight ? kBlk128 : kVec128;
}

int cublaslt_scale_mode(Fp8Recipe r, bool weight) {
  switch (r) {
    case Fp8Recipe::tensor:
      return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case Fp8Recipe::blockwise:
      return weight ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                    : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case Fp8Recipe::mxfp8:
      return CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

}  // namespace

void CudaCompute::set_linear_precision(LinearPrecision p) {
  const int cc = capability(info_);
  if (p == LinearPrecision::fp8 && cc < 89) {
    throw UsageError(
        "--precision fp8 needs FP8 tensor cores (compute capability 8.9 or newer); "
        "device " +
        std::to_string(device_) + " (" + info_.name + ") is " +
        std::to_string(info_.compute_capability_major) + "." +
        std::to_string(info_.compute_capability_minor) + "; use --precision bf16");
  }
  linear_precision_ = p;
}

// cuBLASLt's block scaling: VEC128_32F and BLK128x128_32F on Hopper (9.x) only, VEC32_UE8M0
// from Blackwell (10.x) on.
void CudaCompute::set_fp8_recipe(Fp8Recipe r) {
  const int cc = capability(info_);
  const std::string device = "device " + std::to_string(device_) + " (" + info_.name +
                             ", compute capability " +
                             std::to_string(info_.compute_capability_major) + "." +
                             std::to_string(info_.compute_capability_minor) + ")";
  if (r == Fp8Recipe::blockwise && info_.compute_capability_major != 9) {
    throw UsageError(
        "--fp8-recipe blockwise needs Hopper (compute capability 9.x: cuBLASLt's "
        "1x128 and 128x128 block scaling); " +
        device + " has " +
        (cc >= 100 ? "MXFP8 instead: use --fp8-recipe mxfp8" : "neither: use --fp8-recipe tensor"));
  }
  if (r == Fp8Recipe::mxfp8 && cc < 100) {
    throw UsageError(
        "--fp8-recipe mxfp8 needs Blackwell (compute capability 10.0 or newer: "
        "cuBLASLt's VEC32_UE8M0 block scaling); " +
        device +
        (cc >= 90 ? ": use --fp8-recipe blockwise or tensor" : ": use --fp8-recipe tensor"));
  }
  fp8_recipe_ = r;
}

void CudaCompute::begin_step() {
  for (auto& [key, base] : fp8_weights_) CUDA_CHECK(cudaFreeAsync(base, stream_));
  fp8_weights_.clear();
}

std::size_t CudaCompute::fp8_copy_bytes(Fp8Operand which, bool trans_a, std::int64_t outer,
                                        std::int64_t kp) const {
  const std::size_t data = Carver::round(static_cast<std::size_t>(outer * kp));
  if (fp8_recipe_ == Fp8Recipe::tensor)
    return Carver::round(2 * sizeof(float)) + data;  // amax, descale
  const Fp8Tile tile = operand_tile(fp8_recipe_, which, trans_a);
  const std::int64_t k_blocks = (kp + tile.k - 1) / tile.k;
  std::size_t scales = 0;
  switch (layout_of(fp8_recipe_, is_weight(which, trans_a))) {
    case kMx:
      scales = static_cast<std::size_t>(mx_scale_bytes(outer, k_blocks));
      break;
    case kBlk128:
      scales =
          static_cast<std::size_t>((outer + 127) / 128 * ((k_blocks + 3) / 4 * 4)) * sizeof(float);
      break;
    case kVec128:
      scales = static_cast<std::size_t>(outer * k_blocks) * sizeof(float);
      break;
  }
  return Carver::round(scales) + data;
}

// Where a copy's scales and values lie in its fp8_copy_bytes at `base`: the scales first (the
// tensor recipe: amax, then the descale cuBLASLt reads), then the values.
CudaCompute::Fp8Copy CudaCompute::carve_fp8_copy(Fp8Operand which, bool trans_a, std::int64_t outer,
                                                 std::int64_t kp, void* base) const {
  const std::size_t data_bytes = Carver::round(static_cast<std::size_t>(outer * kp));
  Carver carve(base);
  Fp8Copy q;
  q.amax = carve.take<std::uint8_t>(fp8_copy_bytes(which, trans_a, outer, kp) - data_bytes);
  q.scales = fp8_recipe_ == Fp8Recipe::tensor ? static_cast<float*>(q.amax) + 1 : q.amax;
  q.data = carve.take<__nv_fp8_storage_t>(static_cast<std::size_t>(outer * kp));
  return q;
}

CudaCompute::Fp8Copy CudaCompute::quantise_fp8(const Mat& x, bool trans, Fp8Operand which,
                                               bool trans_a, std::int64_t outer, std::int64_t kp,
                                               void* base) {
  const Fp8Copy q = carve_fp8_copy(which, trans_a, outer, kp, base);
  auto* dst = static_cast<__nv_fp8_storage_t*>(q.data);
  // The copy is op(A) (outer = m) or op(B)^T (outer = n), K-major. Stored X has the outer
  // dimension along its rows for A without a transpose, and for B with one.
  const bool outer_is_row = (which == Fp8Operand::a) != trans;
  const std::int64_t k = outer_is_row ? x.cols : x.rows;
  if (fp8_recipe_ == Fp8Recipe::tensor) {
    float* scalars = static_cast<float*>(q.amax);  // amax, then descale
    CUDA_CHECK(cudaMemsetAsync(scalars, 0, sizeof(float), stream_));
    Mat flat = x;
    const CellLaunch l = cells({&flat}, kThreads);
    amax_kernel<<<l.grid, kThreads, 0, stream_>>>(flat, scalars, l.vec);
    CUDA_CHECK_LAUNCH();
    descale_kernel<<<1, 32, 0, stream_>>>(scalars, scalars + 1, 1);
    CUDA_CHECK_LAUNCH();
    if (!outer_is_row) {
      const dim3 grid(static_cast<unsigned>((x.cols + kTransposeTile - 1) / kTransposeTile),
                      static_cast<unsigned>((kp + kTransposeTile - 1) / kTransposeTile));
      MB_CHECK(grid.y <= 65535, "fp8 gemm: k " << kp << " exceeds the transpose grid");
      quantize_transpose_kernel<<<grid, dim3(kTransposeTile, kTransposeRows), 0, stream_>>>(
          x, scalars, dst, kp);
    } else {
      quantize_kernel<<<cell_grid(x.rows, kp, kThreads), kThreads, 0, stream_>>>(x, scalars, dst,
                                                                                 kp);
    }
    CUDA_CHECK_LAUNCH();
    return q;
  }
  const bool weight = is_weight(which, trans_a);
  const Fp8Tile tile = operand_tile(fp8_recipe_, which, trans_a);
  const ScaleLayout layout = layout_of(fp8_recipe_, weight);
  // Padding entries of the scale layouts (rows past `outer`, K-blocks past the last) are never
  // read for real elements; give them a harmless value (E8M0 127 is 1, FP32 0).
  const std::size_t scale_bytes =
      static_cast<std::size_t>(static_cast<char*>(q.data) - static_cast<char*>(q.scales));
  CUDA_CHECK(cudaMemsetAsync(q.scales, layout == kMx ? 127 : 0, scale_bytes, stream_));
  const std::int64_t regions = fp8_regions(tile, outer, kp);
  MB_CHECK(regions <= 0x7fffffff, "fp8 gemm: " << regions << " tile regions exceed the grid");
  // 128 x 128 tiles: 66 KB of shared memory a block, past the 48 KB a launch gets by default.
  const int shared = fp8_region_shared_floats(tile) * static_cast<int>(sizeof(float));
  if (shared > region_shared_bytes_) {
    CUDA_CHECK(cudaFuncSetAttribute(quantize_region_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    region_shared_bytes_ = shared;
  }
  quantize_region_kernel<<<static_cast<unsigned>(regions), dim3(32, kRegionThreadRows), shared,
                           stream_>>>(x, outer_is_row, outer, k, kp, tile, layout, dst, q.scales);
  CUDA_CHECK_LAUNCH();
  return q;
}

void CudaCompute::do_fp8_gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b,
                              float beta, const Mat& c) {
  const auto [m, n, k] = gemm_shape(trans_a, trans_b, a, b, c);
  const bool blocks = fp8_recipe_ != Fp8Recipe::tensor;
  const std::int64_t kp = round_up(k, fp8_recipe_ == Fp8Recipe::mxfp8 ? kFp8MxTile : kKAlign);
  const bool weight_b = is_weight(Fp8Operand::b, trans_a);
  const GemmEngine::Plan* plan =
      blocks && (m % 4 != 0 || n % 4 != 0)
          ? nullptr
          : gemm_->fp8_plan(m, n, kp, c, cublaslt_scale_mode(fp8_recipe_, false),
                            cublaslt_scale_mode(fp8_recipe_, weight_b));
  if (plan == nullptr) {
    ++fp8_fallbacks_;
    do_gemm(trans_a, trans_b, alpha, a, b, beta, c);
    return;
  }
  ++fp8_gemms_;
  // a_q = op(A) (m x kp) in scratch; b_q = op(B)^T (n x kp) in scratch too, or kept for the step
  // when B is a weight.
  const std::size_t a_bytes = fp8_copy_bytes(Fp8Operand::a, trans_a, m, kp);
  const std::size_t b_bytes = fp8_copy_bytes(Fp8Operand::b, trans_a, n, kp);
  void* b_base = nullptr;
  bool b_ready = false;
  // A weight's copy is kept for the step, or (set_fp8_weight_copies(false)) made in scratch like
  // an activation's, at every GEMM.
  const bool keep = weight_b && keep_fp8_weights_;
  if (weight_b && !keep) ++fp8_weight_quantisations_;
  if (keep) {
    const Fp8WeightView key{b.data, b.rows, b.cols, b.ld, trans_b};
    auto it = fp8_weights_.find(key);
    if (it != fp8_weights_.end()) {
      b_base = it->second;
      b_ready = true;
    } else {
      const cudaError_t e = cudaMallocAsync(&b_base, b_bytes, stream_);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw RuntimeError("cuda backend: cannot allocate " + std::to_string(b_bytes) +
                           " bytes for a weight's fp8 copy: " + cudaGetErrorString(e));
      }
      fp8_weights_.emplace(key, b_base);
      ++fp8_weight_quantisations_;
    }
  }
  void* scratch = fp8_scratch_.get(a_bytes + (keep ? 0 : b_bytes), stream_);
  if (!keep) b_base = static_cast<char*>(scratch) + a_bytes;
  const Fp8Copy qa = quantise_fp8(a, trans_a, Fp8Operand::a, trans_a, m, kp, scratch);
  const Fp8Copy qb = b_ready ? carve_fp8_copy(Fp8Operand::b, trans_a, n, kp, b_base)
                             : quantise_fp8(b, trans_b, Fp8Operand::b, trans_a, n, kp, b_base);
  gemm_->run_fp8(*plan, alpha, qa.data, qb.data, qa.scales, qb.scales, beta, c);
}

bool CudaCompute::do_save_fp8_input(const Mat& x, const Mat& wgrad, Fp8Input& out) {
  // The weight gradient wgrad = x^T dy: m = x.cols, n = wgrad.cols, k = x.rows (the tokens).
  const std::int64_t m = x.cols, n = wgrad.cols;
  const std::int64_t kp = round_up(x.rows, fp8_recipe_ == Fp8Recipe::mxfp8 ? kFp8MxTile : kKAlign);
  // Where that GEMM would fall back to the storage precision, x is kept as it is.
  if (fp8_recipe_ != Fp8Recipe::tensor && (m % 4 != 0 || n % 4 != 0)) return false;
  if (gemm_->fp8_plan(m, n, kp, wgrad, cublaslt_scale_mode(fp8_recipe_, false),
                      cublaslt_scale_mode(fp8_recipe_, false)) == nullptr) {
    return false;
  }
  const std::size_t bytes = fp8_copy_bytes(Fp8Operand::a, true, m, kp);
  out.data = alloc(static_cast<std::int64_t>((bytes + 3) / 4), 1, DType::i32);
  (void)quantise_fp8(x, true, Fp8Operand::a, true, m, kp, out.data.data());
  return true;
}

void CudaCompute::do_fp8_wgrad(float alpha, const Fp8Input& x, const Mat& dy, float beta,
                               const Mat& c) {
  const std::int64_t m = x.cols, n = dy.cols;
  const std::int64_t kp = round_up(x.rows, fp8_recipe_ == Fp8Recipe::mxfp8 ? kFp8MxTile : kKAlign);
  const GemmEngine::Plan* plan =
      gemm_->fp8_plan(m, n, kp, c, cublaslt_scale_mode(fp8_recipe_, false),
                      cublaslt_scale_mode(fp8_recipe_, false));
  MB_CHECK(plan != nullptr, "fp8 weight gradient from a saved input: no FP8 algorithm for "
                                << m << " x " << n << " x " << kp << " (it had one when saved)");
  ++fp8_gemms_;
  const Fp8Copy qa = carve_fp8_copy(Fp8Operand::a, true, m, kp, x.data.data());
  void* scratch = fp8_scratch_.get(fp8_copy_bytes(Fp8Operand::b, true, n, kp), stream_);
  const Fp8Copy qb = quantise_fp8(dy, false, Fp8Operand::b, true, n, kp, scratch);
  gemm_->run_fp8(*plan, alpha, qa.data, qb.data, qa.scales, qb.scales, beta, c);
}

}  // namespace moebench::cuda
