// What one run does: the model, the slice of it this run instantiates, the workload, the layout
// and the measurement settings. Filled by the CLI, validated before any allocation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "harness/backends/fault/fault_communicator.hpp"
#include "harness/comm/comm_backend.hpp"
#include "harness/compute/backend_kind.hpp"
#include "harness/compute/fp8_recipe.hpp"
#include "harness/parallel/grid.hpp"
#include "harness/parallel/pipeline_layout.hpp"
#include "harness/parallel/pipeline_schedule.hpp"
#include "workloads/config/model_config.hpp"

namespace moebench {

enum class RoutingMode { router, balanced, zipf, random };
enum class GradReduce { allreduce, reduce_scatter };
enum class Optimizer { adamw, none };
// --optimizer-state-dtype: AdamW's moments in FP32, or in BF16 as Megatron's precision-aware
// optimizer keeps them (exp_avg_dtype, exp_avg_sq_dtype: bf16) where the backend stores BF16
// (cuda; the cpu backend stores FP32 only and keeps them so). Master weights stay FP32.
enum class OptimizerStateDtype { fp32, bf16 };
// --fp8-weight-copies: with --precision fp8, each weight's quantised copies kept for the step
// (`kept`), or made at every GEMM and kept nowhere (`per_gemm`: no memory, more quantisation);
// `automatic` resolves to kept where the memory allows it (the run's check, plan against the GPU).
enum class Fp8WeightCopies { automatic, kept, per_gemm };

// --recompute: the modules whose activations the backward pass recomputes instead of keeping
// them from the forward, by Megatron-Core's recompute_modules names. The recomputed values are
// bit-identical to the forward's (same inputs, same arithmetic), so the gradients do not change.
struct Recompute {
  bool core_attn = false;       // attention's output and softmax statistics, from q, k and v
  bool layernorm = false;       // the input and pre-MLP norms' outputs, from the norms' inputs
  bool mla_up_proj = false;     // q, k and v (the up-projections and rope), from the latents
  bool mlp = false;             // the dense MLP's gate/up and activation, from its normed input
  bool moe_act = false;         // the routed experts' SwiGLU output, from their gate/up
  bool shared_experts = false;  // the shared experts' gate/up and activation
  bool any() const {
    return core_attn || layernorm || mla_up_proj || mlp || moe_act || shared_experts;
  }
  bool operator==(const Recompute&) const = default;
};
// Parses a comma-separated list of module names ("" or "none": nothing); UsageError naming the
// modules moebench implements otherwise (Megatron's "moe", the whole MoE layer with its
// all-to-alls, is refused so).
Recompute parse_recompute(const std::string& text);
// The names set, in Megatron's spelling and a fixed order.
std::vector<std::string> recompute_names(const Recompute& r);

struct RoutingSpec {
  RoutingMode mode = RoutingMode::balanced;
  double zipf_exponent = 0.0;  // only for zipf
};

// Parses "router", "balanced", "random" or "zipf:S" (S > 0). UsageError otherwise.
RoutingSpec parse_routing(const std::string& text);
std::string to_string(const RoutingSpec& r);
std::string to_string(GradReduce g);
std::string to_string(Optimizer o);
std::string to_string(OptimizerStateDtype d);
// "fp32" or "bf16"; UsageError naming them otherwise.
OptimizerStateDtype parse_optimizer_state_dtype(const std::string& text);
std::string to_string(Fp8WeightCopies w);  // "auto", "kept", "per-gemm"
// "auto", "kept" or "per-gemm"; UsageError naming them otherwise.
Fp8WeightCopies parse_fp8_weight_copies(const std::string& text);

struct AdamWParams {
  double lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// The instantiated stack and the tokens each rank processes.
struct Workload {
  std::int64_t seq_len = 4096;
  std::int64_t micro_batch = 1;  // sequences per micro-batch per rank (Megatron's micro_batch_size)
  std::int64_t global_batch = 0;  // sequences per step, job-wide (0: micro_batch x dp)
  std::int64_t layers = 0;        // instantiated transformer layers
  std::int64_t dense_layers = 0;  // of which the first ones are dense
  bool attention = true;
  // --head (the CLI's default on): the model's ends run too: the first stage embeds seeded token
  // ids, the last runs the final norm, the output head and the cross-entropy loss (off: a seeded
  // input and a seeded output gradient stand in for them).
  bool head = false;
  // --mtp: MTP layers after the last decoder layer (DeepSeek-V3's multi-token prediction), each
  // with its own norms, input projection and transformer layer, sharing the embedding and the
  // output head; needs head.
  std::int64_t mtp = 0;
  RoutingSpec routing;
  Recompute recompute;  // --recompute (a recipe's own by default)

  // Rows of one micro-batch on one rank.
  std::int64_t tokens_per_rank() const { return seq_len * micro_batch; }
  std::int64_t moe_layers() const { return layers - dense_layers; }
  // Transformer layers the run instantiates: the decoder's and the MTP layers'. Layer index
  // layers + k is MTP layer k.
  std::int64_t transformer_layers() const { return layers + mtp; }
};

// The layout as the flags give it; grid() is the parallel grid it makes (harness/parallel).
struct ParallelLayout {
  int world = 1;
  int ep = 1;                   // expert-parallel group size (consecutive ranks)
  int pp = 1;                   // pipeline ranks
  int vp = 1;                   // model chunks per pipeline rank (interleaved 1F1B when > 1)
  std::string pipeline_layout;  // --pipeline-layout as given; empty: layers split evenly
  int ranks_per_node = 0;       // 0: from the MPI shared-memory split
  int nvlink_domain_size = 0;   // emulated NVLink domains of K consecutive ranks; 0: detect

  // UsageError when the sizes do not fit the world (validate() says so first).
  ParallelGrid grid() const { return ParallelGrid(world, GridShape{1, 1, ep, pp}); }
  int dp() const { return grid().dp(); }    // ranks holding the same dense parameters
  int edp() const { return grid().edp(); }  // ranks holding the same experts
};

struct RunConfig {
  ModelConfig model;
  Workload workload;
  ParallelLayout layout;
  GradReduce grad_reduce = GradReduce::allreduce;
  Optimizer optimizer = Optimizer::adamw;
  OptimizerStateDtype optimizer_state_dtype = OptimizerStateDtype::fp32;
  AdamWParams adamw;
  std::uint64_t seed = 1234;
  int warmup = 3;
  int steps = 10;
  bool verify = false;
  ComputeBackend backend = ComputeBackend::cpu;
  CommBackend comm = CommBackend::mpi;
  // The step's arithmetic (harness/compute/backend_kind.hpp), resolved against the backend once,
  // by resolve_precision().
  Precision precision = Precision::fp32;
  // How fp8 scales (--fp8-recipe; only with precision fp8).
  Fp8Recipe fp8_recipe = Fp8Recipe::tensor;
  // Whether fp8 keeps the weights' quantised copies for the step (--fp8-weight-copies).
  Fp8WeightCopies fp8_weight_copies = Fp8WeightCopies::automatic;
  // Whether fp8 keeps the routed experts' GEMM inputs for the backward as their FP8 copies
  // (--fp8-saved-inputs, on by default): see saves_fp8_inputs().
  bool fp8_saved_inputs = true;
  // How the experts' GEMMs run (--grouped-gemm).
  GroupedGemmImpl grouped_gemm = GroupedGemmImpl::loop;
  // How core attention runs (--attention-impl).
  AttentionImpl attention_impl = AttentionImpl::automatic;
  // fp8 on a backend without FP8 arithmetic (cpu): E4M3-rounded values in FP32 GEMMs, the
  // numerics of FP8 without its speed.
  bool fp8_emulated() const {
    return precision == Precision::fp8 && backend == ComputeBackend::cpu;
  }
  // --fp8-saved-inputs under --precision fp8: the routed experts' inputs (the dispatched rows and
  // the weighted activation) kept for their weight gradients in FP8, not in storage precision.
  bool saves_fp8_inputs() const { return precision == Precision::fp8 && fp8_saved_inputs; }
  double comm_timeout_s = 600;  // --timeout: the longest wait for a collective or setup
  int blas_threads = 1;
  // Collectives start after a barrier of their group, timed as comm_wait
  // (harness/measure/phases.hpp).
  bool comm_barrier = true;
  // --overlap: the shared expert computes while the dispatch (forward) and the combine's reverse
  // (backward) are in flight, the router's backward while the dispatch's reverse is, and
  // gradients are reduced in buckets of whole layers during the backward.
  bool overlap = true;
  // --grad-bucket-mb: layers are merged into one gradient bucket until it holds at least this
  // many bytes (0: one bucket per layer). Megatron-LM's default bucket is 40M elements, 80 MB of
  // BF16 gradients: 80 MiB here.
  std::int64_t grad_bucket_bytes = std::int64_t{80} << 20;
  // --inject: a fault the communicator injects (harness/backends/fault), a testing aid.
  std::optional<FaultSpec> inject;
  // Sequences whose tokens each micro-batch's loss is the mean over (0: workload.micro_batch): the
  // --verify reference keeps the distributed run's, so that its gradients are the same sum.
  std::int64_t loss_micro_batch = 0;
  // --recipe: the published row this run's workload comes from, and the flags that overrode it.
  std::optional<std::string> recipe;
  std::vector<std::string> recipe_overrides;
  // What the configuration's files warrant a warning for (a config key that looks misspelt),
  // printed once (rank 0) before the run.
  std::vector<std::string> warnings;
};

// Sequences per step, job-wide: --global-batch, or micro_batch x dp (one micro-batch a step).
std::int64_t global_batch(const Workload& w, const ParallelLayout& p);
std::int64_t global_batch(const RunConfig& c);
std::int64_t tokens_per_step(const RunConfig& c);  // job-wide
// Micro-batches per step on every rank: global_batch / (micro_batch x dp).
int microbatches(const RunConfig& c);
PipelineShape pipeline_shape(const RunConfig& c);
// Which decoder layers each stage holds: --pipeline-layout, or an even split.
PipelineLayout pipeline_layout(const RunConfig& c);

// Layer indices of the parameters that are not a decoder layer's (with --head on): the
// embedding comes before layer 0; after the last decoder layer come the final norm, the MTP
// layers (each a transformer layer with its norms and projection) and the output head, the
// order in which the backward finishes them in reverse.
constexpr int kEmbeddingLayer = -1;
int final_norm_layer(const Workload& w);
int mtp_layer(const Workload& w, int k);
int output_head_layer(const Workload& w);
// One past the highest layer index of the run (decoder, ends and MTP layers).
int layer_count(const Workload& w);
// Whether layer `layer` has a dense MLP: the first --dense-layers decoder layers; an MTP layer is
// of the model's last layer's kind.
bool is_dense_layer(const RunConfig& c, int layer);

// The default instantiated stack for a model: all layers, with dense layers in the model's
// proportion (rounded), so a 4-layer slice of DeepSeek-V3 is 4 MoE layers.
std::int64_t default_dense_layers(const ModelConfig& m, std::int64_t layers);

// The --verify reference of a distributed run: one process holding the whole global batch in one
// micro-batch (every micro-batch of every data-parallel rank), every layer and every expert,
// without the optimizer step.
RunConfig single_process_reference(const RunConfig& distributed);

// The largest values the flags may take: far beyond any real run, and small enough that every
// count made from them (tokens per step, elements per rank) stays well inside int64.
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 20;       // 1,048,576 tokens
inline constexpr std::int64_t kMaxMicroBatch = std::int64_t{1} << 16;   // sequences
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 24;  // sequences
inline constexpr std::int64_t kMaxWorld = std::int64_t{1} << 20;        // ranks
inline constexpr std::int64_t kMaxSteps = 10000000;                     // --steps, --warmup
inline constexpr std::int64_t kMaxBlasThreads = 1024;
inline constexpr double kMaxTimeoutS = 1e6;  // 11.6 days

// Checks the workload and the layout against the model, every bound above first (before any
// arithmetic): UsageError with what would be valid.
void validate(const RunConfig& c);

// tokens_per_rank there is per GPU per step: the global batch's tokens over the world.
nlohmann::json to_json(const Workload& w, const ParallelLayout& p);
nlohmann::json to_json(const ParallelLayout& p);

}  // namespace moebench
