// --measured's arithmetic on hand-computed cases: each measured term's rate replaces datasheet x
// efficiency, a rate above the datasheet raises the peak for every efficiency it serves (so that
// the other products stay), and the sources say which terms were measured.
#include "harness/cli/measured.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

MeasuredTerm term(const char* name, double efficiency, double factor) {
  MeasuredTerm t;
  t.name = name;
  t.model_efficiency = efficiency;
  t.factor = factor;
  return t;
}

TEST_CASE("measured figures: each product is the measured rate, the others stay") {
  Hardware hw;
  hw.gemm_flops = 100;
  hw.attention_flops = 50;
  hw.memory_bandwidth = 10;
  hw.nvlink_domain = 1;
  hw.scale_out.bandwidth_bytes_per_s = 5;
  Efficiencies eff;
  eff.dense_gemm = eff.grouped_gemm = eff.attention = eff.memory = eff.scale_out = 0.5;
  eff.nvlink = 0.5;
  MeasuredFigures m;
  // The grouped GEMM ran 3x the model's rate (0.5 x 3 = 1.5 of its peak), memory at half, the
  // scale-out link at the model's own; attention and the dense GEMM not measured.
  m.terms = {term("grouped_gemm", 0.5, 3), term("memory", 0.5, 0.5), term("scale_out", 0.5, 1)};
  apply_measured(m, hw, eff);
  // Exact: products of a few doubles, each the same on both sides (1e-12 relative).
  CHECK(hw.gemm_flops * eff.grouped_gemm == doctest::Approx(150).epsilon(1e-12));
  CHECK(hw.gemm_flops * eff.dense_gemm == doctest::Approx(50).epsilon(1e-12));  // unmeasured
  CHECK(hw.gemm_flops == doctest::Approx(150).epsilon(1e-12));  // raised: 1.5 of the peak
  CHECK(eff.grouped_gemm == doctest::Approx(1).epsilon(1e-12));
  CHECK(hw.memory_bandwidth * eff.memory == doctest::Approx(2.5).epsilon(1e-12));
  CHECK(hw.memory_bandwidth == 10);  // under the peak: nothing raised
  CHECK(hw.attention_flops * eff.attention == doctest::Approx(25).epsilon(1e-12));
  CHECK(hw.scale_out.bandwidth_bytes_per_s * eff.scale_out == doctest::Approx(2.5).epsilon(1e-12));
  for (double e : {eff.dense_gemm, eff.grouped_gemm, eff.attention, eff.memory, eff.scale_out}) {
    CHECK(e > 0);
    CHECK(e <= 1);  // what predict_step takes
  }
}

TEST_CASE("measured figures: the sources name what was measured and what the model priced") {
  MeasuredFigures m;
  m.terms = {term("grouped_gemm", 0.5, 1), term("nvlink", 0.7, 0.9)};
  const nlohmann::ordered_json s = measured_sources(m);
  CHECK(s["grouped_gemm"] == "measured");
  CHECK(s["nvlink"] == "measured");
  CHECK(s["dense_gemm"] == "model");
  CHECK(s["scale_out"] == "model");
  CHECK(s["dispatcher"] == "model");  // the trainer's own, never a hardware figure
  CHECK(s["host_overhead"] == "model");
  const nlohmann::ordered_json none = measured_sources(MeasuredFigures{});
  for (const auto& [name, how] : none.items()) CHECK(how == "model");
}

}  // namespace
}  // namespace moebench
