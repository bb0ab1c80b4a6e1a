// Which way the cuda backend runs one grouped GEMM's problems (gemm.cu), as a host function of
// the problems' dtypes, so that the choice is unit-tested for every combination
// (tests/unit/grouped_gemm_path_test.cpp) without a GPU.
//
// cublasGemmGroupedBatchedEx takes A, B and C of one type with FP32 compute: 16BF/16BF/16BF,
// 16F/16F/16F and 32F/32F/32F are the combinations its documentation lists, none with a C wider
// than A and B. moebench hands it BF16 operands, so the grouped call runs only where A, B and C
// are all BF16 (the experts' forward and input gradients); the weight gradients, which
// accumulate into FP32 main gradients, and any FP32 operand run one cuBLASLt GEMM per problem,
// as --grouped-gemm loop does for all of them.
#pragma once

#include "harness/compute/backend_kind.hpp"
#include "harness/core/tensor.hpp"

namespace moebench::cuda {

struct GroupedGemmChoice {
  bool grouped = false;  // one cublasGemmGroupedBatchedEx call
  const char* why = "";  // why not, where the loop runs
};

// For one problem's A, B and C dtypes; a call is grouped only where every problem is, with C of
// one dtype throughout.
inline GroupedGemmChoice grouped_gemm_choice(GroupedGemmImpl impl, DType a, DType b, DType c) {
  if (impl != GroupedGemmImpl::grouped) return {false, "--grouped-gemm loop"};
  if (a != DType::bf16 || b != DType::bf16) {
    return {false, "an operand is not bf16 (the grouped call multiplies bf16 A and B)"};
  }
  if (c != DType::bf16) {
    return {false,
            "C is not bf16 (cublasGemmGroupedBatchedEx takes C of A's and B's type: fp32 main "
            "gradients run one GEMM per problem)"};
  }
  return {true, ""};
}

}  // namespace moebench::cuda
