// What the performance probe measured, as plain data, and its two readings: the JSON document
// (`--out`, kind "moebench.bench") and the table for people. Measurement fills the record
// (harness/cli/bench_command.cpp); these functions only read it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/bench/bench.hpp"
#include "harness/device/device_records.hpp"
#include "harness/output/run_record.hpp"

namespace moebench {

constexpr int kBenchSchemaVersion = 1;
constexpr const char* kBenchReportKind = "moebench.bench";
// The experts' grouped GEMMs should reach this fraction of the dense GEMM rate (the performance
// target the probe reports against).
constexpr double kExpertGemmTargetRatio = 0.85;

struct BenchMeta {
  std::string tool_version;
  std::string git_sha;
  bool git_dirty = false;
  std::vector<std::string> argv;
  std::string start_time;  // ISO 8601, UTC
  std::string host;
  ComputeBackend backend = ComputeBackend::cpu;
  Precision precision = Precision::fp32;
  std::string blas;
  BlasCore blas_core;  // its kernels and why (cpu backend)
  std::string build_type;
  std::string compiler;
  std::string gemm_path;               // the backend's own words, when it says
  std::string grouped_gemm_path;       // idem
  std::string attention_path;          // idem
  std::optional<DeviceRecord> device;  // the probe's GPU (harness/device), rank 0
};

// The peak the step's rate is compared with, and where the number came from.
struct PeakRate {
  std::optional<double> tflops;
  std::string source;  // "--peak-tflops", "NVIDIA datasheet, dense BF16 (<device>)", "none: ..."
};

struct DenseGemmResult {
  std::int64_t n = 0;
  double flops = 0;
  Stats time_s;                         // per call, host clock around a synchronised call
  std::optional<double> events_time_s;  // cuda: time_bf16_gemm_seconds (CUDA events, mean)
  // fp8: the same calls with B's quantised copy kept across them (as the step keeps a weight's),
  // so that each quantises A only. The two medians split a call into the GEMM and one operand's
  // quantisation (quantisation_s, gemm_only_s; A and B are both n x n, so each costs the same).
  std::optional<Stats> weight_kept_time_s;
  double flop_rate() const;  // flops / median
  std::optional<double> quantisation_s() const;
  std::optional<double> gemm_only_s() const;
};

struct GemmCaseResult {
  GroupedGemmCase gemm;
  Stats time_s;  // per grouped call
  double flop_rate() const;
};

struct ExpertGemmResult {
  std::vector<GemmCaseResult> cases;
  double flops() const;      // all six calls
  double time_s() const;     // sum of the medians
  double flop_rate() const;  // flops / time
};

// Core attention of one layer on the step's MLA operands (q, the kv up-projection, the shared
// rope key, read in place) through one --attention-impl, forward and forward + backward.
struct AttentionCaseResult {
  std::string impl;  // "gemm" or "cudnn"
  std::string path;  // the backend's words for what ran (attention_path, after the case)
  std::int64_t batch = 0, seq_len = 0, heads = 0, qk_dim = 0, v_dim = 0;
  double flops = 0;                  // forward + backward, Megatron's causal count
  Stats forward_time_s;              // per call
  Stats time_s;                      // forward + backward, per pair of calls
  double flop_rate() const;          // flops / time_s median
  double forward_flop_rate() const;  // flops / 3 / forward median (forward is a third)
};

// An implementation the probe could not run, and why (the backend's or cuDNN's message).
struct AttentionUnavailable {
  std::string impl;
  std::string why;
};

struct LayerStackResult {
  RunConfig config;  // the emulated rank's configuration
  StackAccounting accounting;
  MemoryEstimate memory;
  RunResults results;             // world 1: the phases, the step statistics
  Stats forward_backward_time_s;  // step time minus the optimizer and gradient-reduction phases
  double forward_backward_flop_rate() const;
};

struct BenchRecord {
  BenchMeta meta;
  ModelConfig model;  // the real model the rank belongs to
  ExpertShare share;
  int warmup = 0;
  int iterations = 0;
  PeakRate peak;
  DenseGemmResult dense;  // BF16 on cuda (the roofline reference), FP32 on cpu
  // The same n through linear_gemm in FP8 (cuda: always where the device has FP8 tensor cores;
  // cpu: the emulation, with --precision fp8 only).
  std::optional<DenseGemmResult> dense_fp8;
  ExpertGemmResult experts;  // in the step's precision (--precision), one GEMM each
  // The same cases as one cuBLAS grouped GEMM each (--grouped-gemm grouped), where the backend
  // has it and the precision is not fp8.
  std::optional<ExpertGemmResult> experts_grouped;
  std::vector<AttentionCaseResult> attention;  // gemm, and cudnn on a device that has it
  std::vector<AttentionUnavailable> attention_unavailable;
  std::optional<Fp8GemmCounts> fp8_counts;  // --precision fp8, over the whole probe
  std::vector<LayerStackResult> stacks;     // one per --layers value
};

// The dense rate the experts are compared with: the FP8 one when the probe ran in fp8.
double reference_dense_rate(const BenchRecord& r);

nlohmann::ordered_json make_bench_report(const BenchRecord& r);
std::string format_bench_table(const BenchRecord& r);

}  // namespace moebench
