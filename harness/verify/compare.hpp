// Element-wise comparison of a distributed result against the single-process reference.
#pragma once

#include <span>
#include <string>

#include "harness/output/run_record.hpp"

namespace moebench {

// Tolerances of --verify. Both runs are FP32 on the same backend and differ only in summation
// order (GEMM blocking over different row counts, the reduction tree of the all-reduce), which
// moves results by ~1e-6 relative to a tensor's scale; a misrouted row, a lost or doubled
// contribution, or a corrupted payload moves them by O(1). The bounds sit well between the two.
constexpr double kVerifyRtol = 1e-3;
constexpr double kVerifyAtolOfMax = 1e-4;  // atol = this x max |reference| of the tensor

// An element mismatches when |got - ref| > atol + rtol * |ref|. The relative error reported is
// |got - ref| / (|ref| + atol).
TensorCheck compare(const std::string& name, std::span<const float> got, std::span<const float> ref,
                    double atol, double rtol);

double max_abs(std::span<const float> x);

// Adds one rank's check into a total (counts summed, maxima kept).
void accumulate(TensorCheck& total, const TensorCheck& part);

}  // namespace moebench
