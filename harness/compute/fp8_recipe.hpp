// --fp8-recipe: how --precision fp8 scales the linear GEMMs' E4M3 inputs, parsed once here. The
// tile geometry of each recipe is the one place that knows which operand of a linear GEMM is a
// weight (see operand_tile); the arithmetic itself is harness/math/fp8.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "harness/compute/backend_kind.hpp"

#include "harness/math/fp8.hpp"

namespace moebench {

// tensor: one FP32 scale per operand (cuBLASLt's per-tensor scaling, Hopper and newer).
// blockwise: DeepSeek-V3's recipe, 1 x 128 activation tiles and 128 x 128 weight blocks with
// FP32 scales (cuBLASLt's VEC128_32F and BLK128x128_32F, Hopper only).
// mxfp8: OCP MXFP8, 1 x 32 tiles along K with E8M0 (power-of-two) scales (cuBLASLt's
// VEC32_UE8M0, Blackwell).
enum class Fp8Recipe { tensor, blockwise, mxfp8 };

const char* to_string(Fp8Recipe r);
// UsageError naming the valid values.
Fp8Recipe parse_fp8_recipe(const std::string& text);
// One line for the report: tiles and scale format.
std::string describe(Fp8Recipe r);
// What --fp8-recipe gives with `precision` (resolved): tensor when not given; UsageError when
// given without fp8, which has nothing to scale.
Fp8Recipe resolve_fp8_recipe(std::optional<Fp8Recipe> recipe, Precision precision);

// Which operand of a linear GEMM C = op(A) op(B). The step's linear GEMMs follow one convention
// (Compute::linear_gemm): without trans_a, B is the layer's weight (forward x W, data gradient
// dy W^T); with trans_a the GEMM is a weight gradient, x^T dy, whose operands are both
// activations, contracted over the tokens.
enum class Fp8Operand { a, b };
bool is_weight(Fp8Operand which, bool trans_a);
Fp8Tile operand_tile(Fp8Recipe r, Fp8Operand which, bool trans_a);

// A weight as one linear GEMM reads it, the key of its quantised copy kept for the step (one per
// view and transpose, on every backend).
struct Fp8WeightView {
  const void* data = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0;
  bool trans = false;
  bool operator==(const Fp8WeightView&) const = default;
};
struct Fp8WeightViewHash {
  std::size_t operator()(const Fp8WeightView& v) const;
};

}  // namespace moebench
