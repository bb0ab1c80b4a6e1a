#include "harness/math/route.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "harness/math/random.hpp"

namespace moebench {
namespace {

RouterParams router_params(int experts, int top_k, int groups, int topk_groups, float scaling) {
  RouterParams p;
  p.experts = experts;
  p.top_k = top_k;
  p.groups = groups;
  p.topk_groups = topk_groups;
  p.scaling = scaling;
  p.mode = kRouteRouter;
  return p;
}

struct Routed {
  std::vector<std::int32_t> idx;
  std::vector<float> w;
};

// The analytic d loss / d logits against central differences of `loss` (in double) at `logits`,
// expert by expert. Central differences err by O(h^2) ~ 1e-8; the float analytic gradient by
// ~1e-6 of values of order 1, so 1e-5 absolute.
template <typename Loss>
void check_finite_differences(const Loss& loss, const std::vector<float>& logits,
                              const std::vector<float>& dlogits) {
  const std::vector<double> x(logits.begin(), logits.end());
  for (std::size_t e = 0; e < x.size(); ++e) {
    const double h = 1e-4;
    std::vector<double> up = x, down = x;
    up[e] += h;
    down[e] -= h;
    const double fd = (loss(up) - loss(down)) / (2.0 * h);
    CAPTURE(e);
    CHECK(std::abs(dlogits[e] - fd) <= 1e-5);
  }
}

Routed route(const RouterParams& p, const std::vector<float>& scores, const float* bias,
             std::uint64_t token) {
  Routed r{std::vector<std::int32_t>(p.top_k), std::vector<float>(p.top_k)};
  route_token(p, scores.data(), bias, token, r.idx.data(), r.w.data());
  return r;
}

// The noaux_tc selection spelled out with sorts, as in DeepSeek-V3's reference gate.
std::vector<std::int32_t> router_reference(const RouterParams& p, const std::vector<float>& s,
                                           const float* bias) {
  const int size = p.experts / p.groups;
  std::vector<float> c(p.experts);
  for (int e = 0; e < p.experts; ++e) c[e] = s[e] + (bias ? bias[e] : 0.0f);
  std::vector<float> group_score(p.groups);
  for (int g = 0; g < p.groups; ++g) {
    std::vector<float> v(c.begin() + g * size, c.begin() + (g + 1) * size);
    std::sort(v.begin(), v.end(), std::greater<>());
    group_score[g] = v[0] + (size > 1 ? v[1] : 0.0f);
  }
  std::vector<int> groups(p.groups);
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(),
                   [&](int a, int b) { return group_score[a] > group_score[b]; });
  std::vector<int> candidates;
  for (int n = 0; n < p.topk_groups; ++n) {
    for (int e = groups[n] * size; e < (groups[n] + 1) * size; ++e) candidates.push_back(e);
  }
  std::sort(candidates.begin(), candidates.end());
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return c[a] > c[b]; });
  std::vector<std::int32_t> out(candidates.begin(), candidates.begin() + p.top_k);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<float> random_scores(int experts, std::uint64_t seed, std::uint64_t stream,
                                 bool quantised) {
  std::vector<float> s(experts);
  for (int e = 0; e < experts; ++e) {
    const float u = uniform01(seed, stream, e);
    // Quantised scores make many exact ties, exercising the lower-id tie break.
    s[e] = quantised ? std::floor(u * 6.0f) / 6.0f : sigmoid(8.0f * u - 4.0f);
  }
  return s;
}

// DeepSeek-V2's and V2-Lite's gate (modeling_deepseek.py's MoEGate) spelled out with sorts:
// group_limited_greedy keeps the topk_group groups of the highest single score, greedy has no
// groups; neither reads a bias.
std::vector<std::int32_t> v2_reference(const RouterParams& p, const std::vector<float>& s) {
  const int groups = p.topk_method == kTopkGreedy ? 1 : p.groups;
  const int keep = p.topk_method == kTopkGreedy ? 1 : p.topk_groups;
  const int size = p.experts / groups;
  std::vector<float> group_score(groups);
  for (int g = 0; g < groups; ++g) {
    group_score[g] = *std::max_element(s.begin() + g * size, s.begin() + (g + 1) * size);
  }
  std::vector<int> order(groups);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return group_score[a] > group_score[b]; });
  std::vector<int> candidates;
  for (int n = 0; n < keep; ++n) {
    for (int e = order[n] * size; e < (order[n] + 1) * size; ++e) candidates.push_back(e);
  }
  std::sort(candidates.begin(), candidates.end());
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return s[a] > s[b]; });
  std::vector<std::int32_t> out(candidates.begin(), candidates.begin() + p.top_k);
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("router_scores: sigmoid of each logit, or their softmax") {
  RouterParams p = router_params(24, 6, 1, 1, 1.0f);
  std::vector<float> logits(24);
  for (int e = 0; e < 24; ++e) logits[e] = 6.0f * uniform_pm1(9, 1, e);
  std::vector<float> s = logits;
  router_scores(p, s.data());
  for (int e = 0; e < 24; ++e) CHECK(s[e] == sigmoid(logits[e]));
  p.scoring = kScoreSoftmax;
  s = logits;
  router_scores(p, s.data());
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  double sum = 0;
  for (int e = 0; e < 24; ++e) {
    // FP32 exp and division against double: a few ulps of values below 1.
    CHECK(s[e] == doctest::Approx(std::exp(static_cast<double>(logits[e])) / z).epsilon(1e-5));
    sum += s[e];
  }
  CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE(
    "V2's group_limited_greedy and V2-Lite's greedy select as their gate does, bias ignored") {
  for (std::int32_t method : {kTopkGroupLimitedGreedy, kTopkGreedy}) {
    CAPTURE(method);
    RouterParams p = router_params(32, 6, 8, 3, 16.0f);
    p.topk_method = method;
    p.scoring = kScoreSoftmax;
    p.norm_topk = 0;
    std::vector<float> bias(32);
    for (int e = 0; e < 32; ++e) bias[e] = 10.0f * uniform_pm1(8, 2, e);  // would change noaux_tc
    int differs_from_v3 = 0;
    for (std::uint64_t t = 0; t < 200; ++t) {
      const std::vector<float> s = random_scores(32, 5, t, t % 2 == 0);
      const Routed r = route(p, s, bias.data(), t);
      CHECK(r.idx == v2_reference(p, s));
      // Weights: the scores themselves times routed_scaling_factor, not normalised.
      for (int j = 0; j < p.top_k; ++j) CHECK(r.w[j] == 16.0f * s[r.idx[j]]);
      RouterParams v3 = p;
      v3.topk_method = kTopkNoauxTc;
      differs_from_v3 += route(v3, s, bias.data(), t).idx != r.idx;
    }
    CHECK(differs_from_v3 > 100);  // the methods really differ on these scores
  }
}

TEST_CASE("route_token_backward matches finite differences for softmax scores, normalised or not") {
  for (int norm : {0, 1}) {
    for (std::int32_t scoring : {kScoreSoftmax, kScoreSigmoid}) {
      CAPTURE(norm);
      CAPTURE(scoring);
      RouterParams p = router_params(16, 4, 4, 2, 2.0f);
      p.scoring = scoring;
      p.norm_topk = norm;
      p.topk_method = kTopkGroupLimitedGreedy;
      for (int trial = 0; trial < 10; ++trial) {
        std::vector<float> logits(p.experts), s(p.experts);
        for (int e = 0; e < p.experts; ++e) logits[e] = 3.0f * uniform_pm1(13, trial, e);
        s = logits;
        router_scores(p, s.data());
        const Routed r = route(p, s, nullptr, trial);
        std::vector<float> dw(p.top_k);
        for (int j = 0; j < p.top_k; ++j) dw[j] = uniform_pm1(14, trial, j);
        std::vector<float> dlogits(p.experts, NAN);
        route_token_backward(p, s.data(), r.idx.data(), dw.data(), dlogits.data());
        // L(logits) = sum_j dw_j * w_j, indices held fixed, in double.
        auto loss = [&](std::vector<double> x) {
          std::vector<double> sc(x.size());
          double z = 0;
          for (double v : x) z += std::exp(v);
          for (std::size_t e = 0; e < x.size(); ++e) {
            sc[e] = scoring == kScoreSoftmax ? std::exp(x[e]) / z : 1.0 / (1.0 + std::exp(-x[e]));
          }
          double sum = 0.0, dot = 0.0;
          for (int j = 0; j < p.top_k; ++j) {
            sum += sc[r.idx[j]];
            dot += dw[j] * sc[r.idx[j]];
          }
          return p.scaling * (norm ? dot / sum : dot);
        };
        check_finite_differences(loss, logits, dlogits);
      }
    }
  }
}

}  // namespace

TEST_CASE("sigmoid") {
  // Tolerance 1e-6: a few float ulps around values of order 1.
  CHECK(sigmoid(0.0f) == doctest::Approx(0.5).epsilon(1e-6));
  CHECK(sigmoid(2.0f) == doctest::Approx(1.0 / (1.0 + std::exp(-2.0))).epsilon(1e-6));
  CHECK(sigmoid(-200.0f) == 0.0f);
  CHECK(sigmoid(200.0f) == 1.0f);
}

TEST_CASE("router mode matches the reference and holds the group limit") {
  const RouterParams shapes[] = {router_params(256, 8, 8, 4, 2.5f),
                                 router_params(64, 6, 4, 2, 1.0f),
                                 router_params(16, 4, 16, 5, 1.0f),  // groups of one expert
                                 router_params(32, 5, 1, 1, 1.5f)};
  for (const RouterParams& p : shapes) {
    const int size = p.experts / p.groups;
    for (int trial = 0; trial < 300; ++trial) {
      const bool quantised = trial % 3 == 2;
      const std::vector<float> s = random_scores(p.experts, 7, trial, quantised);
      std::vector<float> bias(p.experts);
      for (int e = 0; e < p.experts; ++e) bias[e] = 0.1f * uniform_pm1(8, trial, e);
      const float* b = trial % 2 ? bias.data() : nullptr;
      const Routed r = route(p, s, b, trial);
      CAPTURE(p.experts);
      CAPTURE(trial);
      CHECK(r.idx == router_reference(p, s, b));
      std::set<int> groups;
      for (std::int32_t e : r.idx) groups.insert(e / size);
      CHECK(static_cast<int>(groups.size()) <= p.topk_groups);
      // Tolerance: top_k float additions and one division, relative 1e-5.
      const float sum = std::accumulate(r.w.begin(), r.w.end(), 0.0f);
      CHECK(sum == doctest::Approx(p.scaling).epsilon(1e-5));
    }
  }
}

TEST_CASE("router mode stays in range for a grouping the config should have rejected") {
  // 3 groups do not divide 16 experts (one group then); 1 kept group of 4 cannot hold 6.
  const RouterParams shapes[] = {router_params(16, 4, 3, 1, 1.0f),
                                 router_params(16, 6, 4, 1, 1.0f)};
  for (const RouterParams& p : shapes) {
    const Routed r = route(p, random_scores(16, 2, 0, false), nullptr, 0);
    CHECK(std::adjacent_find(r.idx.begin(), r.idx.end()) == r.idx.end());
    CHECK(r.idx.front() >= 0);
    CHECK(r.idx.back() < 16);
  }
}

TEST_CASE("router bias changes selection but not weights") {
  const RouterParams p = router_params(64, 6, 4, 2, 2.5f);
  const std::vector<float> s = random_scores(p.experts, 11, 0, false);
  const Routed plain = route(p, s, nullptr, 0);
  // Push the lowest-scoring expert to the top of the choice order.
  const int low = static_cast<int>(std::min_element(s.begin(), s.end()) - s.begin());
  std::vector<float> bias(p.experts, 0.0f);
  bias[low] = 10.0f;
  const Routed biased = route(p, s, bias.data(), 0);
  CHECK(std::find(plain.idx.begin(), plain.idx.end(), low) == plain.idx.end());
  CHECK(std::find(biased.idx.begin(), biased.idx.end(), low) != biased.idx.end());
  float sum = 0.0f;
  for (std::int32_t e : biased.idx) sum += s[e];
  for (int j = 0; j < p.top_k; ++j) {
    // Same float expression as the implementation up to rounding order: relative 1e-5.
    CHECK(biased.w[j] == doctest::Approx(p.scaling * s[biased.idx[j]] / sum).epsilon(1e-5));
  }
}

TEST_CASE("balanced mode gives every expert the same count") {
  struct Case {
    int experts, top_k, tokens;
    std::uint64_t first;
  };
  const Case cases[] = {{16, 4, 128, 0}, {256, 8, 4096, 12345}, {12, 5, 12, 7}, {12, 5, 24, 0}};
  for (const Case& c : cases) {
    RouterParams p = router_params(c.experts, c.top_k, 1, 1, 1.0f);
    p.mode = kRouteBalanced;
    const std::vector<float> s(c.experts, 0.5f);
    std::vector<std::int64_t> counts(c.experts, 0);
    for (int t = 0; t < c.tokens; ++t) {
      const Routed r = route(p, s, nullptr, c.first + t);
      CHECK(std::is_sorted(r.idx.begin(), r.idx.end()));
      CHECK(std::adjacent_find(r.idx.begin(), r.idx.end()) == r.idx.end());  // distinct
      for (std::int32_t e : r.idx) {
        REQUIRE((e >= 0 && e < c.experts));
        ++counts[e];
      }
    }
    CAPTURE(c.experts);
    for (std::int64_t n : counts) CHECK(n == std::int64_t{c.tokens} * c.top_k / c.experts);
  }
}

TEST_CASE("balanced mode reaches every EP rank for DeepSeek-V3 shapes") {
  RouterParams p = router_params(256, 8, 1, 1, 1.0f);
  p.mode = kRouteBalanced;
  const int ep = 8;
  const std::vector<float> s(256, 0.5f);
  for (std::uint64_t t = 0; t < 100; ++t) {
    const Routed r = route(p, s, nullptr, t * 977);
    std::set<int> ranks;
    for (std::int32_t e : r.idx) ranks.insert(e / (256 / ep));
    CHECK(ranks.size() == 8);
  }
}

TEST_CASE("balanced mode keeps exact counts inside DeepSeek-V3's group limit") {
  RouterParams p = router_params(256, 8, 8, 4, 2.5f);  // 8 groups of 32, 4 kept
  p.mode = kRouteBalanced;
  const std::vector<float> s(256, 0.5f);
  std::vector<std::int64_t> counts(256, 0);
  std::set<int> ep32_ranks_seen;
  const int tokens = 256 / 8 * 16;  // 16 runs of E / k tokens
  for (int t = 0; t < tokens; ++t) {
    const Routed r = route(p, s, nullptr, 1000 + t);
    std::set<int> groups, ranks;
    for (std::int32_t e : r.idx) {
      ++counts[e];
      groups.insert(e / 32);
      ranks.insert(e / 8);  // EP 32: 8 experts a rank
    }
    CHECK(groups.size() == 4);  // inside topk_group = 4
    CHECK(ranks.size() == 8);   // two experts per group, on different ranks
    CHECK(std::adjacent_find(r.idx.begin(), r.idx.end()) == r.idx.end());
  }
  for (std::int64_t n : counts) CHECK(n == 16);
}

TEST_CASE("random mode: seeded normal logits, then the group-limited top-k") {
  RouterParams p = router_params(256, 8, 8, 4, 2.5f);
  p.mode = kRouteRandom;
  p.seed = 9;
  // The logit is a pure function of (seed, layer, token, expert), not of the router's logit.
  CHECK(router_logit(p, 0.0f, 5, 7) == router_logit(p, 3.0f, 5, 7));
  CHECK(router_logit(p, 0.0f, 5, 7) != router_logit(p, 0.0f, 6, 7));
  RouterParams other = p;
  other.layer = 1;
  CHECK(router_logit(p, 0.0f, 5, 7) != router_logit(other, 0.0f, 5, 7));
  RouterParams router = p;
  router.mode = kRouteRouter;
  CHECK(router_logit(router, 3.0f, 5, 7) == 3.0f);
  // Standard normal: mean 0, variance 1 within 4 standard errors of 256 x 400 draws.
  double sum = 0, sq = 0, distinct_ranks = 0;
  const int tokens = 400;
  for (int t = 0; t < tokens; ++t) {
    std::vector<float> scores(256);
    for (int e = 0; e < 256; ++e) {
      const float l = router_logit(p, 0.0f, static_cast<std::uint64_t>(t), e);
      sum += l;
      sq += static_cast<double>(l) * l;
      scores[e] = sigmoid(l);
    }
    const Routed r = route(p, scores, nullptr, static_cast<std::uint64_t>(t));
    std::set<int> groups, ranks;
    for (std::int32_t e : r.idx) {
      groups.insert(e / 32);
      ranks.insert(e / 8);
    }
    CHECK(groups.size() <= 4);
    distinct_ranks += static_cast<double>(ranks.size());
  }
  const double n = 256.0 * tokens;
  CHECK(std::abs(sum / n) < 4.0 / std::sqrt(n));
  CHECK(std::abs(sq / n - 1.0) < 4.0 * std::sqrt(2.0 / n));
  // About 6.9 distinct EP-32 ranks a token (8 experts in at most 4 groups of 4 ranks each).
  CHECK(distinct_ranks / tokens == doctest::Approx(6.9).epsilon(0.05));
}

TEST_CASE("zipf mode follows popularity ranks") {
  RouterParams p = router_params(16, 4, 1, 1, 1.0f);
  p.mode = kRouteZipf;
  p.zipf_exponent = 1.2f;
  p.seed = 42;
  const int tokens = 20000;
  const std::vector<float> s(16, 0.5f);
  const route_detail::ZipfPermutation z = route_detail::zipf_permutation(16, p.seed);
  std::vector<int> rank(16);
  std::set<int> ranks;
  for (int e = 0; e < 16; ++e) {
    rank[e] = static_cast<int>((z.a * e + z.b) % 16);
    ranks.insert(rank[e]);
  }
  REQUIRE(ranks.size() == 16);  // a permutation

  std::vector<double> by_rank(16, 0.0);
  for (int t = 0; t < tokens; ++t) {
    const Routed r = route(p, s, nullptr, t);
    CHECK(std::adjacent_find(r.idx.begin(), r.idx.end()) == r.idx.end());
    for (std::int32_t e : r.idx) by_rank[rank[e]] += 1.0;
  }
  // Lower bound on the expected ratio: rank 0 is missed by each draw with probability at most
  // 1 - w0/W (the remaining total never exceeds W), so it is included with probability at least
  // 1 - (1 - w0/W)^k; rank E-1 is picked by each draw with probability at most w15 / (W - w0 -
  // w1 - w2) (at most three others are gone), so included with at most k times that. For
  // S = 1.2 that bound is about 6.0 (the true ratio is about 12); the counts (about 17700 and
  // 1470) carry under 3% noise each, so 5 cannot fail by chance.
  std::vector<double> w(16);
  for (int r = 0; r < 16; ++r) w[r] = std::pow(r + 1.0, -1.2);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  const double bound =
      (1.0 - std::pow(1.0 - w[0] / total, 4)) / (4.0 * w[15] / (total - w[0] - w[1] - w[2]));
  CHECK(bound > 5.5);
  CHECK(by_rank[0] / by_rank[15] > 5.0);
  // Inclusion probability falls with rank; allow 4 standard deviations of count noise.
  for (int r = 0; r + 1 < 16; ++r)
    CHECK(by_rank[r + 1] <= by_rank[r] + 4.0 * std::sqrt(by_rank[r]));
}

TEST_CASE("zipf mode is seeded and near uniform for a tiny exponent") {
  RouterParams p = router_params(16, 4, 1, 1, 1.0f);
  p.mode = kRouteZipf;
  p.zipf_exponent = 0.01f;
  p.seed = 5;
  const std::vector<float> s(16, 0.5f);
  std::vector<double> counts(16, 0.0);
  int differ = 0;
  for (int t = 0; t < 20000; ++t) {
    const Routed r = route(p, s, nullptr, t);
    CHECK(r.idx == route(p, s, nullptr, t).idx);
    RouterParams other = p;
    other.seed = 6;
    if (route(other, s, nullptr, t).idx != r.idx) ++differ;
    for (std::int32_t e : r.idx) counts[e] += 1.0;
  }
  CHECK(differ > 10000);
  // Weights span 1 to 16^-0.01 = 0.973; each count is about 5000 with s.d. about 61, so
  // max/min stays well under 1.03 + 8 s.d. (about 1.13).
  const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
  CHECK(*hi / *lo < 1.13);
}

TEST_CASE("zipf mode with DeepSeek-V3 shapes stays in range") {
  RouterParams p = router_params(256, 8, 1, 1, 1.0f);
  p.mode = kRouteZipf;
  p.zipf_exponent = 1.0f;
  p.seed = 99;
  const std::vector<float> s(256, 0.5f);
  for (int t = 0; t < 500; ++t) {
    const Routed r = route(p, s, nullptr, t);
    CHECK(std::adjacent_find(r.idx.begin(), r.idx.end()) == r.idx.end());
    CHECK(r.idx.front() >= 0);
    CHECK(r.idx.back() < 256);
  }
}

TEST_CASE("route_token_backward matches finite differences") {
  const RouterParams p = router_params(32, 5, 4, 2, 2.5f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(p.experts), s(p.experts);
    for (int e = 0; e < p.experts; ++e) {
      logits[e] = 3.0f * uniform_pm1(3, trial, e);
      s[e] = sigmoid(logits[e]);
    }
    const Routed r = route(p, s, nullptr, trial);
    std::vector<float> dw(p.top_k);
    for (int j = 0; j < p.top_k; ++j) dw[j] = uniform_pm1(4, trial, j);
    std::vector<float> dlogits(p.experts, NAN);
    route_token_backward(p, s.data(), r.idx.data(), dw.data(), dlogits.data());

    // L(logits) = sum_j dw_j * w_j, indices held fixed, in double.
    auto loss = [&](std::vector<double> x) {
      double sum = 0.0, dot = 0.0;
      for (int j = 0; j < p.top_k; ++j) {
        const double sj = 1.0 / (1.0 + std::exp(-x[r.idx[j]]));
        sum += sj;
        dot += dw[j] * sj;
      }
      return p.scaling * dot / sum;
    };
    check_finite_differences(loss, logits, dlogits);
    for (int e = 0; e < p.experts; ++e) {
      CAPTURE(e);
      if (std::find(r.idx.begin(), r.idx.end(), e) == r.idx.end()) CHECK(dlogits[e] == 0.0f);
    }
  }
}

}  // namespace moebench
