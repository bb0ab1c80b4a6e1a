#include "harness/systems/efficiencies.hpp"

#include "harness/core/error.hpp"
#include "harness/core/human.hpp"

namespace moebench {

// Generated from harness/systems/efficiencies/*.json (harness/layers.cmake).
extern const char* const kEfficiencyFiles[];
extern const int kEfficiencyFileCount;

namespace {

EfficiencySet efficiency_set(const nlohmann::json& doc) {
  EfficiencySet s;
  s.generation = doc.at("generation").get<std::string>();
  const nlohmann::json& f = doc.at("figures");
  const auto value = [&](const char* name) { return f.at(name).at("value").get<double>(); };
  s.values.dense_gemm = value("dense_gemm");
  s.values.grouped_gemm = value("grouped_gemm");
  s.values.grouped_gemm_half_rows = value("grouped_gemm_half_rows");
  s.values.attention = value("attention");
  s.values.memory = value("memory");
  s.values.nvlink = value("nvlink");
  s.values.scale_out = value("scale_out");
  s.values.host_overhead_partial_graphs = value("host_overhead_partial_cuda_graphs");
  s.values.host_overhead_no_graphs = value("host_overhead_no_cuda_graphs");
  s.document = doc;
  return s;
}

double need(const Figure& f, const SystemSpec& s, const std::string& what) {
  if (!f.value || !(*f.value > 0)) {
    throw UsageError("system " + s.name + " has no " + what +
                     "; give a system that has it (`moebench systems`) or a file with it");
  }
  return *f.value;
}

}  // namespace

const std::vector<EfficiencySet>& builtin_efficiencies() {
  static const std::vector<EfficiencySet> all = [] {
    std::vector<EfficiencySet> out;
    for (int i = 0; i < kEfficiencyFileCount; ++i) {
      out.push_back(efficiency_set(nlohmann::json::parse(kEfficiencyFiles[i])));
    }
    return out;
  }();
  return all;
}

const EfficiencySet& efficiencies_for(const SystemSpec& system) {
  std::vector<std::string> names;
  for (const EfficiencySet& e : builtin_efficiencies()) {
    if (e.generation == system.generation) return e;
    names.push_back(e.generation);
  }
  throw UsageError("system " + system.name + " is of generation '" + system.generation +
                   "', which has no efficiencies; valid: " + join(names, ", "));
}

Hardware hardware_for(const SystemSpec& s, const RunConfig& c) {
  Hardware hw;
  const bool cpu = s.generation == "cpu";
  switch (c.precision) {
    case Precision::fp8:
      hw.gemm_flops = c.fp8_recipe == Fp8Recipe::mxfp8
                          ? need(s.peak_mxfp8, s, "MXFP8 peak (--fp8-recipe mxfp8)")
                          : need(s.peak_fp8, s, "FP8 peak (--precision fp8)");
      break;
    case Precision::bf16:
      hw.gemm_flops = need(s.peak_bf16, s, "BF16 peak (--precision bf16)");
      break;
    case Precision::fp32:
      hw.gemm_flops = need(s.peak_fp32, s, "FP32 peak (--precision fp32)");
      break;
  }
  hw.attention_flops = s.peak_bf16.value ? *s.peak_bf16.value : need(s.peak_fp32, s, "FP32 peak");
  hw.fp8_flops = s.peak_fp8.value.value_or(0.0);
  hw.memory_bandwidth = need(s.memory_bandwidth, s, "memory bandwidth");
  hw.nvlink_domain = s.nvlink_domain_gpus.value ? static_cast<int>(*s.nvlink_domain_gpus.value) : 1;
  if (hw.nvlink_domain > 1) {
    hw.nvlink.bandwidth_bytes_per_s = need(s.nvlink_bandwidth, s, "NVLink bandwidth");
    hw.nvlink.latency_s = s.nvlink_latency.value.value_or(0.0);
  }
  hw.scale_out.bandwidth_bytes_per_s = need(s.scale_out_bandwidth, s, "scale-out bandwidth");
  hw.scale_out.latency_s = s.scale_out_latency.value.value_or(0.0);
  if (hw.nvlink_domain <= 1) hw.nvlink = hw.scale_out;
  hw.storage_bytes = cpu ? 4 : 2;
  hw.concurrent_communication = !cpu;
  hw.sms = s.sm_count.value ? static_cast<int>(*s.sm_count.value) : 0;
  hw.exp_per_s = s.exp_per_s.value.value_or(0.0);
  hw.host_link_bandwidth = s.host_link_bandwidth.value.value_or(0.0);
  return hw;
}

std::string system_for_gpu(const std::string& gpu) {
  for (const SystemSpec& s : builtin_systems()) {
    if (s.gpu == gpu) return s.name;
  }
  return "";
}

std::string system_for_device(const std::string& device_name) {
  std::string best;
  std::size_t best_len = 0;
  for (const SystemSpec& s : builtin_systems()) {
    if (s.generation == "cpu") continue;
    const std::string model = s.gpu.substr(0, s.gpu.find(' '));
    if (model.size() > best_len && device_name.find(model) != std::string::npos) {
      best = s.name;
      best_len = model.size();
    }
  }
  return best;
}

}  // namespace moebench
