// The compute backends and precisions by name: enums parsed once where a user names them (the
// CLI) and resolved once, so nothing below compares strings. Which backends a binary holds is the
// registry's business (harness/backends/registry).
#pragma once

#include <optional>
#include <string>

namespace moebench {

enum class ComputeBackend { cpu, cuda };
// The step's arithmetic: FP32 (cpu), BF16 storage with FP32 accumulation (cuda), or fp8: the
// linear layers' GEMMs in E4M3 with per-tensor scales, everything else the backend's own.
enum class Precision { fp32, bf16, fp8 };

// How the experts' grouped GEMMs run (--grouped-gemm): one GEMM per expert in order, or one
// grouped call over all of them (cuBLAS's cublasGemmGroupedBatchedEx; cuda, BF16 only).
enum class GroupedGemmImpl { loop, grouped };

const char* to_string(ComputeBackend b);
const char* to_string(Precision p);
const char* to_string(GroupedGemmImpl g);
GroupedGemmImpl parse_grouped_gemm_impl(const std::string& text);

// How core attention runs (--attention-impl): `automatic` ("auto"): cuDNN's fused flash attention
// where the binary has it and cuDNN takes the shape, else the backend's own; `cudnn`: cuDNN or
// a usage error; `gemm`: the backend's own (cuda: batched GEMMs around a fused softmax).
enum class AttentionImpl { automatic, cudnn, gemm };
const char* to_string(AttentionImpl a);
AttentionImpl parse_attention_impl(const std::string& text);

// UsageError naming the valid values ("--backend tpu: unknown compute backend 'tpu'; valid: cpu,
// cuda").
ComputeBackend parse_compute_backend(const std::string& text);
Precision parse_precision(const std::string& text);

// The backend's own precision: fp32 on cpu, bf16 on cuda.
Precision native_precision(ComputeBackend b);
// What --precision asks for on `b` (nullopt: its own), or UsageError when it has no such
// arithmetic ("--precision bf16 is not available with --backend cpu; valid: fp32 or fp8").
Precision resolve_precision(ComputeBackend b, std::optional<Precision> requested);

}  // namespace moebench
