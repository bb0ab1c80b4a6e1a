// What --verify costs, by hand on the tiny model: the reference's results on rank 0 and what each
// rank receives of them (its own slices), from the parameter counts written out here.
#include "harness/verify/verify_cost.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

// The tiny model (h 256, experts of 128: 16 routed, top 4, one shared), one MoE layer without
// attention or the ends, 4 sequences of 8 tokens.
RunConfig tiny_moe(int world, int ep) {
  RunConfig c;
  c.model = preset("deepseek-v3-tiny");
  c.workload.seq_len = 8;
  c.workload.layers = 1;
  c.workload.dense_layers = 0;
  c.workload.attention = false;
  c.workload.head = false;
  c.workload.global_batch = 4;
  c.layout.world = world;
  c.layout.ep = ep;
  c.verify = true;
  return c;
}

// One routed expert: gate/up (256 x 256) and down (128 x 256).
constexpr double kExpert = 3.0 * 256 * 128;
// The dense part: the norm before the MoE (256; without attention there is no other), the shared
// expert (3 x 256 x 128), the router (16 x 256).
constexpr double kDense = 256.0 + 3.0 * 256 * 128 + 16.0 * 256;

TEST_CASE("verify cost: one rank receives the whole reference") {
  const VerifyCost v = estimate_verify_cost(tiny_moe(1, 1), 4);
  // 32 tokens of output and of input gradient (256 each), every gradient: FP32.
  const double results = 4.0 * (32.0 * 2 * 256 + kDense + 16 * kExpert);
  CHECK(v.reference_results_bytes == doctest::Approx(results).epsilon(1e-12));
  CHECK(v.max_rank_received_bytes == doctest::Approx(results).epsilon(1e-12));
  CHECK(v.sent_bytes == doctest::Approx(results).epsilon(1e-12));
  CHECK(v.reference_step_bytes > 0);
}

TEST_CASE("verify cost: with EP 4 each rank receives its experts and its rows only") {
  const VerifyCost v = estimate_verify_cost(tiny_moe(4, 4), 4);
  const double results = 4.0 * (32.0 * 2 * 256 + kDense + 16 * kExpert);
  CHECK(v.reference_results_bytes == doctest::Approx(results).epsilon(1e-12));
  // A rank: the dense gradients, 4 of the 16 experts, and its 8 tokens' output and input
  // gradient (the data-parallel group is the 4 ranks: one sequence each).
  const double rank = 4.0 * (kDense + 4 * kExpert + 8.0 * 2 * 256);
  CHECK(v.max_rank_received_bytes == doctest::Approx(rank).epsilon(1e-12));
  CHECK(v.sent_bytes == doctest::Approx(4 * rank).epsilon(1e-12));
  CHECK(v.max_rank_received_bytes < v.reference_results_bytes / 2);
}

}  // namespace
}  // namespace moebench
