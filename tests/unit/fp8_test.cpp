// E4M3 rounding and the per-tensor scale rule against hand-computed values and against the
// format's own table of values (decoded from the bit patterns, independently of e4m3_round).
#include "harness/math/fp8.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "harness/math/random.hpp"

namespace moebench {
namespace {

// The value of E4M3 (fn) bit pattern `bits` (sign bit clear, 0..126; 127 is NaN).
float decode_e4m3(int bits) {
  const int exponent = (bits >> 3) & 15;
  const int mantissa = bits & 7;
  if (exponent == 0) return std::ldexp(static_cast<float>(mantissa), -9);
  return std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

TEST_CASE("e4m3_round: hand-computed values") {
  // Exact checks: every expected value is an E4M3 value, so the result must equal it exactly.
  CHECK(e4m3_round(1.0f) == 1.0f);
  CHECK(e4m3_round(0.0625f) == 0.0625f);
  CHECK(e4m3_round(-2.5f) == -2.5f);
  CHECK(e4m3_round(1.07f) == 1.125f);  // spacing 1/8 in [1, 2): nearer 1.125 than 1.0
  // Ties go to the even mantissa: 1 + 1/16 lies between 1.0 (000) and 1.125 (001).
  CHECK(e4m3_round(1.0625f) == 1.0f);
  CHECK(e4m3_round(1.1875f) == 1.25f);  // between 1.125 (001) and 1.25 (010)
  CHECK(e4m3_round(232.0f) == 224.0f);  // between 224 (110) and 240 (111)
  CHECK(e4m3_round(448.0f) == 448.0f);
  CHECK(e4m3_round(464.0f) == 448.0f);  // the tie above 448 goes to 448's even mantissa
  CHECK(e4m3_round(500.0f) == 448.0f);  // saturates, no infinity
  CHECK(e4m3_round(-1e30f) == -448.0f);
  CHECK(e4m3_round(std::numeric_limits<float>::infinity()) == 448.0f);
  // Subnormals: spacing 2^-9 below 2^-6.
  CHECK(e4m3_round(0.001953125f) == 0.001953125f);  // 2^-9, the smallest
  CHECK(e4m3_round(0.0009765625f) == 0.0f);         // 2^-10: tie between 0 and 2^-9
  CHECK(e4m3_round(0.0029296875f) == 0.00390625f);  // 1.5 x 2^-9: tie -> 2 x 2^-9
  CHECK(e4m3_round(0.0146484375f) == 0.015625f);    // 7.5 x 2^-9: tie -> 8 x 2^-9 = 2^-6
  CHECK(e4m3_round(0.0005f) == 0.0f);
  CHECK(std::signbit(e4m3_round(-0.0f)));
  CHECK(std::isnan(e4m3_round(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("e4m3_round: every E4M3 value is kept, every midpoint goes to the even neighbour") {
  std::vector<float> values;
  for (int bits = 0; bits < 127; ++bits) values.push_back(decode_e4m3(bits));
  REQUIRE(values.back() == 448.0f);
  for (std::size_t i = 0; i < values.size(); ++i) {
    CAPTURE(i);
    CHECK(e4m3_round(values[i]) == values[i]);
    CHECK(e4m3_round(-values[i]) == -values[i]);
    if (i + 1 == values.size()) continue;
    const float lo = values[i], hi = values[i + 1];
    const float mid = 0.5f * (lo + hi);  // exact in FP32
    CHECK(e4m3_round(mid) == (i % 2 == 0 ? lo : hi));
    // Just off the midpoint the nearer neighbour wins.
    CHECK(e4m3_round(std::nextafter(mid, lo)) == lo);
    CHECK(e4m3_round(std::nextafter(mid, hi)) == hi);
  }
}

TEST_CASE("e4m3_round: relative error at most 2^-4 in the normal range") {
  // Half the spacing of 3 mantissa bits: |round(x) - x| <= 2^-4 |x| for 2^-6 <= |x| <= 448.
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const float x =
        std::ldexp(1.0f + 0.999f * std::fabs(uniform_pm1(3, 1, i)), -6 + static_cast<int>(i % 14));
    if (x > 448.0f) continue;
    CAPTURE(x);
    CHECK(std::fabs(e4m3_round(x) - x) <= 0.0625f * x);
  }
}

TEST_CASE("fp8_scale: a tiny amax gives a finite scale, so zeros stay zeros") {
  // 448 / 1e-38 overflows FP32: the scale stops at 2^127, and descaling it is exact.
  for (float amax : {1e-38f, std::numeric_limits<float>::denorm_min(), 1.0e-36f}) {
    CAPTURE(amax);
    const float s = fp8_scale(amax);
    CHECK(std::isfinite(s));
    CHECK(s <= kFp8MaxScale);
    CHECK(fp8_quantize(0.0f, s) == 0.0f);  // 0 x inf would be NaN
    CHECK(std::fabs(fp8_quantize(amax, s)) <= 448.0f);
    CHECK(std::isfinite(fp8_descale(s)));
  }
  CHECK(fp8_scale(1e-38f) == kFp8MaxScale);
  CHECK(fp8_scale(448.0f / 1e30f) == doctest::Approx(1e30f));  // far from the cap: unchanged
}

TEST_CASE("fp8_scale: amax maps onto 448; zeros and non-finite amax keep scale 1") {
  CHECK(fp8_scale(2.0f) == 224.0f);
  CHECK(fp8_scale(448.0f) == 1.0f);
  CHECK(fp8_scale(0.0f) == 1.0f);
  CHECK(fp8_scale(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(fp8_scale(std::numeric_limits<float>::quiet_NaN()) == 1.0f);
  CHECK(fp8_descale(224.0f) == doctest::Approx(1.0f / 224.0f).epsilon(1e-7));
  // The largest element quantises to 448 (or within FP32 rounding of amax x 448 / amax, which
  // still rounds to 448), so the full range of the format is used.
  for (float amax : {3.7f, 0.001f, 1234.5f, 1.0f}) {
    CAPTURE(amax);
    CHECK(fp8_quantize(amax, fp8_scale(amax)) == 448.0f);
    CHECK(fp8_quantize(-amax, fp8_scale(amax)) == -448.0f);
  }
}

TEST_CASE("fp8_mx_scale: the power of two that keeps the tile within 448, as tightly as that") {
  for (float amax : {1.0f, 448.0f, 449.0f, 3.7f, 0.001f, 1234.5f, 224.0f, 224.1f, 1e-30f, 7e30f}) {
    CAPTURE(amax);
    const float s = fp8_mx_scale(amax);
    int e = 0;
    CHECK(std::frexp(s, &e) == 0.5f);  // a power of two
    CHECK(amax * s <= 448.0f);         // nothing saturates
    CHECK(amax * s * 2.0f > 448.0f);   // and twice the scale would
  }
  CHECK(fp8_mx_scale(448.0f) == 1.0f);
  CHECK(fp8_mx_scale(449.0f) == 0.5f);
  CHECK(fp8_mx_scale(224.0f) == 2.0f);
  CHECK(fp8_mx_scale(0.0f) == 1.0f);
  CHECK(fp8_mx_scale(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(fp8_mx_scale(std::numeric_limits<float>::quiet_NaN()) == 1.0f);
  // E8M0's range: 2^127 at most, whatever the tile.
  CHECK(fp8_mx_scale(1e-44f) == std::ldexp(1.0f, 127));
  // The tile scale picks the recipe's rule.
  CHECK(fp8_tile_scale(3.0f, Fp8Tile{1, 32, true}) == fp8_mx_scale(3.0f));
  CHECK(fp8_tile_scale(3.0f, Fp8Tile{1, 128, false}) == fp8_scale(3.0f));
}

TEST_CASE("e8m0: the descale's biased exponent, and back") {
  CHECK(e8m0_from_descale(1.0f) == 127);
  CHECK(e8m0_from_descale(2.0f) == 128);
  CHECK(e8m0_from_descale(0.25f) == 125);
  CHECK(e8m0_from_descale(std::ldexp(1.0f, -127)) == 0);
  CHECK(e8m0_from_descale(std::ldexp(1.0f, 127)) == 254);
  for (float amax : {0.003f, 1.0f, 500.0f, 1e20f}) {
    const float descale = fp8_descale(fp8_mx_scale(amax));
    CHECK(e8m0_to_descale(e8m0_from_descale(descale)) == descale);
  }
}

TEST_CASE("mx_scale_offset: the 128x4 tiled layout, a bijection onto the padded buffer") {
  // Hand-computed from the layout's description: row 0..31 of a tile at 16-byte strides, the
  // four 32-row groups 4 bytes apart, the K-block within the group of 4 last.
  CHECK(mx_scale_offset(0, 0, 8) == 0);
  CHECK(mx_scale_offset(0, 3, 8) == 3);
  CHECK(mx_scale_offset(1, 0, 8) == 16);
  CHECK(mx_scale_offset(32, 0, 8) == 4);
  CHECK(mx_scale_offset(33, 1, 8) == 21);
  CHECK(mx_scale_offset(0, 4, 8) == 512);        // the next tile along K
  CHECK(mx_scale_offset(128, 0, 8) == 2 * 512);  // the next tile down: 2 tiles per row of tiles
  CHECK(mx_scale_offset(127, 7, 8) == 512 + 31 * 16 + 3 * 4 + 3);
  for (const auto [rows, kb] : {std::pair<std::int64_t, std::int64_t>{256, 8}, {200, 5}, {1, 1}}) {
    CAPTURE(rows);
    CAPTURE(kb);
    const std::int64_t bytes = mx_scale_bytes(rows, kb);
    std::vector<int> hits(static_cast<std::size_t>(bytes), 0);
    const std::int64_t padded_rows = (rows + 127) / 128 * 128, padded_kb = (kb + 3) / 4 * 4;
    for (std::int64_t r = 0; r < padded_rows; ++r) {
      for (std::int64_t c = 0; c < padded_kb; ++c) {
        const std::int64_t at = mx_scale_offset(r, c, kb);
        REQUIRE(at >= 0);
        REQUIRE(at < bytes);
        ++hits[static_cast<std::size_t>(at)];
      }
    }
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  }
}

TEST_CASE("blockwise scale offsets: outer-contiguous 1x128, K-block-contiguous 128x128") {
  CHECK(vec128_scale_offset(5, 0, 64) == 5);
  CHECK(vec128_scale_offset(5, 2, 64) == 2 * 64 + 5);
  CHECK(blk128_scale_offset(0, 3, 3) == 3);
  CHECK(blk128_scale_offset(1, 0, 3) == 4);  // 3 K-blocks padded to 4
  CHECK(blk128_scale_offset(2, 5, 8) == 2 * 8 + 5);
}

TEST_CASE("e4m3_bits and e4m3_value: every bit pattern, both signs, against the format's table") {
  for (int bits = 0; bits < 127; ++bits) {
    CAPTURE(bits);
    const float v = decode_e4m3(bits);
    CHECK(e4m3_value(static_cast<std::uint8_t>(bits)) == v);
    CHECK(e4m3_bits(v) == bits);
    CHECK(e4m3_value(static_cast<std::uint8_t>(bits | 0x80)) == -v);
    CHECK(e4m3_bits(-v) == (bits | 0x80));
    // A copy kept as bytes gives back exactly what the GEMM would have read.
    CHECK(e4m3_value(e4m3_bits(e4m3_round(v * 1.03f))) == e4m3_round(v * 1.03f));
  }
  CHECK(std::isnan(e4m3_value(0x7f)));
  CHECK(std::isnan(e4m3_value(0xff)));
  CHECK(e4m3_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7f);
}

}  // namespace
}  // namespace moebench
