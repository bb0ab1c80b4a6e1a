// The performance probe (`moebench bench`): what it measures on one device, as pure functions of
// the model and the flags, so shapes and FLOP counts are unit-tested without a GPU.
//
// One rank of an expert-parallel job of EP ranks holds E / EP routed experts. With balanced
// routing every expert receives tokens * top_k * EP / E rows per micro-batch (the tokens of all EP
// ranks, each sending top_k rows). One process reproduces exactly that work as a model with
// E / EP routed experts and the same top-k: with balanced routing each of its `tokens` tokens
// reaches top_k of the local experts, i.e. tokens * top_k / (E / EP) rows each, the same number.
// DeepSeek-V3 at EP 32: 8 local experts, top-8, so every token reaches all 8 and each expert
// computes 4096 rows of a 4096-token micro-batch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workloads/config/run_config.hpp"

namespace moebench {

// The per-rank share of an EP-way expert-parallel layout.
struct ExpertShare {
  int ep = 1;                        // the emulated expert-parallel size
  std::int64_t local_experts = 0;    // E / ep
  std::int64_t tokens = 0;           // tokens per rank per micro-batch
  std::int64_t rows_per_expert = 0;  // tokens * top_k * ep / E, balanced routing
};

// The default emulated EP: E / top_k, the largest EP at which a single process can still
// reproduce one rank's expert work (32 for DeepSeek-V3, 4 for the tiny preset).
int default_bench_ep(const ModelConfig& m);

// UsageError when ep does not divide E or leaves fewer local experts than top_k (the emulation
// routes each token to top_k distinct local experts).
ExpertShare expert_share(const ModelConfig& m, int ep, std::int64_t tokens);

// The model one process instantiates to do one EP rank's work: the local experts as its routed
// experts, the same top-k, one routing group (group-limited selection needs the 256-expert
// layout; balanced routing does not look at groups). Attention, the shared expert and every
// width are the model's own, so the Megatron FLOPs per token are the real model's.
ModelConfig emulated_rank_model(const ModelConfig& m, int ep);

// The run configuration of one probe step: world 1, EP 1, `layers` MoE layers (no dense layer),
// attention on, balanced routing, one micro-batch of seq_len tokens.
RunConfig bench_run_config(const ModelConfig& m, int ep, std::int64_t seq_len, std::int64_t layers,
                           ComputeBackend backend, Precision precision, int blas_threads,
                           Optimizer optimizer, std::uint64_t seed, int warmup, int steps);

// One grouped GEMM call of the experts' SwiGLU MLPs, in the training step's layout: `count`
// problems of C[m x n] = op(A) op(B) with inner dimension k.
struct GroupedGemmCase {
  std::string name;  // "forward_up", "forward_down", "dgrad_down", ...
  std::string pass;  // "forward", "dgrad" or "wgrad"
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t count = 0;
  // A and B as stored (row-major rows x cols, before op()).
  std::int64_t a_rows() const { return trans_a ? k : m; }
  std::int64_t a_cols() const { return trans_a ? m : k; }
  std::int64_t b_rows() const { return trans_b ? n : k; }
  std::int64_t b_cols() const { return trans_b ? k : n; }
  double flops() const;  // 2 m n k per problem, all problems
};

// The six grouped calls of one MoE layer's experts (forward up and down, dgrad and wgrad of
// each), as workloads/layers/moe.cpp issues them: hidden h, expert width f, `rows` per expert.
std::vector<GroupedGemmCase> expert_gemm_cases(std::int64_t experts, std::int64_t rows,
                                               std::int64_t h, std::int64_t f);

// 2 n^3: one n x n x n GEMM.
double dense_gemm_flops(std::int64_t n);

// The dense BF16 tensor-core peak of a known device, in TFLOP/s (H100 and H200: 989), from its
// name as the driver reports it, and where the figure comes from; nullopt for an unknown device
// or the cpu backend.
struct KnownPeak {
  double tflops = 0;
  std::string source;
};
std::optional<KnownPeak> known_bf16_peak(const std::string& device_name);

// "1,4" -> {1, 4}: positive, strictly increasing. UsageError otherwise.
std::vector<std::int64_t> parse_layer_list(const std::string& text);

}  // namespace moebench
