#include "harness/measure/links.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "harness/core/error.hpp"
#include "harness/measure/stats.hpp"

namespace moebench {

const char* to_string(LinkClass c) {
  switch (c) {
    case LinkClass::same_node:
      return "same_node";
    case LinkClass::same_domain:
      return "same_domain";
    case LinkClass::cross_domain:
      return "cross_domain";
  }
  return "?";
}

LinkClass classify(int a, int b, const LinkPlacement& p) {
  const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
  MB_CHECK(ua < p.node.size() && ub < p.node.size() && p.domain.size() == p.node.size(),
           "link " << a << "-" << b << " outside a placement of " << p.node.size() << " ranks");
  if (p.node[ua] == p.node[ub]) return LinkClass::same_node;
  return p.domain[ua] == p.domain[ub] ? LinkClass::same_domain : LinkClass::cross_domain;
}

namespace {

// Whether a value is worse than the class's median by both thresholds, judged on the time it
// stands for: the latency itself, or the time per byte (1 / bandwidth), so that a link 4x slower
// stands out from a noisy class (a bandwidth cannot fall more than its median below it).
struct Judge {
  double median_time = 0;  // of the class
  double sigma = 0;        // of the class's times
  bool is_bandwidth = false;
  HealthThresholds t;
  double time(double v) const { return is_bandwidth ? (v > 0 ? 1.0 / v : 1e300) : v; }
  double slowdown(double v) const { return median_time > 0 ? time(v) / median_time : 0; }
  bool bad(double v) const { return beyond_thresholds(time(v), median_time, sigma, t); }
  double median_value() const { return is_bandwidth ? 1.0 / median_time : median_time; }
};

Judge make_judge(const std::vector<double>& values, bool is_bandwidth, const HealthThresholds& t) {
  Judge j{0, 0, is_bandwidth, t};
  std::vector<double> times;
  for (double v : values) times.push_back(j.time(v));
  j.median_time = median(times);
  j.sigma = kMadToSigma * median_absolute_deviation(times);
  return j;
}

}  // namespace

LinkAnalysis analyse_links(const std::vector<LinkSample>& samples, const LinkPlacement& placement,
                           const HealthThresholds& t) {
  LinkAnalysis out;
  std::map<std::pair<int, int>, const LinkSample*> by_pair;
  std::map<LinkClass, std::vector<const LinkSample*>> by_class;
  for (const LinkSample& s : samples) {
    by_pair[{s.src, s.dst}] = &s;
    by_class[classify(s.src, s.dst, placement)].push_back(&s);
  }
  std::map<LinkClass, std::pair<Judge, Judge>> judges;  // bandwidth, latency
  for (LinkClass c : kLinkClasses) {
    const auto it = by_class.find(c);
    if (it == by_class.end()) continue;
    std::vector<double> bw, lat;
    for (const LinkSample* s : it->second) {
      bw.push_back(s->bandwidth);
      lat.push_back(s->latency_s);
    }
    LinkClassSummary sum{c, static_cast<int>(it->second.size()), median(bw), median(lat)};
    out.classes.push_back(sum);
    if (sum.directed_pairs >= kMinRanksCompared) {
      judges[c] = {make_judge(bw, true, t), make_judge(lat, false, t)};
    }
  }
  for (const auto& [key, ab] : by_pair) {
    const auto [a, b] = key;
    if (a > b) continue;
    const auto other = by_pair.find({b, a});
    const LinkSample* ba = other == by_pair.end() ? nullptr : other->second;
    const LinkClass c = classify(a, b, placement);
    const auto j = judges.find(c);
    if (j == judges.end()) continue;
    for (int m = 0; m < 2; ++m) {
      const Judge& judge = m == 0 ? j->second.first : j->second.second;
      const auto value = [&](const LinkSample* s) { return m == 0 ? s->bandwidth : s->latency_s; };
      const bool bad_ab = judge.bad(value(ab));
      const bool bad_ba = ba != nullptr && judge.bad(value(ba));
      if (!bad_ab && !bad_ba) continue;
      LinkOutlier o;
      o.a = a;
      o.b = b;
      o.cls = c;
      o.metric = m == 0 ? "bandwidth" : "latency";
      o.a_to_b = value(ab);
      o.b_to_a = ba != nullptr ? value(ba) : 0;
      o.median = judge.median_value();
      o.slowdown = std::max(judge.slowdown(o.a_to_b), ba != nullptr ? judge.slowdown(o.b_to_a) : 0);
      o.directions = bad_ab && bad_ba ? "both" : bad_ab ? "a->b" : "b->a";
      out.outliers.push_back(o);
    }
  }
  return out;
}

}  // namespace moebench
