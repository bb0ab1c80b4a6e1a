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
    if (std::isnan(err)) {
      c.max_abs_error = c.max_rel_error = INFINITY;
      continue;
    }
    c.max_abs_error = std::max(c.max_abs_error, err);
    c.max_rel_error = std::max(c.max_rel_error, err / (std::abs(r) + atol));
  }
  return c;
}

double max_abs(std::span<const float> x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

void accumulate(TensorCheck& total, const TensorCheck& part) {
  total.compared += part.compared;
  total.mismatches += part.mismatches;
  total.max_abs_error = std::max(total.max_abs_error, part.max_abs_error);
  total.max_rel_error = std::max(total.max_rel_error, part.max_rel_error);
}

}  // namespace moebench
