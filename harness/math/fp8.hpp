// FP8 E4M3 arithmetic of `--precision fp8`, written once: the cpu backend's emulation and the
// cuda backend's quantise kernel call the same rounding, so the CPU tests check the values the
// GPU feeds its tensor cores.
//
// E4M3 here is the "fn" variant of the OCP FP8 format that NVIDIA's __nv_fp8_e4m3 and cuBLASLt's
// CUDA_R_8F_E4M3 use: 1 sign, 4 exponent (bias 7) and 3 mantissa bits, no infinities, one NaN
// pattern, largest finite 448 = 1.75 x 2^8, smallest normal 2^-6, subnormals k x 2^-9 (k = 1..7).
// With 3 mantissa bits a rounded value is within 2^-4 of the input, relatively, for inputs in the
// normal range.
//
// Scaling is per tensor (one FP32 scale for each GEMM operand): scale = 448 / amax maps the
// largest magnitude onto E4M3's largest value, the GEMM multiplies the quantised values and the
// result is multiplied by both descales (1 / scale). DeepSeek-V3 itself scales finer (1 x 128
// tiles of activations, 128 x 128 blocks of weights); per-tensor scaling is what cuBLASLt's FP8
// GEMM takes on Hopper.
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/math/hd.hpp"

namespace moebench {

constexpr float kE4m3Max = 448.0f;
constexpr float kE4m3MinNormal = 0.015625f;        // 2^-6
constexpr float kE4m3MinSubnormal = 0.001953125f;  // 2^-9, the spacing below 2^-6

// x rounded to the nearest E4M3 value, ties to even; magnitudes beyond 448 saturate to +-448
// (the "satfinite" conversion: an overflowing activation must not become NaN); NaN stays NaN.
// rintf rounds ties to even in the default rounding mode, on the host and on the device.
MB_HD float e4m3_round(float x) {
  if (x != x) return x;  // NaN
  const float a = ::fabsf(x);
  if (a >= kE4m3Max) return ::copysignf(kE4m3Max, x);
  float r;
  if (a < kE4m3MinNormal) {
    // Subnormal range: a fixed spacing of 2^-9 (scaling by a power of two is exact).
    r = ::rintf(a * 512.0f) * kE4m3MinSubnormal;
  } else {
    // a = f x 2^e with f in [0.5, 1): the binade [2^(e-1), 2^e) has 8 values, spacing 2^(e-4).
    int e = 0;
    (void)::frexpf(a, &e);
    r = ::ldexpf(::rintf(::ldexpf(a, 4 - e)), e - 4);
    // The top binade [256, 512) rounds (448, 464] down to 448 (ties to even) and nothing above
    // 448 reaches here, but keep the bound explicit.
    r = ::fminf(r, kE4m3Max);
  }
  return ::copysignf(r, x);
}

// The bit pattern of an E4M3 value v (as e4m3_round returns it; anything else is rounded down in
// its mantissa): sign, exponent biased by 7, 3 mantissa bits; exponent 0 holds the subnormals
// k x 2^-9. NaN is 0x7f. e4m3_value is its inverse: e4m3_value(e4m3_bits(v)) == v for every E4M3
// value v, so a copy kept as bytes gives back exactly the values it was made from.
MB_HD std::uint8_t e4m3_bits(float v) {
  if (v != v) return 0x7f;
  const std::uint8_t sign = ::copysignf(1.0f, v) < 0.0f ? 0x80 : 0x00;
  const float a = ::fabsf(v);
  // Below 2^-6: k x 2^-9 with k in [0, 8); 2^-6 itself gives k = 8, exponent 1 mantissa 0.
  if (a < kE4m3MinNormal) return sign | static_cast<std::uint8_t>(::rintf(a * 512.0f));
  int e = 0;
  (void)::frexpf(a, &e);  // a in [2^(e-1), 2^e): biased exponent e - 1 + 7, a x 2^(4-e) in [8, 16)
  const int mantissa = static_cast<int>(::ldexpf(a, 4 - e)) - 8;
  return sign | static_cast<std::uint8_t>(((e + 6) << 3) | mantissa);
}
MB_HD float e4m3_value(std::uint8_t bits) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return ::nanf("");
  const float a = exponent == 0 ? ::ldexpf(static_cast<float>(mantissa), -9)
                                : ::ldexpf(static_cast<float>(8 + mantissa), exponent - 10);
  return (bits & 0x80) != 0 ? -a : a;
}

// The per-tensor scale for an operand whose largest magnitude is amax: 448 / amax, or 1 when the
// operand is all zeros (or amax is not finite, so NaN and inf pass through unscaled). Always
// finite: for an amax below 448 / FLT_MAX (about 1.3e-36) the quotient overflows to inf, and
// 0 x inf would make the operand's zeros NaN, so the scale stops at the largest power of two
// below FLT_MAX (2^127: exact to undo, and the operand's values still map to at most 448).
constexpr float kFp8MaxScale = 1.7014118e38f;  // 2^127
MB_HD float fp8_scale(float amax) {
  if (!(amax > 0.0f && amax <= 3.4028235e38f)) return 1.0f;  // also false for NaN
  const float s = kE4m3Max / amax;
  return s < kFp8MaxScale ? s : kFp8MaxScale;
}

// What the GEMM's result is multiplied by, once per operand.
MB_HD float fp8_descale(float scale) {
  return 1.0f / scale;
}

// One element of an operand as the FP8 GEMM sees it: x x scale, rounded to E4M3.
MB_HD float fp8_quantize(float x, float scale) {
  return e4m3_round(x * scale);
}

// ---- Block scaling (--fp8-recipe blockwise and mxfp8) ------------------------------------------
//
// A block-scaled operand has one scale per tile of elements that share it, tiles laid along the
// GEMM's contraction dimension K (the hardware applies a scale per K-slice of the dot product):
//   blockwise (DeepSeek-V3): activations and gradients 1 x 128 (one row of op(A), or one column
//     of op(B), times 128 of K), weights 128 x 128; FP32 scales 448 / amax as per tensor.
//   mxfp8 (OCP MX): every operand 1 x 32 along K; the scale a power of two stored as E8M0.
// A tile is given in GEMM coordinates: `outer` along M (for A) or N (for B), `k` along K.
struct Fp8Tile {
  std::int64_t outer = 0;     // 0: the whole extent (per tensor)
  std::int64_t k = 0;         // 0: the whole extent
  bool power_of_two = false;  // E8M0 scales (mxfp8)
};
constexpr std::int64_t kFp8BlockTile = 128;  // blockwise: 1 x 128 and 128 x 128
constexpr std::int64_t kFp8MxTile = 32;      // mxfp8: 1 x 32

// MX's scale for a tile whose largest magnitude is amax: the power of two 2^-e with the smallest
// e for which amax x 2^-e <= 448, so no element saturates (Transformer Engine's rounding: the
// OCP spec's floor can push the largest element past 448). e stays within E8M0's range
// [-127, 127]; an all-zero or non-finite tile gets 1.
MB_HD float fp8_mx_scale(float amax) {
  if (!(amax > 0.0f && amax <= 3.4028235e38f)) return 1.0f;
  int e = 0;
  (void)::frexpf(amax / kE4m3Max, &e);  // amax / 448 in [2^(e-1), 2^e)
  // The quotient is rounded; step e so that amax <= 448 x 2^e exactly and 448 x 2^(e-1) < amax.
  while (e > -127 && ::ldexpf(kE4m3Max, e - 1) >= amax) --e;
  while (e < 127 && ::ldexpf(kE4m3Max, e) < amax) ++e;
  if (e < -127) e = -127;
  if (e > 127) e = 127;
  return ::ldexpf(1.0f, -e);
}

// The scale of a tile under `tile`: MX's power of two, else 448 / amax.
MB_HD float fp8_tile_scale(float amax, const Fp8Tile& tile) {
  return tile.power_of_two ? fp8_mx_scale(amax) : fp8_scale(amax);
}

// E8M0, the MX scale's storage: the biased exponent of the descale (1 / scale), 2^(b - 127).
// The descale is a power of two in [2^-127, 2^127], so b is in [0, 254] (255 is NaN).
MB_HD std::uint8_t e8m0_from_descale(float descale) {
  int e = 0;
  (void)::frexpf(descale, &e);  // descale = 0.5 x 2^e
  return static_cast<std::uint8_t>(e - 1 + 127);
}
MB_HD float e8m0_to_descale(std::uint8_t biased) {
  return ::ldexpf(1.0f, static_cast<int>(biased) - 127);
}

// Where cuBLASLt reads the scale of an operand's (outer row r, K-block c) in MXFP8's 128 x 4
// tiled layout (CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0): the scale matrix, rows x K/32, is
// padded to a multiple of 128 rows and 4 columns and cut into 128 x 4 tiles of 512 bytes, in
// row-major order of tiles; inside a tile, row r % 32 of each of its four 32-row groups sits
// together: offset (r % 32) x 16 + (r % 128) / 32 x 4 + c % 4.
MB_HD std::int64_t mx_scale_offset(std::int64_t r, std::int64_t c, std::int64_t k_blocks) {
  const std::int64_t tiles_per_row = (k_blocks + 3) / 4;
  return ((r / 128) * tiles_per_row + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}
MB_HD std::int64_t mx_scale_bytes(std::int64_t rows, std::int64_t k_blocks) {
  return (rows + 127) / 128 * 128 * ((k_blocks + 3) / 4 * 4);
}

// Where cuBLASLt reads blockwise FP32 scales (Hopper). VEC128_32F (1 x 128 tiles): scale (r, c)
// at c x rows + r, the outer dimension contiguous. BLK128x128_32F (128 x 128 blocks): block
// (rb, c) at rb x round_up(k_blocks, 4) + c, K-blocks contiguous, padded to a multiple of 4.
MB_HD std::int64_t vec128_scale_offset(std::int64_t r, std::int64_t c, std::int64_t rows) {
  return c * rows + r;
}
MB_HD std::int64_t blk128_scale_offset(std::int64_t rb, std::int64_t c, std::int64_t k_blocks) {
  return rb * ((k_blocks + 3) / 4 * 4) + c;
}

}  // namespace moebench
