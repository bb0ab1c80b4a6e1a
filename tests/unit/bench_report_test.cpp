#include "harness/bench/bench_report.hpp"

#include <doctest/doctest.h>

#include <string>

#include "tests/unit/run_record_fixture.hpp"

namespace moebench {
namespace {

Stats constant(double seconds, std::size_t count = 3) {
  Stats s;
  s.count = count;
  s.median = s.mean = s.min = s.max = s.p95 = seconds;
  return s;
}

// A record with round numbers: a 1000 TFLOP/s dense GEMM, expert GEMMs at 900, one 1-layer
// stack of 10 ms with 8 ms forward+backward.
BenchRecord sample_record(std::optional<double> peak) {
  BenchRecord r;
  r.meta.backend = ComputeBackend::cuda;
  r.meta.precision = Precision::bf16;
  r.meta.gemm_path = "cublasLt";
  r.meta.grouped_gemm_path = "cublasLt per expert";
  r.meta.attention_path = "batched GEMM + softmax";
  r.meta.device = testing::sample_device_record();
  r.model = preset("deepseek-v3");
  r.share = expert_share(r.model, 32, 4096);
  r.warmup = 1;
  r.iterations = 3;
  r.peak.tflops = peak;
  r.peak.source = peak ? "--peak-tflops" : "none: unknown device, give --peak-tflops";
  r.dense.n = 1000;
  r.dense.flops = dense_gemm_flops(1000);  // 2e9
  r.dense.time_s = constant(2e-6);         // 1000 TFLOP/s
  r.dense.events_time_s = 1e-6;            // 2000 TFLOP/s
  for (const GroupedGemmCase& g : expert_gemm_cases(8, 4096, 7168, 2048)) {
    r.experts.cases.push_back({g, constant(g.flops() / 900e12)});
  }
  LayerStackResult s;
  s.config = bench_run_config(r.model, 32, 4096, 1, ComputeBackend::cuda, Precision::bf16, 1,
                              Optimizer::adamw, 1, 1, 3);
  s.accounting.flops_per_step = 5e12;
  s.results.step_time_s = constant(0.010);
  s.results.tflops_per_gpu = 500;  // 5e12 / 10 ms
  s.results.tokens_per_s_per_gpu = 409600;
  PhaseResult experts;
  experts.phase = Phase::experts;
  experts.time_s = constant(0.004);
  experts.flops = 3.6e12;
  experts.flop_rate = 900e12;
  PhaseResult dispatch;
  dispatch.phase = Phase::dispatch;
  dispatch.time_s = constant(0.001);
  s.results.phases = {experts, dispatch};
  s.forward_backward_time_s = constant(0.008);
  r.stacks.push_back(s);
  return r;
}

}  // namespace

TEST_CASE("bench report: the rates, ratios and fractions of peak it derives") {
  const nlohmann::ordered_json j = make_bench_report(sample_record(1000.0));
  CHECK(j["kind"] == "moebench.bench");
  CHECK(j["schema_version"] == kBenchSchemaVersion);
  CHECK(j["meta"]["device"]["name"] == "NVIDIA H200");
  CHECK(j["meta"]["device"]["compute_capability"] == "9.0");
  CHECK(j["config"]["local_experts"] == 8);
  CHECK(j["config"]["rows_per_expert"] == 4096);
  const auto& res = j["results"];
  // Rates are FLOPs over seconds: exact up to one rounding each (1e-12).
  CHECK(res["dense_gemm"]["tflops"].get<double>() == doctest::Approx(1000).epsilon(1e-12));
  CHECK(res["dense_gemm"]["events_tflops"].get<double>() == doctest::Approx(2000).epsilon(1e-12));
  CHECK(res["dense_gemm"]["fraction_of_peak"].get<double>() == doctest::Approx(1.0));
  CHECK(res["expert_gemms"]["cases"].size() == 6);
  CHECK(res["expert_gemms"]["tflops"].get<double>() == doctest::Approx(900).epsilon(1e-12));
  CHECK(res["expert_gemms"]["ratio_to_dense"].get<double>() == doctest::Approx(0.9).epsilon(1e-12));
  CHECK(res["expert_gemms"]["meets_target"] == true);
  const auto& s = res["layer_stacks"][0];
  CHECK(s["layers"] == 1);
  CHECK(s["fraction_of_peak"].get<double>() == doctest::Approx(0.5));
  // 5e12 FLOP in 8 ms of forward + backward.
  CHECK(s["forward_backward_tflops"].get<double>() == doctest::Approx(625).epsilon(1e-12));
  CHECK(s["forward_backward_fraction_of_peak"].get<double>() == doctest::Approx(0.625));
  CHECK(s["phases"]["experts"]["share"].get<double>() == doctest::Approx(0.4));
  CHECK(s["phases"]["experts"]["tflops"].get<double>() == doctest::Approx(900));
  CHECK(s["phases"]["dispatch"]["tflops"].get<double>() == 0.0);  // communication: no rate
}

TEST_CASE("bench report: the fp8 dense rate beside the bf16 one, and experts against fp8") {
  BenchRecord r = sample_record(989.0);
  CHECK(make_bench_report(r)["results"]["dense_gemm_fp8"].is_null());
  DenseGemmResult f = r.dense;
  f.time_s = constant(1e-6);  // twice the bf16 rate
  r.dense_fp8 = f;
  r.fp8_counts = Fp8GemmCounts{120, 3};
  nlohmann::ordered_json j = make_bench_report(r);
  // Exact ratios of the constants above, up to the division's rounding.
  CHECK(j["results"]["dense_gemm_fp8"]["fp8_over_dense"].get<double>() ==
        doctest::Approx(2.0).epsilon(1e-12));
  CHECK(j["results"]["fp8_gemms"]["bf16_fallbacks"] == 3);
  const double bf16_ratio = j["results"]["expert_gemms"]["ratio_to_dense"].get<double>();
  // With the probe in fp8 the experts are compared with the fp8 dense rate: half the ratio.
  r.meta.precision = Precision::fp8;
  j = make_bench_report(r);
  CHECK(j["results"]["expert_gemms"]["ratio_to_dense"].get<double>() ==
        doctest::Approx(bf16_ratio / 2).epsilon(1e-12));
  CHECK(format_bench_table(r).find("in fp8") != std::string::npos);
}

TEST_CASE("bench report: the grouped GEMM beside the loop, and which is faster") {
  BenchRecord r = sample_record(989.0);
  nlohmann::ordered_json j = make_bench_report(r);
  CHECK(j["results"]["expert_gemms"]["implementation"] == "loop");
  CHECK(j["results"]["expert_gemms_grouped"].is_null());
  CHECK(j["results"].count("faster_expert_gemms") == 0);
  ExpertGemmResult g;
  for (const GemmCaseResult& c : r.experts.cases) {
    g.cases.push_back({c.gemm, constant(c.gemm.flops() / 950e12)});  // faster than 900
  }
  r.experts_grouped = g;
  j = make_bench_report(r);
  CHECK(j["results"]["expert_gemms_grouped"]["implementation"] == "grouped");
  CHECK(j["results"]["expert_gemms_grouped"]["tflops"].get<double>() ==
        doctest::Approx(950).epsilon(1e-9));
  CHECK(j["results"]["faster_expert_gemms"] == "grouped");
  CHECK(format_bench_table(r).find("# faster: grouped (--grouped-gemm)") != std::string::npos);
  for (GemmCaseResult& c : r.experts_grouped->cases) c.time_s = constant(c.gemm.flops() / 850e12);
  CHECK(make_bench_report(r)["results"]["faster_expert_gemms"] == "loop");
}

TEST_CASE("bench report: without a peak the fractions are null and the target can be missed") {
  BenchRecord r = sample_record(std::nullopt);
  for (GemmCaseResult& c : r.experts.cases) c.time_s = constant(c.gemm.flops() / 800e12);
  const nlohmann::ordered_json j = make_bench_report(r);
  CHECK(j["peak"]["tflops"].is_null());
  CHECK(j["results"]["dense_gemm"]["fraction_of_peak"].is_null());
  CHECK(j["results"]["layer_stacks"][0]["fraction_of_peak"].is_null());
  CHECK(j["results"]["expert_gemms"]["ratio_to_dense"].get<double>() == doctest::Approx(0.8));
  CHECK(j["results"]["expert_gemms"]["meets_target"] == false);
}

TEST_CASE("bench report: the table names the device, the peak and every figure") {
  const std::string t = format_bench_table(sample_record(989.0));
  for (const char* text :
       {"backend cuda, precision bf16, device NVIDIA H200 (0000:19:00.0)", "gemm: cublasLt",
        "one EP=32 rank: 8 local experts, top-8, 4096 tokens", "4096 rows per expert",
        "peak: 989 TFLOP/s (--peak-tflops)", "dense GEMM 1000^3", "CUDA events: 2000 TFLOP/s",
        "forward_up", "wgrad_up", "all six", "(target >= 0.85: met)",
        "where the time goes, 1 layer", "experts", "dispatch", "50.6%"}) {
    CAPTURE(text);
    CHECK(t.find(text) != std::string::npos);
  }
}

}  // namespace moebench
