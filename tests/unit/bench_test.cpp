#include "harness/bench/bench.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"
#include "workloads/accounting/accounting.hpp"

namespace moebench {

TEST_CASE("bench: DeepSeek-V3 at EP 32 is 8 local experts with 4096 rows each") {
  const ModelConfig m = preset("deepseek-v3");
  CHECK(default_bench_ep(m) == 32);
  const ExpertShare s = expert_share(m, 32, 4096);
  CHECK(s.local_experts == 8);
  CHECK(s.rows_per_expert == 4096);
  // EP 16: 16 local experts, each 4096 * 8 / 16 rows.
  CHECK(expert_share(m, 16, 4096).rows_per_expert == 2048);
}

TEST_CASE("bench: the tiny preset's default EP leaves top-k local experts") {
  const ModelConfig m = preset("deepseek-v3-tiny");  // 16 experts, top-4
  CHECK(default_bench_ep(m) == 4);
  const ExpertShare s = expert_share(m, 4, 128);
  CHECK(s.local_experts == 4);
  CHECK(s.rows_per_expert == 128);
}

TEST_CASE("bench: an EP that leaves fewer than top-k local experts is a usage error") {
  const ModelConfig m = preset("deepseek-v3");
  CHECK_THROWS_AS(expert_share(m, 64, 4096), UsageError);  // 4 local experts < top-8
  CHECK_THROWS_AS(expert_share(m, 3, 4096), UsageError);   // does not divide 256
  CHECK_THROWS_AS(expert_share(m, 0, 4096), UsageError);
  CHECK_THROWS_AS(expert_share(m, 32, 0), UsageError);
  try {
    expert_share(m, 64, 4096);
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("valid: 1, 2, 4, 8, 16, 32") != std::string::npos);
  }
}

TEST_CASE("bench: the emulated rank does the real rank's expert work and Megatron FLOPs") {
  const ModelConfig m = preset("deepseek-v3");
  const RunConfig c = bench_run_config(m, 32, 4096, 4, ComputeBackend::cpu, Precision::fp32, 1,
                                       Optimizer::adamw, 7, 1, 3);
  CHECK(c.model.n_routed_experts == 8);
  CHECK(c.model.num_experts_per_tok == 8);
  CHECK(c.model.n_group == 1);
  CHECK(c.workload.dense_layers == 0);
  CHECK(c.workload.attention);
  CHECK(c.workload.routing.mode == RoutingMode::balanced);
  CHECK(c.layout.world == 1);
  CHECK(c.layout.ep == 1);
  CHECK(c.precision == Precision::fp32);
  CHECK(c.comm == CommBackend::local);
  // Every token to all 8 local experts: 4096 rows each, as on a real EP=32 rank.
  CHECK(c.workload.tokens_per_rank() * c.model.num_experts_per_tok / c.model.n_routed_experts ==
        4096);

  // The same Megatron FLOPs per step as 4 MoE layers of the real model on a 256-rank EP=32 job,
  // per rank (the router, whose width changes, is not in the Megatron count).
  RunConfig real = c;
  real.model = m;
  real.layout.world = 256;
  real.layout.ep = 32;
  const double per_rank_real = account_instantiated(real).flops_per_step / 256.0;
  // Both are sums of the same double terms in the same order: exact up to rounding (1e-12).
  CHECK(account_instantiated(c).flops_per_step == doctest::Approx(per_rank_real).epsilon(1e-12));
}

TEST_CASE("bench: the six grouped GEMMs of the experts and their FLOPs") {
  const auto cases = expert_gemm_cases(8, 4096, 7168, 2048);
  REQUIRE(cases.size() == 6);
  double total = 0;
  for (const GroupedGemmCase& g : cases) {
    CHECK(g.count == 8);
    total += g.flops();
  }
  // The step's own count (moe.cpp): 3 passes x 3 matrices x 2 r h f per expert.
  CHECK(total == doctest::Approx(3.0 * 3.0 * 2.0 * 8 * 4096.0 * 7168 * 2048).epsilon(1e-12));
  // Stored operand shapes follow the transposes.
  const GroupedGemmCase& wgrad_up = cases[5];
  CHECK(wgrad_up.name == "wgrad_up");
  CHECK(wgrad_up.trans_a);
  CHECK(wgrad_up.a_rows() == 4096);  // x[r x h], used as x^T
  CHECK(wgrad_up.a_cols() == 7168);
  CHECK(wgrad_up.b_rows() == 4096);  // dgate_up[r x 2f]
  CHECK(wgrad_up.b_cols() == 4096);
  const GroupedGemmCase& dgrad_up = cases[4];
  CHECK(dgrad_up.trans_b);
  CHECK(dgrad_up.b_rows() == 7168);  // W1[h x 2f], used as W1^T
  CHECK(dgrad_up.b_cols() == 4096);
  CHECK(dgrad_up.m == 4096);
  CHECK(dgrad_up.n == 7168);
}

TEST_CASE("bench: dense GEMM FLOPs and known peaks") {
  CHECK(dense_gemm_flops(8192) == doctest::Approx(2.0 * 8192.0 * 8192.0 * 8192.0));
  CHECK(known_bf16_peak("NVIDIA H200").value().tflops == 989.0);
  CHECK(known_bf16_peak("NVIDIA H100 80GB HBM3").value().tflops == 989.0);
  CHECK(known_bf16_peak("NVIDIA H100 PCIe").value().tflops == 756.0);
  CHECK(known_bf16_peak("NVIDIA H200 NVL").value().tflops == 835.0);
  CHECK(known_bf16_peak("NVIDIA H200").value().source.find("datasheet") != std::string::npos);
  // Blackwell: GB parts before B parts, with the figure's source named.
  CHECK(known_bf16_peak("NVIDIA B200").value().tflops == 2250.0);
  CHECK(known_bf16_peak("NVIDIA B300 SXM6 AC").value().tflops == 2250.0);
  CHECK(known_bf16_peak("NVIDIA GB200").value().tflops == 2450.0);
  CHECK(known_bf16_peak("NVIDIA GB300").value().tflops == 2450.0);
  CHECK(known_bf16_peak("NVIDIA GB200").value().source.find("DGX Cloud") != std::string::npos);
  CHECK_FALSE(known_bf16_peak("NVIDIA A100-SXM4-80GB").has_value());
  CHECK_FALSE(known_bf16_peak("").has_value());
}

TEST_CASE("bench: layer lists") {
  CHECK(parse_layer_list("1,4") == std::vector<std::int64_t>{1, 4});
  CHECK(parse_layer_list("2") == std::vector<std::int64_t>{2});
  for (const char* bad : {"", "0", "4,1", "1,1", "1,", ",1", "a", "1.5", "-1", "1,,4"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_layer_list(bad), UsageError);
  }
}

}  // namespace moebench
