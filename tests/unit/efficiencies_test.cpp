// The efficiencies per GPU generation (harness/systems/efficiencies/*.json): every figure with its
// source and in range, one set for every built-in system's generation; and what a system's
// figures give the step-time model.
#include "harness/systems/efficiencies.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

TEST_CASE("efficiencies: every generation's figures have a source and are fractions") {
  std::vector<std::string> generations;
  for (const EfficiencySet& e : builtin_efficiencies()) {
    generations.push_back(e.generation);
    for (const auto& [name, figure] : e.document.at("figures").items()) {
      CAPTURE(e.generation);
      CAPTURE(name);
      CHECK(figure.at("source").get<std::string>().size() > 20);
      const double v = figure.at("value").get<double>();
      if (name == "grouped_gemm_half_rows") {
        CHECK(v >= 0);
      } else if (name.rfind("host_overhead_", 0) == 0) {  // time added to a pass, not a peak's
        CHECK(v >= 0);
        CHECK(v < 1);
      } else {
        CHECK(v > 0);
        CHECK(v <= 1);
      }
    }
  }
  CHECK(generations == std::vector<std::string>{"blackwell", "cpu", "hopper"});
  for (const SystemSpec& s : builtin_systems()) {
    CAPTURE(s.name);
    CHECK(efficiencies_for(s).generation == s.generation);
  }
}

TEST_CASE("efficiencies: a system's peaks for the run's precision, its links and storage") {
  RunConfig c;
  c.precision = Precision::fp8;
  c.fp8_recipe = Fp8Recipe::mxfp8;
  const Hardware gb300 = hardware_for(find_system("gb300-nvl72"), c);
  CHECK(gb300.gemm_flops == 4.9e15);
  CHECK(gb300.attention_flops == 2.45e15);
  CHECK(gb300.fp8_flops == 4.9e15);
  CHECK(gb300.nvlink_domain == 72);
  CHECK(gb300.nvlink.bandwidth_bytes_per_s == 900e9);
  CHECK(gb300.storage_bytes == 2);
  CHECK(gb300.concurrent_communication);
  CHECK(gb300.sms == 160);                      // Blackwell Ultra
  CHECK(gb300.exp_per_s == 10.7e12);            // and its doubled SFUs
  CHECK(gb300.host_link_bandwidth == 168.6e9);  // every GPU of the node copying at once
  // Hopper has no MXFP8: the request says which figure is missing.
  CHECK_THROWS_WITH_AS(hardware_for(find_system("h100-hgx"), c), doctest::Contains("no MXFP8 peak"),
                       UsageError);
  c.precision = Precision::fp32;
  const Hardware cpu = hardware_for(find_system("cpu"), c);
  CHECK(cpu.gemm_flops == doctest::Approx(0.0895e12));
  CHECK(cpu.storage_bytes == 4);
  CHECK_FALSE(cpu.concurrent_communication);
  CHECK(cpu.sms == 0);
  CHECK(cpu.host_link_bandwidth == 0.0);
  c.precision = Precision::bf16;
  CHECK_THROWS_AS(hardware_for(find_system("cpu"), c), UsageError);
}

TEST_CASE("efficiencies: the system a recipe's GPU or a device name names") {
  CHECK(system_for_gpu("GB300") == "gb300-nvl72");
  CHECK(system_for_gpu("B300") == "b300-hgx");
  CHECK(system_for_gpu("MI300X") == "");
  CHECK(system_for_device("NVIDIA H200") == "h200-hgx");
  CHECK(system_for_device("NVIDIA H100 80GB HBM3") == "h100-hgx");
  CHECK(system_for_device("NVIDIA GB200") == "gb200-nvl72");  // not b200-hgx
  CHECK(system_for_device("NVIDIA B200") == "b200-hgx");
  CHECK(system_for_device("Tesla V100-SXM2-32GB") == "");
}

}  // namespace
}  // namespace moebench
