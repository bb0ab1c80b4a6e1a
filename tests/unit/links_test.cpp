// analyse_links on recorded figures: the best-of-20 bandwidths (GB/s) of a clean 4-rank link test
// on this 2-core machine (`mpirun -np 4 moebench linkcheck --ranks-per-node 2`), then the same
// with the link 1-2 made 4x slower by hand; and the rules (classes, directions, thresholds).
#include "harness/measure/links.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

constexpr double kBw[4][4] = {
    {0, 9.1, 10.2, 9.6}, {8.8, 0, 10.4, 9.9}, {9.7, 10.1, 0, 8.9}, {10.3, 9.4, 9.0, 0}};
constexpr double kLatencyUs = 4.0;

std::vector<LinkSample> samples(double slow_factor) {
  std::vector<LinkSample> out;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      const bool slow = (a == 1 && b == 2) || (a == 2 && b == 1);
      out.push_back({a, b, kBw[a][b] * 1e9 / (slow ? slow_factor : 1.0),
                     kLatencyUs * 1e-6 * (slow ? slow_factor : 1.0)});
    }
  }
  return out;
}

// Ranks 0-3 on nodes 0, 0, 1, 1, one domain per node unless given.
LinkPlacement placement(std::vector<int> domain = {0, 0, 1, 1}) {
  return {{0, 0, 1, 1}, std::move(domain)};
}

TEST_CASE("links: classes by node and domain") {
  const LinkPlacement p = placement({0, 0, 0, 1});
  CHECK(classify(0, 1, p) == LinkClass::same_node);
  CHECK(classify(1, 2, p) == LinkClass::same_domain);
  CHECK(classify(1, 3, p) == LinkClass::cross_domain);
}

TEST_CASE("links: the clean recording has no outliers; the slowed link is named, both ways") {
  const HealthThresholds t{6.0, 2.0};
  const LinkAnalysis clean = analyse_links(samples(1.0), placement(), t);
  CHECK(clean.outliers.empty());
  REQUIRE(clean.classes.size() == 2);
  CHECK(clean.classes[0].cls == LinkClass::same_node);
  CHECK(clean.classes[0].directed_pairs == 4);
  CHECK(clean.classes[1].cls == LinkClass::cross_domain);
  CHECK(clean.classes[1].directed_pairs == 8);
  CHECK(clean.classes[1].median_latency_s == doctest::Approx(4e-6));

  const LinkAnalysis slow = analyse_links(samples(4.0), placement(), t);
  REQUIRE(slow.outliers.size() == 2);  // bandwidth, then latency
  for (const LinkOutlier& o : slow.outliers) {
    CHECK(o.a == 1);
    CHECK(o.b == 2);
    CHECK(o.cls == LinkClass::cross_domain);
    CHECK(o.directions == "both");
    CHECK(o.slowdown == doctest::Approx(4.0).epsilon(0.25));
  }
  CHECK(slow.outliers[0].metric == "bandwidth");
  CHECK(slow.outliers[0].a_to_b == doctest::Approx(10.4e9 / 4));
  CHECK(slow.outliers[1].metric == "latency");
  // 4x is not 5x: a higher minimum slowdown clears it.
  CHECK(analyse_links(samples(4.0), placement(), {6.0, 4.0}).outliers.empty());
}

TEST_CASE("links: one slow direction is named as such; small classes are not judged") {
  std::vector<LinkSample> s = samples(1.0);
  for (LinkSample& x : s) {
    if (x.src == 3 && x.dst == 0) x.bandwidth /= 10;
  }
  const LinkAnalysis a = analyse_links(s, placement(), {6.0, 0.5});
  REQUIRE(a.outliers.size() == 1);
  CHECK(a.outliers[0].a == 0);
  CHECK(a.outliers[0].b == 3);
  CHECK(a.outliers[0].directions == "b->a");
  // With the nodes as their own classes of 2 directed pairs each, the same-node class is too small.
  std::vector<LinkSample> in_node;
  for (const LinkSample& x : s) {
    if (x.src / 2 == x.dst / 2) in_node.push_back(x);
  }
  in_node[0].bandwidth /= 10;
  CHECK(analyse_links(in_node, placement(), {6.0, 0.5}).outliers.size() == 1);  // 4 pairs
  in_node.resize(2);
  CHECK(analyse_links(in_node, placement(), {6.0, 0.5}).outliers.empty());  // 2 pairs
}

}  // namespace
}  // namespace moebench
