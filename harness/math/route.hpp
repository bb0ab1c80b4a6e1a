// Routing arithmetic for one token, written once for both backends (MB_HD).
//
// Scores are sigmoid(logits) (scoring_func sigmoid, DeepSeek-V3) or softmax(logits) over the
// experts (softmax, DeepSeek-V2 and V2-Lite). Selection:
//  - router:   by the model's topk_method. noaux_tc (V3): each of n_group groups is scored by the
//              sum of its two highest (score + bias); the topk_group best groups are kept; the
//              top_k experts by (score + bias) inside them are chosen. group_limited_greedy (V2):
//              each group is scored by its highest score, the topk_group best kept, the top_k
//              experts by score inside them chosen. greedy (V2-Lite): the top_k experts by score.
//              Only noaux_tc reads the selection bias.
//  - balanced: exact per-expert counts inside the model's group limit. With G = n_group groups of
//              S experts, K = topk_group and q = k / K experts per kept group (when K | G, K | k
//              and q | S): token g keeps the K groups c, c + G/K, c + 2G/K, ... with
//              c = g mod (G/K), and in each the q experts b * (S/q) + (u mod (S/q)), b < q,
//              u = g div (G/K). Otherwise (no such grouping) experts j * (E / k) + (g mod (E / k)),
//              j < k (when k divides E; else (g * k + j) mod E). Either way any run of E / k
//              consecutive tokens gives every expert exactly one assignment.
//  - random:   Megatron-Core's moe_router_force_load_balancing: the router's logits are replaced
//              by standard normal draws (seeded by layer, token and expert; the gradient passes
//              straight through to the router), then the real group-limited top-k (as router).
//  - zipf:     k distinct experts drawn (seeded by token) with probability proportional to
//              1 / (popularity_rank + 1)^S, popularity ranks a fixed permutation of the experts.
// Weights, in every mode: the chosen experts' scores (without bias), normalised to sum 1 when
// norm_topk_prob (V3) and as they are otherwise (V2, V2-Lite), times routed_scaling_factor.
// Indices are in ascending order of expert id within a token.
#pragma once

#include <cstdint>

#include "harness/math/hd.hpp"
#include "harness/math/params.hpp"

namespace moebench {

constexpr int kMaxExperts = 1024;
constexpr int kMaxGroups = 64;
constexpr int kMaxTopK = 32;

enum : std::int32_t { kRouteRouter = 0, kRouteBalanced = 1, kRouteZipf = 2, kRouteRandom = 3 };
enum : std::int32_t { kScoreSigmoid = 0, kScoreSoftmax = 1 };
enum : std::int32_t { kTopkNoauxTc = 0, kTopkGreedy = 1, kTopkGroupLimitedGreedy = 2 };

MB_HD float sigmoid(float x);

// The E router logits of one token (as router_logit gives them) turned into its scores in place:
// sigmoid of each, or their softmax.
MB_HD void router_scores(const RouterParams& p, float* scores);

// The logit the router scores (sigmoid) for `expert` of `global_token`: `logit` itself, or in
// random mode a standard normal draw in its place.
MB_HD float router_logit(const RouterParams& p, float logit, std::uint64_t global_token,
                         int expert);

// scores: E sigmoid scores; bias: E selection biases (may be null for zero bias).
// idx, w: top_k outputs.
MB_HD void route_token(const RouterParams& p, const float* scores, const float* bias,
                       std::uint64_t global_token, std::int32_t* idx, float* w);

// d loss / d logits (E values, zero for unchosen experts) from d loss / d weights (top_k).
MB_HD void route_token_backward(const RouterParams& p, const float* scores, const std::int32_t* idx,
                                const float* dw, float* dlogits);

}  // namespace moebench

#include "harness/math/route_impl.hpp"
