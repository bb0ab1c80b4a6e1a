#include "harness/verify/compare.hpp"

#include <algorithm>
#include <cmath>

#include "harness/core/error.hpp"

namespace moebench {

TensorCheck compare(const std::string& name, std::span<const float> got, std::span<const float> ref,
                    double atol, double rtol) {
  MB_CHECK(got.size() == ref.size(),
           "comparing " << name << ": " << got.size() << " values against " << ref.size());
  TensorCheck c;
  c.name = name;
  c.compared = static_cast<long long>(got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], r = ref[i];
    const double err = std::abs(g - r);
    // NaN compares false everywhere: count it explicitly.
    const bool bad = !(err <= atol + rtol * std::abs(r));
    if (bad) ++c.mismatches;
    if (!std::isfinite(err)) {
      ++c.nonfinite;  // a NaN or an infinity: a mismatch, counted apart from the maxima
      continue;
    }
    c.max_abs_error = std::max(c.max_abs_error, err);
    c.max_rel_error = std::max(c.max_rel_error, err / (std::abs(r) + atol));
  }
  return c;
}

VerifyTolerance verify_tolerance(DType storage, LinearPrecision linear) {
  VerifyTolerance t;
  if (linear == LinearPrecision::fp8) {
    MB_CHECK(storage == DType::f32 || storage == DType::bf16,
             "--verify has no tolerance for " << dtype_name(storage));
    t.rtol = kVerifyRtolFp8;
    t.atol_of_max = kVerifyAtolOfMaxFp8;
    t.reason =
        "|got - ref| <= atol x max|ref| + rtol x |ref| per tensor: fp8 rounds every linear GEMM's "
        "inputs to E4M3 (up to 2^-4 of a value) with scales (per tensor, or per tile along K) "
        "that may differ between a rank's slice and the reference's whole batch, so one GEMM's "
        "product may move by 2 x 2^-4 "
        "= 2^-3 of its size; bounds of 2^-3 hold that, a wrong, lost or misrouted value is O(1) "
        "or more";
    return t;
  }
  if (storage == DType::bf16) {
    t.rtol = kVerifyRtolBf16;
    t.atol_of_max = kVerifyAtolOfMaxBf16;
    t.reason =
        "|got - ref| <= atol x max|ref| + rtol x |ref| per tensor: both runs store BF16 (8 "
        "significant bits) and round at different points (GEMM splits, the all-reduce's partial "
        "sums), which moves elements by ~1e-3 to 1e-2 of their size; a wrong, lost or misrouted "
        "value is O(1)";
    return t;
  }
  MB_CHECK(storage == DType::f32, "--verify has no tolerance for " << dtype_name(storage));
  t.reason =
      "|got - ref| <= atol x max|ref| + rtol x |ref| per tensor: both runs are FP32 and differ "
      "only in summation order (~1e-6 of a tensor's scale); a wrong, lost or misrouted value is "
      "O(1)";
  return t;
}

double max_abs(std::span<const float> x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

void accumulate(TensorCheck& total, const TensorCheck& part) {
  total.compared += part.compared;
  total.mismatches += part.mismatches;
  total.nonfinite += part.nonfinite;
  total.max_abs_error = std::max(total.max_abs_error, part.max_abs_error);
  total.max_rel_error = std::max(total.max_rel_error, part.max_rel_error);
}

}  // namespace moebench
