// Status checks for every CUDA runtime and cuBLAS(Lt) call: a failure throws RuntimeError naming
// the call, file:line, the library's error name and text, and the current device. All of the
// backend's check macros live here (the nccl backend adds its own beside these).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <sstream>
#include <string>

#include "harness/core/error.hpp"

namespace moebench::cuda_detail {

inline std::string device_suffix() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) return "";
  return " on device " + std::to_string(device);
}

[[noreturn]] inline void throw_cuda_error(const char* call, const char* file, int line,
                                          cudaError_t e) {
  std::ostringstream os;
  os << "CUDA error: " << call << " failed at " << file << ":" << line << ": "
     << cudaGetErrorName(e) << " (" << cudaGetErrorString(e) << ")" << device_suffix();
  // A failed kernel surfaces at a later call; say how to find the one that failed.
  if (e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorAssert ||
      e == cudaErrorMisalignedAddress || e == cudaErrorIllegalInstruction) {
    os << "; an earlier asynchronous operation failed, rerun with CUDA_LAUNCH_BLOCKING=1 to "
          "locate it";
  }
  throw RuntimeError(os.str());
}

[[noreturn]] inline void throw_cublas_error(const char* call, const char* file, int line,
                                            cublasStatus_t s) {
  std::ostringstream os;
  os << "cuBLAS error: " << call << " failed at " << file << ":" << line << ": "
     << cublasGetStatusName(s) << " (" << cublasGetStatusString(s) << ")" << device_suffix();
  throw RuntimeError(os.str());
}

}  // namespace moebench::cuda_detail

namespace moebench::cuda {

// A dimension, leading dimension or count for cuBLAS's int arguments: RuntimeError naming it
// where it does not fit.
inline int cublas_int(std::int64_t v, const char* what) {
  MB_CHECK(v >= 0 && v <= INT_MAX, what << " = " << v << " exceeds the cuBLAS integer range");
  return static_cast<int>(v);
}

}  // namespace moebench::cuda

#define CUDA_CHECK(call)                                                                     \
  do {                                                                                       \
    const cudaError_t mb_cuda_status_ = (call);                                              \
    if (mb_cuda_status_ != cudaSuccess)                                                      \
      ::moebench::cuda_detail::throw_cuda_error(#call, __FILE__, __LINE__, mb_cuda_status_); \
  } while (0)

// After a kernel launch: a bad configuration is reported here, a fault at the next sync.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                       \
  do {                                                                                           \
    const cublasStatus_t mb_cublas_status_ = (call);                                             \
    if (mb_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                              \
      ::moebench::cuda_detail::throw_cublas_error(#call, __FILE__, __LINE__, mb_cublas_status_); \
  } while (0)
