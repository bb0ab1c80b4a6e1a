// Element-wise kernels of the cuda backend: initialisation, conversion, axpby, RMSNorm, rope,
// SwiGLU and AdamW. Each element calls the same function from workloads/ops/elementwise.hpp that
// the cpu backend's loops call; only the split of a row over threads is written here. Simple
// grid-stride loops over FP32 math on BF16/FP32 storage: memory-bound and obviously correct
// first (vectorised 16-byte accesses are the next step if a profile asks for them).
#include <algorithm>

#include "harness/backends/cuda/cuda_backend.hpp"
#include "harness/backends/cuda/device_mat.cuh"
#include "workloads/ops/elementwise.hpp"
#include "workloads/ops/random.hpp"

namespace moebench::cuda {

namespace {

constexpr int kThreads = 256;

// Row and column of flat element i of a rows x cols view: a 32-bit division while i fits in 32
// bits (every activation of a step; a 64-bit one is several times slower on the GPU), 64-bit
// beyond.
__device__ __forceinline__ void split(std::int64_t i, std::int64_t cols, std::int64_t* r,
                                      std::int64_t* c) {
  if (i <= 0xffffffffLL && cols <= 0xffffffffLL) {
    const auto ui = static_cast<std::uint32_t>(i), uc = static_cast<std::uint32_t>(cols);
    const std::uint32_t ur = ui / uc;
    *r = ur;
    *c = ui - ur * uc;
    return;
  }
  *r = i / cols;
  *c = i - *r * cols;
}

// The element-wise kernels address element i of each view through offset_of: no division for
// dense views, one for strided ones (same shapes, so the same i everywhere).
__global__ void convert_kernel(Mat src, Mat dst) {
  MB_GRID_LOOP(i, src.rows * src.cols) store_flat(dst, i, load_flat(src, i));
}

__global__ void fill_kernel(Mat x, float value) {
  MB_GRID_LOOP(i, x.rows * x.cols) store_flat(x, i, value);
}

__global__ void axpby_kernel(float alpha, Mat x, float beta, Mat y) {
  MB_GRID_LOOP(i, x.rows * x.cols) {
    // beta == 0 does not read y (the BLAS convention): y may be uninitialised.
    const float v =
        beta == 0.0f ? alpha * load_flat(x, i) : alpha * load_flat(x, i) + beta * load_flat(y, i);
    store_flat(y, i, v);
  }
}

__global__ void scale_kernel(Mat y, float beta) {
  MB_GRID_LOOP(i, y.rows * y.cols) store_flat(y, i, beta == 0.0f ? 0.0f : beta * load_flat(y, i));
}

// Element (r, c) is u(seed, stream, r * cols + c), independent of ld, as on the cpu backend.
__global__ void fill_random_kernel(Mat x, std::uint64_t seed, std::uint64_t stream, float scale) {
  MB_GRID_LOOP(i, x.rows * x.cols) {
    store_flat(x, i, scale * uniform_pm1(seed, stream, static_cast<std::uint64_t>(i)));
  }
}

// One block per row (a grid-stride loop over rows).
__global__ void rmsnorm_forward_kernel(Mat x, Mat w, float eps, Mat y, Mat rstd) {
  __shared__ float red[32];
  for (std::int64_t r = blockIdx.x; r < x.rows; r += gridDim.x) {
    float sum_sq = 0.0f;
    for (std::int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
      const float v = load(x, r, c);
      sum_sq += v * v;
    }
    const float rs = rmsnorm_rstd(block_sum(sum_sq, red), x.cols, eps);
    for (std::int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
      store(y, r, c, load(x, r, c) * rs * load(w, 0, c));
    }
    if (threadIdx.x == 0) store(rstd, r, 0, rs);
  }
}

__global__ void rmsnorm_dx_kernel(Mat dy, Mat x, Mat w, Mat rstd, Mat dx) {
  __shared__ float red[32];
  for (std::int64_t r = blockIdx.x; r < x.rows; r += gridDim.x) {
    float dot = 0.0f;
    for (std::int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
      dot += load(w, 0, c) * load(dy, r, c) * load(x, r, c);
    }
    const float mean_wdyx = block_sum(dot, red) / static_cast<float>(x.cols);
    const float rs = load(rstd, r, 0);
    for (std::int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
      store(dx, r, c, rmsnorm_dx(load(dy, r, c), load(x, r, c), load(w, 0, c), rs, mean_wdyx));
    }
  }
}

// The weight gradient sums dy * x * rstd over rows: each block row (blockIdx.y) sums a chunk of
// rows into partial[chunk][c], and a second kernel adds the chunks in order (deterministic).
constexpr std::int64_t kRowsPerChunk = 64;

__global__ void rmsnorm_dw_partial_kernel(Mat dy, Mat x, Mat rstd, float* partial) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= x.cols) return;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * kRowsPerChunk;
  const std::int64_t last = first + kRowsPerChunk < x.rows ? first + kRowsPerChunk : x.rows;
  float acc = 0.0f;
  for (std::int64_t r = first; r < last; ++r)
    acc += load(dy, r, c) * load(x, r, c) * load(rstd, r, 0);
  partial[blockIdx.y * x.cols + c] = acc;
}

__global__ void rmsnorm_dw_finish_kernel(const float* partial, std::int64_t chunks, Mat dw) {
  MB_GRID_LOOP(c, dw.cols) {
    float acc = 0.0f;
    for (std::int64_t k = 0; k < chunks; ++k) acc += partial[k * dw.cols + c];
    store(dw, 0, c, load(dw, 0, c) + acc);
  }
}

// One thread per (row, head, pair).
__global__ void rope_kernel(Mat x, std::int64_t seq_len, std::int64_t heads,
                            std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                            float theta, bool inverse) {
  const std::int64_t half = dim / 2;
  MB_GRID_LOOP(e, x.rows * heads * half) {
    const std::int64_t i = e % half;
    const std::int64_t t = e / half;
    const std::int64_t h = t % heads;
    const std::int64_t r = t / heads;
    const float angle = rope_angle(r % seq_len, i, dim, theta);
    const float s = ::sinf(angle);
    const std::int64_t col = h * head_stride + offset + i;
    float a = load(x, r, col);
    float b = load(x, r, col + half);
    rope_rotate_pair(&a, &b, ::cosf(angle), inverse ? -s : s);
    store(x, r, col, a);
    store(x, r, col + half, b);
  }
}

__global__ void swiglu_forward_kernel(Mat gate_up, Mat out) {
  const std::int64_t f = out.cols;
  MB_GRID_LOOP(i, out.rows * f) {
    std::int64_t r, j;
    split(i, f, &r, &j);
    store(out, r, j, moebench::swiglu_forward(load(gate_up, r, j), load(gate_up, r, f + j)));
  }
}

__global__ void swiglu_backward_kernel(Mat gate_up, Mat dout, Mat dgate_up) {
  const std::int64_t f = dout.cols;
  MB_GRID_LOOP(i, dout.rows * f) {
    std::int64_t r, j;
    split(i, f, &r, &j);
    float dgate, dup;
    moebench::swiglu_backward(load(gate_up, r, j), load(gate_up, r, f + j), load(dout, r, j),
                              &dgate, &dup);
    store(dgate_up, r, j, dgate);
    store(dgate_up, r, f + j, dup);
  }
}

// master (FP32, or no data): the value the update reads and writes; param gets it rounded.
__global__ void adamw_kernel(AdamWCoeffs coeffs, Mat param, Mat grad, Mat m, Mat v, Mat master) {
  const bool has_master = master.data != nullptr;
  MB_GRID_LOOP(i, param.rows * param.cols) {
    float p = has_master ? load_flat(master, i) : load_flat(param, i);
    float mv = load_flat(m, i);
    float vv = load_flat(v, i);
    adamw_update(coeffs, &p, load_flat(grad, i), &mv, &vv);
    if (has_master) store_flat(master, i, p);
    store_flat(param, i, p);
    store_flat(m, i, mv);
    store_flat(v, i, vv);
  }
}

unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535));
}

}  // namespace

void CudaCompute::convert(const Mat& src, const Mat& dst) {
  if (src.numel() == 0) return;
  convert_kernel<<<blocks_for(src.numel(), kThreads), kThreads, 0, stream_>>>(src, dst);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::scale_in_place(const Mat& y, float beta) {
  if (y.numel() == 0) return;
  scale_kernel<<<blocks_for(y.numel(), kThreads), kThreads, 0, stream_>>>(y, beta);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_fill(const Mat& x, float value) {
  if (x.numel() == 0) return;
  fill_kernel<<<blocks_for(x.numel(), kThreads), kThreads, 0, stream_>>>(x, value);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_axpby(float alpha, const Mat& x, float beta, const Mat& y) {
  if (x.numel() == 0) return;
  axpby_kernel<<<blocks_for(x.numel(), kThreads), kThreads, 0, stream_>>>(alpha, x, beta, y);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_fill_random(const Mat& x, std::uint64_t seed, std::uint64_t stream,
                                 float scale) {
  if (x.numel() == 0) return;
  fill_random_kernel<<<blocks_for(x.numel(), kThreads), kThreads, 0, stream_>>>(x, seed, stream,
                                                                                scale);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_rmsnorm_forward(const Mat& x, const Mat& weight, float eps, const Mat& y,
                                     const Mat& rstd) {
  if (x.rows == 0) return;
  rmsnorm_forward_kernel<<<row_blocks(x.rows), kThreads, 0, stream_>>>(x, weight, eps, y, rstd);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_rmsnorm_backward(const Mat& dy, const Mat& x, const Mat& weight,
                                      const Mat& rstd, const Mat& dx, const Mat& dweight) {
  if (x.rows == 0 || x.cols == 0) return;
  // The weight gradient first: it reads dy, which may be the same memory as dx.
  const std::int64_t chunks = (x.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  MB_CHECK(chunks <= 65535, "rmsnorm backward of " << x.rows << " rows");
  auto* partial = static_cast<float*>(
      scratch_.get(static_cast<std::size_t>(chunks * x.cols) * sizeof(float), stream_));
  const dim3 grid(static_cast<unsigned>((x.cols + kThreads - 1) / kThreads),
                  static_cast<unsigned>(chunks));
  rmsnorm_dw_partial_kernel<<<grid, kThreads, 0, stream_>>>(dy, x, rstd, partial);
  CUDA_CHECK_LAUNCH();
  rmsnorm_dw_finish_kernel<<<blocks_for(x.cols, kThreads), kThreads, 0, stream_>>>(partial, chunks,
                                                                                   dweight);
  CUDA_CHECK_LAUNCH();
  rmsnorm_dx_kernel<<<row_blocks(x.rows), kThreads, 0, stream_>>>(dy, x, weight, rstd, dx);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads,
                          std::int64_t head_stride, std::int64_t offset, std::int64_t dim,
                          float theta, bool inverse) {
  const std::int64_t n = x.rows * heads * (dim / 2);
  if (n == 0) return;
  rope_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream_>>>(x, seq_len, heads, head_stride,
                                                                 offset, dim, theta, inverse);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_swiglu_forward(const Mat& gate_up, const Mat& out) {
  if (out.numel() == 0) return;
  swiglu_forward_kernel<<<blocks_for(out.numel(), kThreads), kThreads, 0, stream_>>>(gate_up, out);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_swiglu_backward(const Mat& gate_up, const Mat& dout, const Mat& dgate_up) {
  if (dout.numel() == 0) return;
  swiglu_backward_kernel<<<blocks_for(dout.numel(), kThreads), kThreads, 0, stream_>>>(
      gate_up, dout, dgate_up);
  CUDA_CHECK_LAUNCH();
}

void CudaCompute::do_adamw(const AdamWStep& s, const Mat& param, const Mat& grad, const Mat& m,
                           const Mat& v, const Mat& master) {
  if (param.numel() == 0) return;
  adamw_kernel<<<blocks_for(param.numel(), kThreads), kThreads, 0, stream_>>>(
      adamw_coeffs(s), param, grad, m, v, master);
  CUDA_CHECK_LAUNCH();
}

}  // namespace moebench::cuda
