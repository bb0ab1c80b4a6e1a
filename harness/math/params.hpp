// The plain parameter structs the shared arithmetic takes (AdamW's step, the router's settings):
// trivially copyable, so a kernel receives them by value exactly as a CPU loop does.
#pragma once

#include <cstdint>

namespace moebench {

struct AdamWStep {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;  // gradients are multiplied by this first (1/dp for a mean)
  int step = 1;             // 1-based, for bias correction
};

// Router parameters the kernels need.
struct RouterParams {
  std::int32_t experts = 0;
  std::int32_t top_k = 0;
  std::int32_t groups = 1;
  std::int32_t topk_groups = 1;
  float scaling = 1.0f;
  std::int32_t mode = 0;  // kRouteRouter, kRouteBalanced, kRouteZipf or kRouteRandom (route.hpp)
  float zipf_exponent = 0.0f;
  std::uint64_t seed = 0;
  std::uint64_t layer = 0;  // random mode: each layer draws its own logits
  // The model's own routing (its config.json; route.hpp): scoring_func, topk_method and
  // norm_topk_prob. DeepSeek-V3's by default.
  std::int32_t scoring = 0;      // kScoreSigmoid or kScoreSoftmax
  std::int32_t topk_method = 0;  // kTopkNoauxTc, kTopkGreedy or kTopkGroupLimitedGreedy
  std::int32_t norm_topk = 1;    // 1: the chosen scores normalised to sum 1
};

}  // namespace moebench
