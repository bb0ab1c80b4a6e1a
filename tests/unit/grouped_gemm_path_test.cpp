// The cuda backend's choice between one grouped cuBLAS call and one GEMM per problem
// (harness/backends/cuda/grouped_gemm_path.hpp), for every (A, B, C) dtype combination.
#include <doctest/doctest.h>

#include <string>

#include "harness/backends/cuda/grouped_gemm_path.hpp"

namespace moebench::cuda {
namespace {

TEST_CASE("grouped gemm path: grouped only for bf16 A, B and C, and only when asked") {
  const DType all[] = {DType::f32, DType::bf16, DType::i32};
  int grouped = 0;
  for (DType a : all) {
    for (DType b : all) {
      for (DType c : all) {
        CAPTURE(dtype_name(a));
        CAPTURE(dtype_name(b));
        CAPTURE(dtype_name(c));
        const GroupedGemmChoice loop = grouped_gemm_choice(GroupedGemmImpl::loop, a, b, c);
        CHECK_FALSE(loop.grouped);
        CHECK(std::string(loop.why) == "--grouped-gemm loop");
        const GroupedGemmChoice g = grouped_gemm_choice(GroupedGemmImpl::grouped, a, b, c);
        const bool all_bf16 = a == DType::bf16 && b == DType::bf16 && c == DType::bf16;
        CHECK(g.grouped == all_bf16);
        // A reason exactly where the loop runs, naming the operand that decided it.
        CHECK(std::string(g.why).empty() == all_bf16);
        if (!all_bf16 && a == DType::bf16 && b == DType::bf16) {
          CHECK(std::string(g.why).find("C is not bf16") == 0);
        }
        if (a != DType::bf16 || b != DType::bf16) {
          CHECK(std::string(g.why).find("an operand is not bf16") == 0);
        }
        grouped += g.grouped ? 1 : 0;
      }
    }
  }
  CHECK(grouped == 1);  // of 27
}

}  // namespace
}  // namespace moebench::cuda
