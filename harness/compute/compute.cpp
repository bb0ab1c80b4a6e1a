#include "harness/compute/compute.hpp"

namespace moebench {

void Compute::set_linear_precision(LinearPrecision p) {
  if (p != LinearPrecision::standard) {
    throw UsageError("--precision fp8 is not available with --backend " + name());
  }
  linear_precision_ = p;
}

void Compute::fp8_gemm(bool, bool, float, const Mat&, const Mat&, float, const Mat&) {
  throw RuntimeError("the " + name() + " backend has no fp8 GEMM");
}

}  // namespace moebench
