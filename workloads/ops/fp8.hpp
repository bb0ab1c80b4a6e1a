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

#include "workloads/ops/hd.hpp"

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

}  // namespace moebench
