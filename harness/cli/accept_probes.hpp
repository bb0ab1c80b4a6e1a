// What `moebench accept` measures on each rank, and how it brings checksums to rank 0: the GEMM
// and memory probes, timed by the rank's own work; parameter checksums; an exact gather of
// 64-bit checksums.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/compute/compute.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "workloads/config/model_config.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench {

// The GEMM probe: the same n x n x n GEMM on the same inputs (the same seed on every rank),
// `repeats` times: its rate (the median repeat's) and each result's checksum.
struct GemmProbe {
  double flops_per_s = 0;
  std::vector<std::uint64_t> sums;
};
GemmProbe probe_gemm(Compute& c, std::int64_t n, int repeats);

// The attention probe: core attention of one layer over one sequence of `seq` tokens at `m`'s MLA
// shapes, forward and backward, `repeats` times after an untimed pass: its rate, Megatron's
// causal FLOP count (core_attention_flops_per_token) over the median repeat's time.
double probe_attention(Compute& c, const ModelConfig& m, std::int64_t seq, int repeats);

// The expert GEMM probe: the six grouped GEMM calls of one MoE layer's experts (forward, dgrad
// and wgrad of the up and down projections) at `m`'s widths, `experts` experts of `rows` rows
// each, in the step's precision, `repeats` times after an untimed pass: their FLOPs over the sum
// of each call's median time.
double probe_expert_gemms(Compute& c, const ModelConfig& m, std::int64_t experts, std::int64_t rows,
                          int repeats);

// A streaming copy's rate: bytes read and written over the median repeat's time.
double probe_memory(Compute& c, std::int64_t floats, int repeats);

// The checksums of this rank's parameters after a step: dense, then the experts'.
std::vector<std::uint64_t> parameter_sums(Compute& c, const TrainingStep& step);

// Every rank's checksums on rank 0 (each rank gives as many), exactly: each 64-bit value as two
// 32-bit halves, which a double holds exactly (a string gather would cut a long list short).
std::vector<std::vector<std::uint64_t>> gather_sums(const MpiRuntime& rt,
                                                    const std::vector<std::uint64_t>& mine);

}  // namespace moebench
