// The efficiencies `moebench predict` prices a step with: one set per GPU generation
// (harness/systems/efficiencies/*.json, compiled in), each figure with the published
// micro-benchmark it comes from, or labelled an assumption where none is cited yet. And what a
// system's figures give the model (workloads/predict): the peaks of a run's precision, its links.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/systems/systems.hpp"
#include "workloads/config/run_config.hpp"
#include "workloads/predict/predict_model.hpp"

namespace moebench {

struct EfficiencySet {
  std::string generation;  // hopper, blackwell, cpu
  Efficiencies values;
  nlohmann::json document;  // as written, with every figure's source
};

// The built-in sets, in generation order (parsed once).
const std::vector<EfficiencySet>& builtin_efficiencies();

// The set for a system's generation; UsageError naming the generations that have one.
const EfficiencySet& efficiencies_for(const SystemSpec& system);

// The hardware figures the model needs for `c` on `system`: the peak of the run's GEMM precision
// (mxfp8 where the run's FP8 recipe is mxfp8, fp8, bf16, or fp32), core attention at BF16 (FP32
// on a system without BF16), its memory bandwidth and links (a missing latency counts as 0), and
// the storage precision: BF16 on GPUs, FP32 on the cpu backend. UsageError naming the system and
// the figure it lacks.
Hardware hardware_for(const SystemSpec& system, const RunConfig& c);

// The built-in system a recipe's GPU runs on ("GB300" -> "gb300-nvl72"); empty when none.
std::string system_for_gpu(const std::string& gpu);

// The built-in system a GPU's device name names ("NVIDIA H200" -> "h200-hgx", "NVIDIA GB200" ->
// "gb200-nvl72"): the system whose GPU model (its name's first word) is the longest one found in
// the device name; empty when none is.
std::string system_for_device(const std::string& device_name);

}  // namespace moebench
