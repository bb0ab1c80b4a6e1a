#include "harness/measure/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

std::vector<double> sorted_copy(std::span<const double> x) {
  std::vector<double> v(x.begin(), x.end());
  std::sort(v.begin(), v.end());
  return v;
}

// numpy's default ('linear'): position p/100 * (n - 1) between the closest ranks.
double percentile_sorted(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

}  // namespace

double median(std::span<const double> x) {
  return percentile(x, 50.0);
}

double mean(std::span<const double> x) {
  if (x.empty()) return 0;
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double percentile(std::span<const double> x, double p) {
  MB_CHECK(p >= 0 && p <= 100, "percentile " << p << " outside [0, 100]");
  return percentile_sorted(sorted_copy(x), p);
}

double median_absolute_deviation(std::span<const double> x) {
  if (x.empty()) return 0;
  const double m = median(x);
  std::vector<double> d;
  d.reserve(x.size());
  for (double v : x) d.push_back(std::fabs(v - m));
  return median(d);
}

double sample_stddev(std::span<const double> x) {
  if (x.size() < 2) return 0;
  const double m = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

Stats summarize(std::span<const double> x) {
  Stats s;
  if (x.empty()) return s;
  const std::vector<double> v = sorted_copy(x);
  s.count = v.size();
  s.median = percentile_sorted(v, 50.0);
  s.mean = mean(x);
  s.min = v.front();
  s.max = v.back();
  s.p95 = percentile_sorted(v, 95.0);
  s.stddev = sample_stddev(x);
  return s;
}

nlohmann::json to_json(const Stats& s) {
  return nlohmann::json{{"count", s.count},  {"median", s.median}, {"mean", s.mean},
                        {"min", s.min},      {"max", s.max},       {"p95", s.p95},
                        {"stddev", s.stddev}};
}

double bus_bandwidth_factor(CollectiveKind k, int n) {
  MB_CHECK(n >= 1, "group size " << n);
  const double ratio = static_cast<double>(n - 1) / static_cast<double>(n);
  return k == CollectiveKind::allreduce ? 2.0 * ratio : ratio;
}

}  // namespace moebench
