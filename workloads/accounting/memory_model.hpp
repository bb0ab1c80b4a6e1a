// The memory model: what one rank of a run holds, by pipeline rank, as the training step
// allocates it (workloads/step/training_step.cpp and the layers). One model for `plan`, for the
// run's check before it allocates, for slurm/scaling.sh's pre-flight (through `plan`), and for
// the run report's estimate beside the measured peak (memory.estimate_bytes against
// memory.measured_peak_bytes, checked within 10% by tests/e2e/test_memory.py).
//
// What a rank holds:
//  - weights and FP32 main gradients of its stages' parameters (with the embedding, output head
//    and MTP layers where the layout places them), and the selection bias of every router;
//  - AdamW's FP32 moments and, with narrower storage, FP32 master weights, sharded with ZeRO-1,
//    whose gradient and parameter shards it also holds;
//  - activations: each micro-batch chunk in flight keeps its layers' inputs and outputs and what
//    each layer's backward reads, except what --recompute drops, from the receive of its input
//    (or its forward) to the end of its backward: the peak of the schedule, replayed;
//  - scratch the layers share: the forward's intermediates nobody keeps, the backward's
//    temporaries and the recomputed activations, one buffer per name at its largest use;
//  - the pipeline's send and receive buffers, the step's inputs and output gradients (or token
//    ids and losses);
//  - what the backend holds besides tensors (attention scores, --precision fp8's quantised
//    copies): `backend`, outside the tensors' total the measured peak is compared with.
// Routing is taken as balanced: each rank receives top_k rows per token it sends.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "workloads/config/run_config.hpp"

namespace moebench {

struct MemoryEstimate {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;      // moments, master weights, ZeRO-1's shards
  double activations = 0;    // kept from forward to backward
  double communication = 0;  // pipeline buffers and the all-to-all buffers
  double workspace = 0;      // the rest of the shared scratch, inputs, output gradients
  double backend = 0;        // held by the backend besides tensors
  // The tensors the step allocates: what memory.measured_peak_bytes measures.
  double tensors() const {
    return weights + gradients + optimizer + activations + communication + workspace;
  }
  double total() const { return tensors() + backend; }
};

// How a trainer keeps activations. The defaults are moebench's own step; a recipe's Megatron run
// differs where Transformer Engine does (plan shows both).
struct ActivationPolicy {
  Recompute recompute;  // modules recomputed in the backward instead of kept
  // Core attention's k and v kept as tensors of their own, per head [k_nope | rope key] and v
  // (Transformer Engine's saved inputs); moebench's step reads them in place from the kv
  // up-projection and the shared rope key, which it keeps instead.
  bool separate_k_v = false;
  // With --precision fp8, the routed experts' GEMM inputs (their rows and weighted activation)
  // kept in FP8 (1 byte and the scales) for the weight gradients: moebench's --fp8-saved-inputs.
  bool fp8_saved_inputs = false;
  // With --precision fp8, every input of a linear GEMM and of core attention kept in FP8, as
  // Transformer Engine keeps its quantised copies; moebench's step keeps the others in storage
  // precision.
  bool fp8_all_inputs = false;
  // With --precision fp8, every weight's quantised copies kept for the step (moebench quantises
  // each weight once per step, forward and transposed). Off for the published rows as Megatron
  // runs them: with --fp8-param-gather their primary weights are FP8 already.
  bool fp8_weight_copies = true;
  // Bytes of each main gradient, accumulated over the micro-batches: FP32 as moebench keeps them;
  // BF16 where the trainer does (Megatron's grad_reduce_in_fp32 off: a recipe's main_grads_dtype).
  double main_grad_bytes = 4;
};
// The run's own policy: its --recompute, --fp8-saved-inputs and --fp8-weight-copies (auto counted
// as kept), the rest moebench's step.
ActivationPolicy run_policy(const RunConfig& c);
// As Megatron-Core with Transformer Engine runs a published row: the run's recompute and
// optimizer state, FP8 copies of every GEMM input, k and v kept apart, FP8 primary weights (no
// second set of quantised copies). `plan` and `predict` price the rows with it.
ActivationPolicy transformer_engine_policy(const RunConfig& c);
// --fp8-weight-copies auto for a rank with `available_bytes` for its estimate: kept when the run
// fits with the copies, per-gemm when it fits only without them, kept when it fits neither way
// (the memory check then says so); as given when not auto.
Fp8WeightCopies resolve_fp8_weight_copies(const RunConfig& c, std::size_t bytes_per_element,
                                          double available_bytes);

// Bytes per element of a GEMM input kept in FP8 for the backward: one byte and its scales, one
// E8M0 byte per 32 elements with mxfp8 (FP32 descales where narrow_storage is false, as the host
// backend keeps them) or one FP32 scale per 128 blockwise; per tensor none.
double fp8_saved_input_bytes(Fp8Recipe r, bool narrow_storage);

// --precision fp8: the quantised E4M3 copies (one byte an element) of the two operands of the
// largest linear GEMM (forward, data or weight gradient: a weight and the rows it meets), which
// the cuda backend keeps in scratch. Routed experts are bounded by all top-k rows of the rank
// meeting one expert's weight.
double fp8_operand_bytes(const RunConfig& c);

struct StageMemory {
  int pp_rank = 0;
  std::vector<int> stages;  // its virtual stages, chunk by chunk
  int layers = 0;
  bool embedding = false;
  int mtp = 0;
  bool loss = false;
  double params = 0;  // held by one rank of the stage (its local experts)
  int in_flight = 0;  // micro-batch chunks whose activations it holds at the peak
  MemoryEstimate memory;
};
std::vector<StageMemory> estimate_stage_memory(const RunConfig& c, std::size_t bytes_per_element,
                                               const ActivationPolicy& policy);
// With the run's own policy.
std::vector<StageMemory> estimate_stage_memory(const RunConfig& c, std::size_t bytes_per_element);
// The largest of the pipeline ranks' estimates (by total), for moebench's own step.
MemoryEstimate estimate_memory(const RunConfig& c, std::size_t bytes_per_element);
// The single-process reference's memory (the whole global batch, all experts), on rank 0.
MemoryEstimate estimate_reference_memory(const RunConfig& c, std::size_t bytes_per_element);

// What a GPU keeps besides the step's tensors and the backend's workspaces, counted by `plan`
// (and slurm/scaling.sh's pre-flight through it) against a GPU's memory: the CUDA context, the
// cuBLAS, cuBLASLt and cuDNN handles and NCCL's buffers. An allowance of a few GB, as GPU memory
// plans count them, until a GPU run measures it; the run itself checks against
// the memory free after its context and communicator exist, and reports what was taken
// (memory.device_baseline_bytes).
inline constexpr double kGpuContextReserveBytes = 5.0 * 1024 * 1024 * 1024;

// What moebench's own step keeps that Megatron-Core with Transformer Engine does not (BF16
// copies of GEMM inputs where TE keeps FP8 ones; every weight's quantised copies for the step),
// and what a recipe offloads to host memory (`offload`, which moebench does not), one line each
// with what it costs the largest pipeline rank (BF16 storage).
std::vector<std::string> memory_gaps(const RunConfig& c, const std::vector<std::string>& offload);

nlohmann::json to_json(const MemoryEstimate& m);
nlohmann::json to_json(const StageMemory& s);

}  // namespace moebench
