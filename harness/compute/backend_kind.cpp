#include "harness/compute/backend_kind.hpp"

#include "harness/core/error.hpp"

namespace moebench {

const char* to_string(ComputeBackend b) {
  return b == ComputeBackend::cpu ? "cpu" : "cuda";
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::bf16:
      return "bf16";
    case Precision::fp8:
      return "fp8";
  }
  return "?";
}

const char* to_string(GroupedGemmImpl g) {
  return g == GroupedGemmImpl::loop ? "loop" : "grouped";
}

GroupedGemmImpl parse_grouped_gemm_impl(const std::string& text) {
  if (text == "loop") return GroupedGemmImpl::loop;
  if (text == "grouped") return GroupedGemmImpl::grouped;
  throw UsageError("--grouped-gemm " + text +
                   ": expected loop (one GEMM per expert) or grouped (one cuBLAS grouped GEMM "
                   "over the local experts; --backend cuda)");
}

const char* to_string(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::automatic:
      return "auto";
    case AttentionImpl::cudnn:
      return "cudnn";
    case AttentionImpl::gemm:
      return "gemm";
  }
  return "?";
}

AttentionImpl parse_attention_impl(const std::string& text) {
  if (text == "auto") return AttentionImpl::automatic;
  if (text == "cudnn") return AttentionImpl::cudnn;
  if (text == "gemm") return AttentionImpl::gemm;
  throw UsageError("--attention-impl " + text +
                   ": expected auto (cuDNN's flash attention where available, the default), cudnn "
                   "or gemm (batched GEMMs around a fused softmax)");
}

ComputeBackend parse_compute_backend(const std::string& text) {
  if (text == "cpu") return ComputeBackend::cpu;
  if (text == "cuda") return ComputeBackend::cuda;
  throw UsageError("--backend " + text + ": unknown compute backend '" + text +
                   "'; valid: cpu, cuda");
}

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  if (text == "fp8") return Precision::fp8;
  throw UsageError("--precision " + text +
                   ": expected fp32 (--backend cpu), bf16 (--backend cuda) or fp8");
}

Precision native_precision(ComputeBackend b) {
  return b == ComputeBackend::cpu ? Precision::fp32 : Precision::bf16;
}

Precision resolve_precision(ComputeBackend b, std::optional<Precision> requested) {
  const Precision native = native_precision(b);
  if (!requested) return native;
  if (*requested == native || *requested == Precision::fp8) return *requested;
  throw UsageError(std::string("--precision ") + to_string(*requested) +
                   " is not available with --backend " + to_string(b) +
                   "; valid: " + to_string(native) + " or fp8");
}

}  // namespace moebench
