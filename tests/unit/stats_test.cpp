#include "harness/measure/stats.hpp"

#include <cmath>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace moebench;

// Expected values were computed by hand (and agree with numpy's defaults); the inputs are short,
// so the only error is the last bit of a few additions: 1e-12 relative is ample.
constexpr double kEps = 1e-12;

TEST_CASE("stats: median of odd and even samples") {
  const std::vector<double> odd = {3, 1, 2};
  const std::vector<double> even = {4, 1, 3, 2};
  CHECK(median(odd) == doctest::Approx(2).epsilon(kEps));
  CHECK(median(even) == doctest::Approx(2.5).epsilon(kEps));
}

TEST_CASE("stats: percentile interpolates linearly between closest ranks (numpy 'linear')") {
  const std::vector<double> x = {10, 20, 30, 40, 50};
  CHECK(percentile(x, 0) == doctest::Approx(10).epsilon(kEps));
  CHECK(percentile(x, 100) == doctest::Approx(50).epsilon(kEps));
  CHECK(percentile(x, 95) == doctest::Approx(48).epsilon(kEps));  // pos 3.8
  CHECK(percentile(x, 30) == doctest::Approx(22).epsilon(kEps));  // pos 1.2
  const std::vector<double> one = {7};
  CHECK(percentile(one, 95) == 7);
}

TEST_CASE("stats: sample standard deviation uses n - 1 and is 0 below two samples") {
  const std::vector<double> x = {2, 4, 4, 4, 5, 5, 7, 9};  // sum of squares about mean 5: 32
  CHECK(sample_stddev(x) == doctest::Approx(std::sqrt(32.0 / 7.0)).epsilon(kEps));
  const std::vector<double> one = {3};
  CHECK(sample_stddev(one) == 0);
  CHECK(mean(x) == doctest::Approx(5).epsilon(kEps));
}

TEST_CASE("stats: summarize, including the empty sample") {
  const std::vector<double> x = {5, 1, 4, 2, 3};
  const Stats s = summarize(x);
  CHECK(s.count == 5);
  CHECK(s.min == 1);
  CHECK(s.max == 5);
  CHECK(s.median == doctest::Approx(3).epsilon(kEps));
  CHECK(s.mean == doctest::Approx(3).epsilon(kEps));
  CHECK(s.p95 == doctest::Approx(4.8).epsilon(kEps));
  CHECK(s.stddev == doctest::Approx(std::sqrt(2.5)).epsilon(kEps));
  const Stats e = summarize(std::vector<double>{});
  CHECK(e.count == 0);
  CHECK(e.median == 0);
  CHECK(e.max == 0);
}

TEST_CASE("stats: json keys") {
  const nlohmann::json j = to_json(summarize(std::vector<double>{1, 2}));
  CHECK(j.size() == 7);
  CHECK(j.at("count") == 2);
  CHECK(j.at("median") == 1.5);
  CHECK(j.contains("p95"));
  CHECK(j.contains("stddev"));
}

TEST_CASE("stats: nccl-tests bus bandwidth factors") {
  CHECK(bus_bandwidth_factor(CollectiveKind::allreduce, 8) == doctest::Approx(1.75).epsilon(kEps));
  CHECK(bus_bandwidth_factor(CollectiveKind::alltoall, 8) == doctest::Approx(0.875).epsilon(kEps));
  CHECK(bus_bandwidth_factor(CollectiveKind::reduce_scatter, 4) == doctest::Approx(0.75));
  CHECK(bus_bandwidth_factor(CollectiveKind::allgather, 2) == doctest::Approx(0.5));
  CHECK(bus_bandwidth_factor(CollectiveKind::allreduce, 1) == 0);
  CHECK(bus_bandwidth_factor(CollectiveKind::alltoall, 1) == 0);
}
