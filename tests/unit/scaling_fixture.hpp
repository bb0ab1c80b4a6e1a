// Hand-made RunPoints for the scaling tests: round numbers so efficiencies are known exactly.
#pragma once

#include <string>

#include "harness/scaling/inputs.hpp"
#include "harness/scaling/sha256.hpp"

namespace moebench::testing {

// A run at `gpus` GPUs of a fixed workload (128 tokens per GPU, 1e12 FLOP per GPU per step), so
// step time = 1 / tflops and tokens/s per GPU = 128 * tflops.
inline RunPoint scaling_point(int gpus, double tflops, const std::string& path = "") {
  RunPoint p;
  p.path = path.empty() ? "run-" + std::to_string(gpus) + ".json" : path;
  p.sha256 = sha256_hex(p.path);  // distinct per path (of the name, not of a file)
  p.job_id = "job" + std::to_string(gpus);
  p.hosts = {"node0"};
  p.start_time = "2025-01-01T00:00:00Z";
  p.tool_version = "0.1.0";
  p.git_sha = "abc";
  p.software = {{"meta.mpi_library", "Open MPI 4.1.4"}, {"config.blas_threads", "1"}};
  p.workload_key = {{"config.model.hidden_size", "256"},
                    {"config.workload.seq_len", "128"},
                    {"config.workload.micro_batch", "1"},
                    {"config.precision", "\"fp32\""},
                    {"parallel.ep", "1"}};
  p.model_name = "tiny";
  p.seq_len = 128;
  p.micro_batch = 1;
  p.gpus = gpus;
  p.nodes = 1;
  p.ranks_per_node = gpus;
  p.ep = 1;
  p.steps = 10;
  p.tokens_per_rank = 128;
  p.global_tokens = 128.0 * gpus;
  p.step_time_s = 1.0 / tflops;
  p.tflops_per_gpu = tflops;
  p.tokens_per_s_per_gpu = 128.0 * tflops;
  p.compute_time_s = 0.8 * p.step_time_s;
  p.communication_time_s = 0.2 * p.step_time_s;
  p.exposed_communication_s = 0.2 * p.step_time_s;
  // attention 0.5, experts 0.3, dispatch 0.1, combine 0.1 of the step
  p.phase_time_s[static_cast<std::size_t>(Phase::attention)] = 0.5 * p.step_time_s;
  p.phase_time_s[static_cast<std::size_t>(Phase::experts)] = 0.3 * p.step_time_s;
  p.phase_time_s[static_cast<std::size_t>(Phase::dispatch)] = 0.1 * p.step_time_s;
  p.phase_time_s[static_cast<std::size_t>(Phase::combine)] = 0.1 * p.step_time_s;
  p.phase_max_s = p.phase_time_s;  // one rank sets every phase here
  p.busbw[static_cast<std::size_t>(Phase::dispatch)] = 10e9;
  p.busbw[static_cast<std::size_t>(Phase::combine)] = 20e9;
  p.verification_enabled = true;
  p.verification_passed = true;
  return p;
}

inline void set_key(RunPoint& p, const std::string& field, const std::string& value) {
  for (auto& kv : p.workload_key) {
    if (kv.first == field) kv.second = value;
  }
}

}  // namespace moebench::testing
