// Definitions for route.hpp (included at its end). Written to compile unchanged as device code:
// no containers, no exceptions, no recursion, only small fixed-size locals.
//
// Preconditions (the config checks them before any token is routed; these functions do not
// throw): 1 <= top_k <= min(experts, kMaxTopK), experts <= kMaxExperts. Router mode also wants
// groups | experts, groups <= kMaxGroups and 1 <= topk_groups <= groups; a grouping that breaks
// these is treated as one group, and too few kept groups to hold top_k experts are widened, so a
// bad config gives a valid (distinct, in range) choice rather than reading out of bounds.
//
// Every selection is over a strict total order: higher value first, the lower id on ties, NaN
// ranked as -inf. That makes results independent of scan order and lets top-k be found by
// repeated "best element ranked after the previous pick" scans with no scratch memory.
#pragma once

#include <math.h>

#include <cstdint>

#include "harness/math/random.hpp"

namespace moebench {

namespace route_detail {

// The stream for the zipf draws ("zipf" in ASCII); index is token * kMaxTopK + draw.
constexpr std::uint64_t kZipfStream = 0x7a697066ULL;
// The streams of the random logits ("rndl" in ASCII, plus the layer).
constexpr std::uint64_t kRandomLogitStream = 0x726e646cULL << 16;

MB_HD float order_key(float v) {
  return isnan(v) ? -INFINITY : v;
}

// True when (va, a) comes strictly before (vb, b) in the selection order.
MB_HD bool ranks_before(float va, int a, float vb, int b) {
  const float ka = order_key(va);
  const float kb = order_key(vb);
  return ka > kb || (ka == kb && a < b);
}

MB_HD void sort_ascending(std::int32_t* v, int n) {
  for (int i = 1; i < n; ++i) {
    const std::int32_t x = v[i];
    int j = i - 1;
    for (; j >= 0 && v[j] > x; --j) v[j + 1] = v[j];
    v[j + 1] = x;
  }
}

MB_HD std::uint64_t gcd_u64(std::uint64_t a, std::uint64_t b) {
  while (b != 0) {
    const std::uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// The inverse of a modulo m (gcd(a, m) = 1), by the iterative extended Euclid.
MB_HD std::int64_t inverse_mod(std::int64_t a, std::int64_t m) {
  std::int64_t r0 = m, r1 = a % m, t0 = 0, t1 = 1;
  while (r1 != 0) {
    const std::int64_t q = r0 / r1;
    std::int64_t tmp = r0 - q * r1;
    r0 = r1;
    r1 = tmp;
    tmp = t0 - q * t1;
    t0 = t1;
    t1 = tmp;
  }
  t0 %= m;
  return t0 < 0 ? t0 + m : t0;
}

// The model's top-k: noaux_tc (DeepSeek-V3) group-limited on choice scores score + bias, groups
// scored by their two best; group_limited_greedy (V2) on the scores, groups scored by their
// best; greedy (V2-Lite) on the scores, one group.
MB_HD void select_router(const RouterParams& p, const float* scores, const float* bias,
                         std::int32_t* idx) {
  const int experts = p.experts;
  if (p.topk_method != kTopkNoauxTc) bias = nullptr;
  const bool two_best = p.topk_method == kTopkNoauxTc;
  int groups = p.topk_method == kTopkGreedy ? 1 : p.groups;
  if (groups < 1 || groups > kMaxGroups || experts % groups != 0) groups = 1;
  const int group_size = experts / groups;
  int keep = p.topk_groups;
  const int keep_needed = (p.top_k + group_size - 1) / group_size;
  if (keep < keep_needed) keep = keep_needed;
  if (keep > groups) keep = groups;

  float group_score[kMaxGroups];
  for (int g = 0; g < groups; ++g) {
    // The group's two best choice scores, in selection order.
    int first = -1, second = -1;
    float v1 = 0.0f, v2 = 0.0f;
    for (int e = g * group_size; e < (g + 1) * group_size; ++e) {
      const float c = scores[e] + (bias ? bias[e] : 0.0f);
      if (first < 0 || ranks_before(c, e, v1, first)) {
        second = first;
        v2 = v1;
        first = e;
        v1 = c;
      } else if (second < 0 || ranks_before(c, e, v2, second)) {
        second = e;
        v2 = c;
      }
    }
    group_score[g] = order_key(v1) + (two_best && second >= 0 ? order_key(v2) : 0.0f);
  }

  std::uint64_t kept = 0;  // bit g: group g kept
  int prev = -1;
  for (int n = 0; n < keep; ++n) {
    int best = -1;
    for (int g = 0; g < groups; ++g) {
      if (prev >= 0 && !ranks_before(group_score[prev], prev, group_score[g], g)) continue;
      if (best < 0 || ranks_before(group_score[g], g, group_score[best], best)) best = g;
    }
    kept |= 1ULL << best;
    prev = best;
  }

  prev = -1;
  float prev_c = 0.0f;
  for (int j = 0; j < p.top_k; ++j) {
    int best = -1;
    float best_c = 0.0f;
    for (int e = 0; e < experts; ++e) {
      if (!((kept >> (e / group_size)) & 1ULL)) continue;
      const float c = scores[e] + (bias ? bias[e] : 0.0f);
      if (prev >= 0 && !ranks_before(prev_c, prev, c, e)) continue;
      if (best < 0 || ranks_before(c, e, best_c, best)) {
        best = e;
        best_c = c;
      }
    }
    idx[j] = best;
    prev = best;
    prev_c = best_c;
  }
}

MB_HD void select_balanced(const RouterParams& p, std::uint64_t g, std::int32_t* idx) {
  const std::uint64_t experts = static_cast<std::uint64_t>(p.experts);
  const std::uint64_t k = static_cast<std::uint64_t>(p.top_k);
  const std::uint64_t groups = static_cast<std::uint64_t>(p.groups);
  const std::uint64_t kept = static_cast<std::uint64_t>(p.topk_groups);
  if (groups > 1 && kept >= 1 && kept < groups && experts % groups == 0 && groups % kept == 0 &&
      k % kept == 0) {
    const std::uint64_t size = experts / groups, per = k / kept, sets = groups / kept;
    if (size % per == 0) {
      // Inside the group limit: the kept groups c, c + sets, ...; q experts in each.
      const std::uint64_t c = g % sets, u = g / sets, block = size / per;
      int j = 0;
      for (std::uint64_t i = 0; i < kept; ++i) {
        const std::uint64_t group = c + i * sets;
        for (std::uint64_t b = 0; b < per; ++b) {
          idx[j++] = static_cast<std::int32_t>(group * size + b * block + u % block);
        }
      }
      return;
    }
  }
  if (experts % k == 0) {
    // One expert from each of k equal blocks; with blocks aligned to EP ranks a token reaches
    // min(k, ep) ranks, the most even spread.
    const std::uint64_t stride = experts / k;
    for (std::uint64_t j = 0; j < k; ++j) {
      idx[j] = static_cast<std::int32_t>(j * stride + g % stride);
    }
  } else {
    const std::uint64_t base = (g % experts) * k;  // reduced first so g * k cannot overflow
    for (std::uint64_t j = 0; j < k; ++j) idx[j] = static_cast<std::int32_t>((base + j) % experts);
  }
}

// Popularity rank r(e) = (a * e + b) mod E, a fixed seed-chosen permutation, so that the popular
// experts are not always the low ids (which would all sit on EP rank 0).
struct ZipfPermutation {
  std::int64_t a = 1, b = 0, a_inv = 1;
};

MB_HD ZipfPermutation zipf_permutation(std::int64_t experts, std::uint64_t seed) {
  ZipfPermutation z;
  const std::uint64_t e = static_cast<std::uint64_t>(experts);
  std::uint64_t a = 1 + mix64(seed ^ 0x61ULL) % e;
  while (gcd_u64(a, e) != 1) ++a;  // terminates: a = 1 (mod e) is coprime
  z.a = static_cast<std::int64_t>(a % e);
  z.b = static_cast<std::int64_t>(mix64(seed ^ 0x62ULL) % e);
  z.a_inv = experts == 1 ? 0 : inverse_mod(z.a, experts);
  return z;
}

MB_HD void select_zipf(const RouterParams& p, std::uint64_t g, std::int32_t* idx) {
  const std::int64_t experts = p.experts;
  const ZipfPermutation z = zipf_permutation(experts, p.seed);
  const float s = p.zipf_exponent;

  std::uint32_t chosen[kMaxExperts / 32] = {};  // bit per popularity rank
  float total = 0.0f;
  for (std::int64_t r = 0; r < experts; ++r) total += powf(static_cast<float>(r + 1), -s);

  for (int d = 0; d < p.top_k; ++d) {
    const float u =
        uniform01(p.seed, kZipfStream,
                  g * static_cast<std::uint64_t>(kMaxTopK) + static_cast<std::uint64_t>(d));
    const float target = u * total;
    // Walk ranks most popular first, so a skewed distribution stops early.
    float acc = 0.0f;
    std::int64_t pick = -1;
    for (std::int64_t r = 0; r < experts; ++r) {
      if ((chosen[r >> 5] >> (r & 31)) & 1U) continue;
      pick = r;  // the last unchosen rank stands in if rounding leaves acc <= target
      acc += powf(static_cast<float>(r + 1), -s);
      if (acc > target) break;
    }
    if (pick < 0) pick = 0;  // only when top_k > experts, which the config rejects
    chosen[pick >> 5] |= 1U << (pick & 31);
    total -= powf(static_cast<float>(pick + 1), -s);
    if (total < 0.0f) total = 0.0f;
    // e = a^-1 (r - b) mod E.
    const std::int64_t e = (z.a_inv * (((pick - z.b) % experts + experts) % experts)) % experts;
    idx[d] = static_cast<std::int32_t>(e);
  }
}

}  // namespace route_detail

MB_HD float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

MB_HD void router_scores(const RouterParams& p, float* scores) {
  if (p.scoring != kScoreSoftmax) {
    for (int e = 0; e < p.experts; ++e) scores[e] = sigmoid(scores[e]);
    return;
  }
  float top = -INFINITY;
  for (int e = 0; e < p.experts; ++e) top = fmaxf(top, scores[e]);
  float sum = 0.0f;
  for (int e = 0; e < p.experts; ++e) {
    scores[e] = expf(scores[e] - top);
    sum += scores[e];
  }
  for (int e = 0; e < p.experts; ++e) scores[e] /= sum;
}

MB_HD float router_logit(const RouterParams& p, float logit, std::uint64_t global_token,
                         int expert) {
  if (p.mode != kRouteRandom) return logit;
  // Box-Muller on two uniform draws; u1 in (0, 1] so the log is finite.
  const std::uint64_t index = (global_token * static_cast<std::uint64_t>(kMaxExperts) +
                               static_cast<std::uint64_t>(expert)) *
                              2;
  const std::uint64_t stream = route_detail::kRandomLogitStream + p.layer;
  const float u1 = 1.0f - uniform01(p.seed, stream, index);
  const float u2 = uniform01(p.seed, stream, index + 1);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

MB_HD void route_token(const RouterParams& p, const float* scores, const float* bias,
                       std::uint64_t global_token, std::int32_t* idx, float* w) {
  if (p.mode == kRouteBalanced) {
    route_detail::select_balanced(p, global_token, idx);
  } else if (p.mode == kRouteZipf) {
    route_detail::select_zipf(p, global_token, idx);
  } else {
    route_detail::select_router(p, scores, bias, idx);
  }
  route_detail::sort_ascending(idx, p.top_k);

  if (!p.norm_topk) {
    for (int j = 0; j < p.top_k; ++j) w[j] = p.scaling * scores[idx[j]];
    return;
  }
  float sum = 0.0f;
  for (int j = 0; j < p.top_k; ++j) sum += scores[idx[j]];
  for (int j = 0; j < p.top_k; ++j) {
    // All chosen scores underflowed to 0: equal weights (their gradient is 0 either way).
    w[j] = sum > 0.0f ? p.scaling * scores[idx[j]] / sum : p.scaling / static_cast<float>(p.top_k);
  }
}

MB_HD void route_token_backward(const RouterParams& p, const float* scores, const std::int32_t* idx,
                                const float* dw, float* dlogits) {
  for (int e = 0; e < p.experts; ++e) dlogits[e] = 0.0f;
  // d loss / d score of each chosen expert: through the normalisation, or directly.
  float dscore[kMaxTopK];
  if (p.norm_topk) {
    float sum = 0.0f, dot = 0.0f;
    for (int j = 0; j < p.top_k; ++j) {
      sum += scores[idx[j]];
      dot += dw[j] * scores[idx[j]];
    }
    if (!(sum > 0.0f)) return;  // the forward used constant weights there
    const float inv = 1.0f / sum;
    for (int j = 0; j < p.top_k; ++j) dscore[j] = p.scaling * (dw[j] * inv - dot * inv * inv);
  } else {
    for (int j = 0; j < p.top_k; ++j) dscore[j] = p.scaling * dw[j];
  }
  if (p.scoring == kScoreSoftmax) {
    // s = softmax(l): dl_e = s_e (ds_e - sum_j ds_j s_j), every expert's logit moves.
    float dot = 0.0f;
    for (int j = 0; j < p.top_k; ++j) dot += dscore[j] * scores[idx[j]];
    for (int e = 0; e < p.experts; ++e) dlogits[e] = -scores[e] * dot;
    for (int j = 0; j < p.top_k; ++j) dlogits[idx[j]] += scores[idx[j]] * dscore[j];
    return;
  }
  for (int j = 0; j < p.top_k; ++j) {
    const float s = scores[idx[j]];
    // += so that a repeated index would still get its full derivative.
    dlogits[idx[j]] += dscore[j] * s * (1.0f - s);
  }
}

}  // namespace moebench
