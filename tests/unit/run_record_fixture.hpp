// A hand-built RunRecord for the report and table tests: round numbers, so expected text and
// values are known exactly.
#pragma once

#include "harness/output/run_record.hpp"
#include "workloads/config/model_config.hpp"

namespace moebench::testing {

// An H200 as the cuda backend describes it, on rank `rank` of host "gpu-node", without NVML.
inline DeviceRecord sample_device_record(int rank = 0) {
  DeviceRecord d;
  d.rank = rank;
  d.host = "gpu-node";
  d.info.ordinal = 0;
  d.info.visible_devices = 1;
  d.info.name = "NVIDIA H200";
  d.info.uuid = "GPU-8c3a0000-0000-0000-0000-000000000001";
  d.info.pci_bus_id = "0000:19:00.0";
  d.info.total_memory_bytes = 150754820096;  // beyond 32 bits
  d.info.compute_capability_major = 9;
  d.info.compute_capability_minor = 0;
  d.info.multiprocessors = 132;
  d.info.l2_cache_bytes = 52428800;
  d.info.driver_cuda_version = "13.0";
  d.info.runtime_version = "13.0";
  d.info.cublas_version = "13.0.0";
  d.nccl_version = "2.28.9";  // driver_version left empty: NVML was not found
  return d;
}

inline RunRecord sample_run_record() {
  RunRecord r;
  r.meta.tool_version = "0.1.0";
  r.meta.git_sha = "0123456789abcdef";
  r.meta.argv = {"moebench", "run", "--model", "deepseek-v3"};
  r.meta.start_time = "2025-01-01T00:00:00Z";
  r.meta.hosts = {"node-a"};
  r.meta.mpi_library = "Open MPI v4.1.4";
  r.meta.backend = "cpu";
  r.meta.comm = "mpi";
  r.meta.blas = "OpenBLAS";
  r.meta.build_type = "Release";
  r.meta.compiler = "GCC 12";
  r.meta.environment = {{"SLURM_JOB_ID", "42"}};

  r.config.model = preset("deepseek-v3");
  r.config.workload.layers = 4;
  r.config.workload.dense_layers = 1;
  r.config.layout.world = 4;
  r.config.layout.ep = 2;
  r.topology.grid = ParallelGrid(4, GridShape{1, 1, 2, 1});
  r.topology.ranks_per_node = 4;

  r.full_model.scope = "full_model";
  r.full_model.total_params = 671'000'000'000;
  r.instantiated.scope = "instantiated";
  r.instantiated.total_params = 40'000'000'000;
  r.collective_bytes.dispatch = 1e8;
  r.memory.weights = 1e9;

  RunResults& res = r.results;
  res.step_times_s = {0.100, 0.102, 0.104};
  res.step_time_s = summarize(res.step_times_s);
  res.tflops_per_gpu = 1.5;
  // The figures follow from each other as a run computes them (moebench report checks it):
  // FLOPs per step = TFLOP/s x median x world, tokens/s = tokens per step / (median x world).
  const double median_world = res.step_time_s.median * r.config.layout.world;
  r.instantiated.flops_per_step = res.tflops_per_gpu * 1e12 * median_world;
  r.instantiated.tokens_per_step = static_cast<double>(tokens_per_step(r.config));
  res.tokens_per_s_per_gpu = r.instantiated.tokens_per_step / median_world;
  res.compute_time_s = 0.080;
  res.communication_time_s = 0.030;
  res.exposed_communication_s = 0.022;
  res.overlap.busy_s = 0.060;
  res.overlap.exposed_s = 0.030;
  res.overlap.hidden_s = 0.030;
  res.overlap.fraction = 0.5;
  res.grad_buckets_dense = 3;
  res.grad_buckets_expert = 2;
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    PhaseResult p;
    p.phase = static_cast<Phase>(i);
    const double t = 0.001 * static_cast<double>(i + 1);  // attention 1 ms ... optimizer 10 ms
    const double times[] = {t, t, t};
    p.time_s = summarize(times);
    if (is_communication(p.phase)) {
      const double busy[] = {2 * t, 2 * t, 2 * t};  // half of it hidden behind compute
      p.busy_s = summarize(busy);
      p.bytes = 25e6;               // 25 MB
      p.algbw = p.bytes / (2 * t);  // dispatch (5 ms exposed, 10 ms busy): 2.5 GB/s
      p.busbw = p.algbw * 0.5;      // 2-rank group
      p.group_size = 2;
    } else {
      p.flops = 2e9 * static_cast<double>(i + 1);
      p.flop_rate = p.flops / t;  // 2 TFLOP/s for every compute phase
    }
    res.phases.push_back(p);
  }
  for (int rank = 0; rank < 4; ++rank) {
    RankResult rr;
    rr.rank = rank;
    rr.host = "node-a";
    rr.step_time_s = 0.1;
    rr.phase_time_s.fill(0.001);
    res.per_rank.push_back(rr);
  }

  r.verification.enabled = true;
  r.verification.passed = true;
  r.verification.reference = "single-process step on rank 0";
  r.verification.rtol = 1e-4;
  r.verification.atol = 1e-5;
  r.verification.tolerance_reason = "fp32 sums in a different order";
  r.verification.compared = 123456;
  r.verification.max_abs_error = 3e-7;
  r.verification.max_rel_error = 1.2e-6;
  r.verification.tensors = {{"output", 123456, 0, 3e-7, 1.2e-6}};
  r.steps_completed = static_cast<int>(res.step_times_s.size());
  r.ranks_reporting = r.config.layout.world;
  return r;
}

}  // namespace moebench::testing
