// The link test's verdicts: pure functions of the measured pairs, so they are tested on recorded
// figures without MPI. Each directed pair (src -> dst) has a bandwidth (a large message) and a
// latency (a small one), as the receiver timed them. Pairs are judged against the median of their
// class (the same node, the same NVLink domain across nodes, or across domains: their figures
// differ by design) by the health check's rule: slower than that median by more than a relative
// threshold and by more than k robust standard deviations of the class.
#pragma once

#include <string>
#include <vector>

#include "harness/measure/health.hpp"

namespace moebench {

// The default minimum slowdown of a link on the host backend: 10x. Host ranks share 2 cores and
// their memory bandwidth here: in 20 clean runs of 4 and 8 ranks a pair's best-of-20 bandwidth
// fell to 1/3.1 of its class's median while the pairs of a round competed for memory, and a best
// of 100 ping-pongs reached 6.5x the median latency when the two ranks were rarely running at
// once. A GPU's links use the health check's 10% (kDeviceMinSlowdown).
constexpr double kHostLinkMinSlowdown = 9.0;

enum class LinkClass { same_node, same_domain, cross_domain };
constexpr LinkClass kLinkClasses[] = {LinkClass::same_node, LinkClass::same_domain,
                                      LinkClass::cross_domain};
const char* to_string(LinkClass c);

// Where each rank is: its node and its NVLink domain (a number per distinct domain).
struct LinkPlacement {
  std::vector<int> node;
  std::vector<int> domain;
};
LinkClass classify(int a, int b, const LinkPlacement& p);

struct LinkSample {
  int src = 0;
  int dst = 0;
  double bandwidth = 0;  // bytes/s of the large message
  double latency_s = 0;  // seconds of the small message
};

struct LinkClassSummary {
  LinkClass cls = LinkClass::same_node;
  int directed_pairs = 0;
  double median_bandwidth = 0;
  double median_latency_s = 0;
};

// A pair of ranks whose link is slow in at least one direction, in one metric.
struct LinkOutlier {
  int a = 0;  // a < b
  int b = 0;
  LinkClass cls = LinkClass::same_node;
  std::string metric;  // "bandwidth" or "latency"
  double a_to_b = 0;   // the metric's value in each direction (bytes/s or seconds)
  double b_to_a = 0;
  double median = 0;       // of the class
  double slowdown = 0;     // of the worse direction against the median (>= 1)
  std::string directions;  // "a->b", "b->a" or "both": the directions past the thresholds
};

struct LinkAnalysis {
  std::vector<LinkClassSummary> classes;  // the classes that have pairs, in kLinkClasses order
  std::vector<LinkOutlier> outliers;      // by (a, b), bandwidth before latency
};

// Classes with fewer than kMinRanksCompared directed pairs are summarised but not judged.
LinkAnalysis analyse_links(const std::vector<LinkSample>& samples, const LinkPlacement& placement,
                           const HealthThresholds& t);

}  // namespace moebench
