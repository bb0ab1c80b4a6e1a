// Summary statistics as pure functions of a sample (google/benchmark's definitions: sample
// standard deviation, 0 for a single sample).
#pragma once

#include <span>

#include <nlohmann/json_fwd.hpp>

namespace moebench {

struct Stats {
  std::size_t count = 0;
  double median = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  double p95 = 0;     // nearest-rank on the sorted sample, interpolated linearly
  double stddev = 0;  // sample (n - 1) standard deviation; 0 when count < 2
};

double median(std::span<const double> x);
double mean(std::span<const double> x);
double percentile(std::span<const double> x, double p);  // p in [0, 100], linear interpolation
double sample_stddev(std::span<const double> x);
// The median absolute deviation from the median (unscaled); times kMadToSigma it estimates a
// normal sample's standard deviation, robustly.
double median_absolute_deviation(std::span<const double> x);
constexpr double kMadToSigma = 1.4826;
// UsageError-free: an empty sample gives count 0 and zeros.
Stats summarize(std::span<const double> x);

nlohmann::json to_json(const Stats& s);

// nccl-tests' bandwidths: algbw = bytes / time; busbw = algbw * factor(n).
enum class CollectiveKind { alltoall, allreduce, reduce_scatter, allgather };
double bus_bandwidth_factor(CollectiveKind k, int n);

}  // namespace moebench
