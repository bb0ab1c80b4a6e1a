#include "harness/compute/fp8_recipe.hpp"

#include <functional>

#include "harness/core/error.hpp"
#include "harness/core/hash.hpp"

namespace moebench {

const char* to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::tensor:
      return "tensor";
    case Fp8Recipe::blockwise:
      return "blockwise";
    case Fp8Recipe::mxfp8:
      return "mxfp8";
  }
  return "?";
}

Fp8Recipe parse_fp8_recipe(const std::string& text) {
  if (text == "tensor") return Fp8Recipe::tensor;
  if (text == "blockwise") return Fp8Recipe::blockwise;
  if (text == "mxfp8") return Fp8Recipe::mxfp8;
  throw UsageError("--fp8-recipe " + text +
                   ": unknown recipe; valid: tensor (one scale per tensor), blockwise "
                   "(DeepSeek-V3's 1x128 and 128x128 tiles, Hopper) or mxfp8 (1x32 tiles with "
                   "E8M0 scales, Blackwell)");
}

std::string describe(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::tensor:
      return "per-tensor FP32 scales (amax / 448)";
    case Fp8Recipe::blockwise:
      return "blockwise FP32 scales: activations and gradients in 1x128 tiles along K, weights "
             "in 128x128 blocks (DeepSeek-V3)";
    case Fp8Recipe::mxfp8:
      return "MXFP8: 1x32 tiles along K, E8M0 power-of-two scales";
  }
  return "?";
}

Fp8Recipe resolve_fp8_recipe(std::optional<Fp8Recipe> recipe, Precision precision) {
  if (!recipe) return Fp8Recipe::tensor;
  if (precision != Precision::fp8) {
    throw UsageError(std::string("--fp8-recipe ") + to_string(*recipe) +
                     " needs --precision fp8 (it says how fp8 scales its E4M3 inputs; " +
                     to_string(precision) + " has no scales)");
  }
  return *recipe;
}

bool is_weight(Fp8Operand which, bool trans_a) {
  return which == Fp8Operand::b && !trans_a;
}

std::size_t Fp8WeightViewHash::operator()(const Fp8WeightView& v) const {
  std::size_t h = std::hash<const void*>()(v.data);
  for (std::int64_t x : {v.rows, v.cols, v.ld}) hash_mix(h, static_cast<std::uint64_t>(x));
  return h ^ (v.trans ? 1u : 0u);
}

Fp8Tile operand_tile(Fp8Recipe r, Fp8Operand which, bool trans_a) {
  switch (r) {
    case Fp8Recipe::tensor:
      return Fp8Tile{};
    case Fp8Recipe::blockwise:
      return is_weight(which, trans_a) ? Fp8Tile{kFp8BlockTile, kFp8BlockTile, false}
                                       : Fp8Tile{1, kFp8BlockTile, false};
    case Fp8Recipe::mxfp8:
      return Fp8Tile{1, kFp8MxTile, true};
  }
  return Fp8Tile{};
}

}  // namespace moebench
