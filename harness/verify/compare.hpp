// Element-wise comparison of a distributed result against the single-process reference.
#pragma once

#include <span>
#include <string>

#include "harness/compute/compute.hpp"
#include "harness/core/tensor.hpp"
#include "harness/output/run_record.hpp"

namespace moebench {

// Tolerances of --verify. Both runs are FP32 on the same backend and differ only in summation
// order (GEMM blocking over different row counts, the reduction tree of the all-reduce), which
// moves results by ~1e-6 relative to a tensor's scale; a misrouted row, a lost or doubled
// contribution, or a corrupted payload moves them by O(1). The bounds sit well between the two.
constexpr double kVerifyRtol = 1e-3;
constexpr double kVerifyAtolOfMax = 1e-4;  // atol = this x max |reference| of the tensor

// With BF16 storage (the cuda backend) every stored activation, weight and gradient carries a
// rounding of up to 2^-9 relative (8 significant bits), and the two runs round at different
// points: GEMMs over different row counts, gradients summed as world partial BF16 sums by the
// all-reduce against one FP32-accumulated GEMM in the reference, and each difference propagates
// through a dozen stored intermediates per layer, forward and backward. Typical elements then
// differ by a few 1e-3 relative, tails by 1e-2; elements near zero by a share of the tensor's
// scale, not their own. A lost, doubled or misrouted contribution still moves whole rows by
// O(1) of their size, far outside these bounds.
constexpr double kVerifyRtolBf16 = 5e-2;
constexpr double kVerifyAtolOfMaxBf16 = 2e-2;

// With --precision fp8 every linear GEMM rounds both inputs to E4M3 (3 mantissa bits: up to 2^-4
// of a value) after scaling by 448 / amax of the whole operand, and the amax of a rank's slice of
// tokens differs from the reference's whole batch, so the two runs round most activation values
// differently: one GEMM's product can move by up to 2 x 2^-4 = 2^-3 of its magnitude. Summed
// with random signs and carried through the layers, forward and backward, the tiny preset's
// tensors differ by up to ~8% of their scale (measured: output 7.2%, input_grad 7.3%, dense
// grads 4.8%, expert grads 8.4% at np 4, ep 4). The bounds are one GEMM's worst case, 2^-3, of
// the element and of the tensor's scale; the planted dispatch corruption moves tensors by
// hundreds of times their scale.
constexpr double kVerifyRtolFp8 = 0.125;
constexpr double kVerifyAtolOfMaxFp8 = 0.125;

struct VerifyTolerance {
  double rtol = kVerifyRtol;
  double atol_of_max = kVerifyAtolOfMax;  // atol = this x max |reference| of the tensor
  std::string reason;                     // for the report
};

// The bounds for a backend whose tensors are stored as `storage` (f32 or bf16), its linear
// layers' GEMMs in `linear` precision (fp8 widens them, whatever the storage).
VerifyTolerance verify_tolerance(DType storage, LinearPrecision linear = LinearPrecision::standard);

// An element mismatches when |got - ref| > atol + rtol * |ref|. The relative error reported is
// |got - ref| / (|ref| + atol).
TensorCheck compare(const std::string& name, std::span<const float> got, std::span<const float> ref,
                    double atol, double rtol);

double max_abs(std::span<const float> x);

// Adds one rank's check into a total (counts summed, maxima kept).
void accumulate(TensorCheck& total, const TensorCheck& part);

}  // namespace moebench
