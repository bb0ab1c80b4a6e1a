// compare(): the mismatch count, the tolerance boundary, NaN and infinities, errors; accumulate.
#include "harness/verify/compare.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

using Vec = std::vector<float>;

TEST_CASE("compare counts elements outside atol + rtol |ref|") {
  // Values and tolerances are binary fractions, so every bound below is exact.
  const Vec ref = {1.0f, -2.0f, 4.0f, 0.0f};
  const Vec got = {1.0f, -2.5f, 4.25f, 0.125f};
  // Bounds with atol 0.25, rtol 0.125: 0.375, 0.5, 0.75, 0.25. Errors: 0, 0.5, 0.25, 0.125.
  TensorCheck c = compare("t", got, ref, 0.25, 0.125);
  CHECK(c.name == "t");
  CHECK(c.compared == 4);
  CHECK(c.mismatches == 0);  // -2.5 sits exactly on its bound: inclusive
  CHECK(c.max_abs_error == 0.5);
  // err / (|ref| + atol): 0, 0.5 / 2.25, 0.25 / 4.25, 0.125 / 0.25 -> the last.
  CHECK(c.max_rel_error == 0.5);
  // Tighten rtol: only the element at -2.5 crosses (its bound drops to 0.25 + 0.0625 * 2).
  c = compare("t", got, ref, 0.25, 0.0625);
  CHECK(c.mismatches == 1);
  // Just past the boundary.
  const Vec past = {1.0f, std::nextafter(-2.5f, -3.0f), 4.0f, 0.0f};
  CHECK(compare("t", past, ref, 0.25, 0.125).mismatches == 1);
  CHECK(compare("t", ref, ref, 0.0, 0.0).mismatches == 0);
  // An exact zero against zero with atol 0 (an all-zero reference tensor) is 0 / 0: it must not
  // turn the relative error into NaN.
  c = compare("z", Vec{0.0f, 0.0f}, Vec{0.0f, 0.0f}, 0.0, 0.0);
  CHECK(c.mismatches == 0);
  CHECK(c.max_rel_error == 0.0);
  CHECK(c.max_abs_error == 0.0);
}

TEST_CASE("compare counts NaN and infinity as mismatches, apart from the finite maxima") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Vec ref = {1.0f, 2.0f, 3.0f};
  TensorCheck c = compare("n", Vec{1.0f, nan, 3.0f}, ref, 1.0, 1.0);
  CHECK(c.mismatches == 1);
  CHECK(c.nonfinite == 1);
  CHECK(c.max_abs_error == 0.0);  // the maxima stay finite numbers (a report can hold them)
  // A NaN in the reference is a mismatch too (nothing can match it).
  c = compare("n", ref, Vec{1.0f, 2.0f, nan}, 1.0, 1.0);
  CHECK(c.mismatches == 1);
  CHECK(c.nonfinite == 1);
  c = compare("i", Vec{inf, 2.0f, 3.0f}, ref, 1.0, 1.0);
  CHECK(c.mismatches == 1);
  CHECK(c.nonfinite == 1);
  // A finite error beside it is still measured.
  c = compare("n", Vec{nan, 2.5f, 3.0f}, ref, 0.0, 0.0);
  CHECK(c.mismatches == 2);
  CHECK(c.nonfinite == 1);
  CHECK(c.max_abs_error == 0.5);
  TensorCheck total;
  accumulate(total, c);
  accumulate(total, c);
  CHECK(total.nonfinite == 2);
}

TEST_CASE("compare rejects different lengths; empty tensors compare nothing") {
  CHECK_THROWS_AS(compare("x", Vec{1.0f}, Vec{1.0f, 2.0f}, 0.0, 0.0), RuntimeError);
  const TensorCheck c = compare("e", Vec{}, Vec{}, 0.0, 0.0);
  CHECK(c.compared == 0);
  CHECK(c.mismatches == 0);
}

TEST_CASE("max_abs and accumulate") {
  CHECK(max_abs(Vec{1.0f, -3.5f, 2.0f}) == 3.5);
  CHECK(max_abs(Vec{}) == 0.0);
  TensorCheck total;
  TensorCheck a;
  a.compared = 10;
  a.mismatches = 2;
  a.max_abs_error = 0.5;
  a.max_rel_error = 0.1;
  TensorCheck b;
  b.compared = 5;
  b.mismatches = 1;
  b.max_abs_error = 0.25;
  b.max_rel_error = 0.3;
  accumulate(total, a);
  accumulate(total, b);
  CHECK(total.compared == 15);
  CHECK(total.mismatches == 3);
  CHECK(total.max_abs_error == 0.5);
  CHECK(total.max_rel_error == 0.3);
}

TEST_CASE("verify tolerances sit between rounding and real errors") {
  // Rounding differences are ~1e-6 relative; a wrong value is O(1).
  CHECK(kVerifyRtol > 1e-5);
  CHECK(kVerifyRtol < 1e-1);
  CHECK(kVerifyAtolOfMax > 1e-6);
  CHECK(kVerifyAtolOfMax < 1e-2);
}

}  // namespace
}  // namespace moebench

namespace moebench {
namespace {

TEST_CASE("verify_tolerance: FP32 keeps the tight bounds, BF16 storage gets looser ones") {
  const VerifyTolerance f = verify_tolerance(DType::f32);
  CHECK(f.rtol == kVerifyRtol);
  CHECK(f.atol_of_max == kVerifyAtolOfMax);
  CHECK(f.reason.find("FP32") != std::string::npos);
  const VerifyTolerance b = verify_tolerance(DType::bf16);
  CHECK(b.rtol == kVerifyRtolBf16);
  CHECK(b.atol_of_max == kVerifyAtolOfMaxBf16);
  CHECK(b.rtol > f.rtol);
  CHECK(b.reason.find("BF16") != std::string::npos);
  // A bf16 rounding (2^-9 relative) passes, a doubled value does not.
  const Vec ref = {1.0f, -0.5f};
  CHECK(compare("b", Vec{1.0f + 1.0f / 512, -0.5f}, ref, b.atol_of_max * max_abs(ref), b.rtol)
            .mismatches == 0);
  CHECK(compare("b", Vec{2.0f, -0.5f}, ref, b.atol_of_max * max_abs(ref), b.rtol).mismatches == 1);
  CHECK_THROWS_AS(verify_tolerance(DType::i32), RuntimeError);
}

TEST_CASE("verify_tolerance: fp8 bounds are one E4M3 GEMM's worst case, whatever the storage") {
  for (DType storage : {DType::f32, DType::bf16}) {
    const VerifyTolerance t = verify_tolerance(storage, LinearPrecision::fp8);
    CHECK(t.rtol == kVerifyRtolFp8);
    CHECK(t.atol_of_max == kVerifyAtolOfMaxFp8);
    CHECK(t.reason.find("E4M3") != std::string::npos);
    const Vec ref = {1.0f, -0.5f};
    // Two inputs each rounded by 2^-4 the other way: a product off by 2^-3 still passes...
    CHECK(compare("q", Vec{1.0f + 0.12f, -0.5f}, ref, t.atol_of_max * max_abs(ref), t.rtol)
              .mismatches == 0);
    // ... a doubled or lost value does not.
    CHECK(compare("q", Vec{2.0f, -0.5f}, ref, t.atol_of_max * max_abs(ref), t.rtol).mismatches ==
          1);
    CHECK(compare("q", Vec{1.0f, 0.0f}, ref, t.atol_of_max * max_abs(ref), t.rtol).mismatches == 1);
  }
  CHECK(verify_tolerance(DType::f32, LinearPrecision::standard).rtol == kVerifyRtol);
}

}  // namespace
}  // namespace moebench
