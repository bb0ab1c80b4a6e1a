// Functions written once for both backends: plain host functions here, __host__ __device__ when
// nvcc compiles them for the cuda backend's kernels.
#pragma once

#if defined(__CUDACC__)
#define MB_HD __host__ __device__ __forceinline__
#else
#define MB_HD inline
#endif
