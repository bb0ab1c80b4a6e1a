#include "workloads/config/run_config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"
#include "harness/core/human.hpp"

namespace moebench {
namespace {

constexpr const char* kRoutingForms =
    "valid: router, balanced, random, zipf:S with S > 0 (e.g. zipf:1.2)";

std::string str(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

}  // namespace

namespace {
// Megatron's recompute_modules names moebench implements, and where each flag lives.
struct RecomputeModule {
  const char* name;
  bool Recompute::*flag;
};
constexpr RecomputeModule kRecomputeModules[] = {
    {"core_attn", &Recompute::core_attn},     {"layernorm", &Recompute::layernorm},
    {"mla_up_proj", &Recompute::mla_up_proj}, {"mlp", &Recompute::mlp},
    {"moe_act", &Recompute::moe_act},         {"shared_experts", &Recompute::shared_experts}};
constexpr const char* kRecomputeForms =
    "valid: a comma-separated list of core_attn, layernorm, mla_up_proj, mlp, moe_act, "
    "shared_experts, or none";
}  // namespace

Recompute parse_recompute(const std::string& text) {
  Recompute r;
  if (text.empty() || text == "none") return r;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, end - start);
    start = end + 1;
    if (name == "moe") {
      throw UsageError(
          "--recompute moe: moebench does not recompute a whole MoE layer (it would repeat the "
          "dispatch and combine all-to-alls); recompute its parts instead with moe_act and "
          "shared_experts; " +
          std::string(kRecomputeForms));
    }
    bool known = false;
    for (const RecomputeModule& m : kRecomputeModules) {
      if (name == m.name) {
        r.*m.flag = true;
        known = true;
      }
    }
    if (!known) {
      throw UsageError("--recompute " + text + ": '" + name + "' is not a module moebench can " +
                       "recompute; " + kRecomputeForms);
    }
  }
  return r;
}

std::vector<std::string> recompute_names(const Recompute& r) {
  std::vector<std::string> names;
  for (const RecomputeModule& m : kRecomputeModules) {
    if (r.*m.flag) names.emplace_back(m.name);
  }
  return names;
}

RoutingSpec parse_routing(const std::string& text) {
  if (text == "router") return {RoutingMode::router, 0.0};
  if (text == "balanced") return {RoutingMode::balanced, 0.0};
  if (text == "random") return {RoutingMode::random, 0.0};
  const std::string_view prefix = "zipf:";
  if (text.rfind(prefix, 0) == 0) {
    const std::string_view s = std::string_view(text).substr(prefix.size());
    double v = 0;
    const auto res = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size()) {
      throw UsageError("--routing " + text + ": the zipf exponent is not a number; " +
                       kRoutingForms);
    }
    if (!(v > 0) || !std::isfinite(v)) {
      throw UsageError("--routing " + text + ": the zipf exponent must be a finite number > 0; " +
                       kRoutingForms);
    }
    return {RoutingMode::zipf, v};
  }
  throw UsageError("--routing '" + text + "' is not a routing mode; " + kRoutingForms);
}

std::string to_string(const RoutingSpec& r) {
  switch (r.mode) {
    case RoutingMode::router:
      return "router";
    case RoutingMode::balanced:
      return "balanced";
    case RoutingMode::random:
      return "random";
    case RoutingMode::zipf:
      return "zipf:" + str(r.zipf_exponent);
  }
  return "unknown";
}

std::string to_string(GradReduce g) {
  return g == GradReduce::allreduce ? "allreduce" : "reduce-scatter";
}

std::string to_string(Fp8WeightCopies w) {
  switch (w) {
    case Fp8WeightCopies::kept:
      return "kept";
    case Fp8WeightCopies::per_gemm:
      return "per-gemm";
    case Fp8WeightCopies::automatic:
      break;
  }
  return "auto";
}

Fp8WeightCopies parse_fp8_weight_copies(const std::string& text) {
  if (text == "auto") return Fp8WeightCopies::automatic;
  if (text == "kept") return Fp8WeightCopies::kept;
  if (text == "per-gemm") return Fp8WeightCopies::per_gemm;
  throw UsageError("--fp8-weight-copies '" + text + "': valid: auto (default), kept, per-gemm");
}

std::string to_string(OptimizerStateDtype d) {
  return d == OptimizerStateDtype::bf16 ? "bf16" : "fp32";
}

OptimizerStateDtype parse_optimizer_state_dtype(const std::string& text) {
  if (text == "fp32") return OptimizerStateDtype::fp32;
  if (text == "bf16") return OptimizerStateDtype::bf16;
  throw UsageError("--optimizer-state-dtype '" + text + "': valid: fp32 (default), bf16");
}

std::string to_string(Optimizer o) {
  return o == Optimizer::adamw ? "adamw" : "none";
}

int final_norm_layer(const Workload& w) {
  return static_cast<int>(w.layers);
}
int mtp_layer(const Workload& w, int k) {
  return static_cast<int>(w.layers) + 1 + k;
}
int output_head_layer(const Workload& w) {
  return static_cast<int>(w.layers + 1 + w.mtp);
}
int layer_count(const Workload& w) {
  return w.head ? output_head_layer(w) + 1 : static_cast<int>(w.layers);
}

bool is_dense_layer(const RunConfig& c, int layer) {
  if (layer < c.workload.layers) return layer < c.workload.dense_layers;
  return c.model.moe_layers() == 0;  // an MTP layer: of the model's last layer's kind
}

std::int64_t default_dense_layers(const ModelConfig& m, std::int64_t layers) {
  if (layers >= m.num_hidden_layers) return m.first_k_dense_replace;
  if (layers <= 0 || m.num_hidden_layers <= 0) return 0;
  return std::llround(static_cast<double>(layers) * static_cast<double>(m.first_k_dense_replace) /
                      static_cast<double>(m.num_hidden_layers));
}

std::int64_t global_batch(const Workload& w, const ParallelLayout& p) {
  return w.global_batch > 0 ? w.global_batch : w.micro_batch * p.dp();
}
std::int64_t global_batch(const RunConfig& c) {
  return global_batch(c.workload, c.layout);
}
std::int64_t tokens_per_step(const RunConfig& c) {
  return global_batch(c) * c.workload.seq_len;
}

int microbatches(const RunConfig& c) {
  const std::int64_t per = c.workload.micro_batch * c.layout.dp();
  return static_cast<int>(global_batch(c) / per);
}

PipelineShape pipeline_shape(const RunConfig& c) {
  return PipelineShape{c.layout.pp, c.layout.vp, microbatches(c)};
}

PipelineLayout pipeline_layout(const RunConfig& c) {
  if (!c.layout.pipeline_layout.empty()) {
    return parse_pipeline_layout(c.layout.pipeline_layout, c.layout.pp);
  }
  return even_pipeline_layout(static_cast<int>(c.workload.layers), c.layout.pp, c.layout.vp,
                              c.workload.head, static_cast<int>(c.workload.mtp));
}

RunConfig single_process_reference(const RunConfig& distributed) {
  RunConfig ref = distributed;
  if (ref.loss_micro_batch == 0) ref.loss_micro_batch = distributed.workload.micro_batch;
  ref.workload.micro_batch = global_batch(distributed);
  ref.workload.global_batch = ref.workload.micro_batch;
  ref.layout = ParallelLayout{};
  ref.grad_reduce = GradReduce::allreduce;
  ref.optimizer = Optimizer::none;
  ref.inject.reset();
  return ref;
}

void validate(const RunConfig& c) {
  validate(c.model, c.model.name);
  const Workload& w = c.workload;
  const ParallelLayout& p = c.layout;
  const auto s = [](std::int64_t v) { return std::to_string(v); };

  // The bounds, before any product of them is formed.
  const auto bounded = [&](const char* flag, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < lo || v > hi) {
      throw UsageError(std::string(flag) + " must be in " + s(lo) + ".." + s(hi) + ", got " + s(v));
    }
  };
  bounded("--seq-len", w.seq_len, 1, kMaxSeqLen);
  bounded("--micro-batch", w.micro_batch, 1, kMaxMicroBatch);
  bounded("--global-batch", w.global_batch, 0, kMaxGlobalBatch);
  bounded("the world size (mpirun -np, or plan's --world)", p.world, 1, kMaxWorld);
  bounded("--warmup", c.warmup, 0, kMaxSteps);
  bounded("--steps", c.steps, 1, kMaxSteps);
  bounded("--blas-threads", c.blas_threads, 1, kMaxBlasThreads);
  if (w.layers < 1 || w.layers > c.model.num_hidden_layers) {
    throw UsageError("--layers " + s(w.layers) + " is out of range for " + c.model.name +
                     "; valid: 1.." + s(c.model.num_hidden_layers));
  }
  if (w.dense_layers < 0 || w.dense_layers > w.layers) {
    throw UsageError("--dense-layers " + s(w.dense_layers) + " is out of range for --layers " +
                     s(w.layers) + "; valid: 0.." + s(w.layers));
  }
  if (w.routing.mode == RoutingMode::zipf &&
      (!(w.routing.zipf_exponent > 0) || !std::isfinite(w.routing.zipf_exponent))) {
    throw UsageError("--routing zipf:" + str(w.routing.zipf_exponent) +
                     ": the zipf exponent must be a finite number > 0; " + kRoutingForms);
  }
  if (c.grad_bucket_bytes < 0) {
    throw UsageError("--grad-bucket-mb must be >= 0, got " + s(c.grad_bucket_bytes) + " bytes");
  }

  const ParallelGrid grid = p.grid();  // UsageError when a size does not fit the world
  const std::int64_t experts = c.model.n_routed_experts;
  if (experts % p.ep != 0) {
    throw UsageError(
        "--ep " + s(p.ep) + " does not divide the " + s(experts) + " routed experts of " +
        c.model.name + "; valid with " + s(p.world) +
        " ranks: " + common_divisors(p.world / grid.pp(), {p.world / grid.pp(), experts}));
  }
  const std::int64_t per_step = w.micro_batch * grid.dp();
  if (w.global_batch < 0 || w.global_batch % per_step != 0) {
    throw UsageError("--global-batch " + s(w.global_batch) +
                     " is not a multiple of --micro-batch " + s(w.micro_batch) + " x dp " +
                     s(grid.dp()) + " = " + s(per_step) + " sequences; valid: " + s(per_step) +
                     ", " + s(2 * per_step) + ", " + s(4 * per_step) + ", ... (any multiple)");
  }
  if (w.mtp < 0 || w.mtp > c.model.num_nextn_predict_layers) {
    throw UsageError("--mtp " + s(w.mtp) + " is out of range for " + c.model.name + ", which has " +
                     s(c.model.num_nextn_predict_layers) +
                     " (num_nextn_predict_layers); valid: 0.." +
                     s(c.model.num_nextn_predict_layers));
  }
  if (w.mtp > 0 && !w.head) {
    throw UsageError("--mtp " + s(w.mtp) +
                     " needs --head on: an MTP layer shares the embedding and the output head; "
                     "give --mtp 0 with --head off");
  }
  if (!p.pipeline_layout.empty()) {
    const PipelineLayout layout = parse_pipeline_layout(p.pipeline_layout, p.pp);
    const std::string given = "--pipeline-layout \"" + p.pipeline_layout + "\"";
    if (layout.vp != p.vp) {
      throw UsageError(given + " has " + s(static_cast<std::int64_t>(layout.stages.size())) +
                       " stages: vp " + s(layout.vp) + " with --pp " + s(p.pp) + ", but --vp is " +
                       s(p.vp) + "; give --vp " + s(layout.vp) + " or a layout of " +
                       s(p.pp * p.vp) + " stages");
    }
    if (layout.decoder_layers() != w.layers) {
      throw UsageError(given + " places " + s(layout.decoder_layers()) +
                       " decoder layers (t) but the run instantiates " + s(w.layers) +
                       " (--layers); the layout must hold every layer once");
    }
    if (layout.has_embedding() != w.head || layout.has_loss() != w.head) {
      throw UsageError(given +
                       (w.head ? " lacks E or L, which --head on runs"
                               : " has E or L, which --head off does not run") +
                       "; give a layout with E first and L last and --head on, or neither and "
                       "--head off");
    }
    if (layout.mtp_layers() != layout.stages.back().mtp) {
      throw UsageError(given +
                       " places m (an MTP layer) before the last stage; moebench runs the MTP "
                       "layers in the last stage, beside the output head and loss (L) they share "
                       "(Megatron-Core also allows a stage of their own), e.g. \"...|tmL\"");
    }
    if (layout.mtp_layers() != w.mtp) {
      throw UsageError(given + " places " + s(layout.mtp_layers()) +
                       " MTP layers (m) but the run has " + s(w.mtp) + " (--mtp; " + c.model.name +
                       " has " + s(c.model.num_nextn_predict_layers) +
                       "); give as many m as --mtp");
    }
  } else {
    even_pipeline_layout(static_cast<int>(w.layers), p.pp, p.vp);  // UsageError when uneven
  }
  validate(PipelineShape{p.pp, p.vp, microbatches(c)});
  if (c.inject) {
    const bool link = c.inject->kind == FaultSpec::Kind::slowlink;
    const int worst = link ? std::max(c.inject->rank, c.inject->peer) : c.inject->rank;
    if (worst >= p.world) {
      throw UsageError("--inject " + to_string(*c.inject) + ": no rank " + s(worst) +
                       " in a world of " + s(p.world) + "; valid: " + (link ? "a and b " : "") +
                       "rank=0 to rank=" + s(p.world - 1));
    }
    if (c.inject->kind == FaultSpec::Kind::corrupt && !c.verify) {
      throw UsageError("--inject " + to_string(*c.inject) +
                       ": only --verify's comparison catches a corrupted value, and without it the "
                       "run would end as a success; add --verify");
    }
  }
  if (p.ranks_per_node < 0) {
    throw UsageError("--ranks-per-node must be >= 0 (0: detect), got " + s(p.ranks_per_node));
  }
  if (p.nvlink_domain_size < 0 ||
      (p.nvlink_domain_size > 0 && p.world % p.nvlink_domain_size != 0)) {
    throw UsageError("--nvlink-domain-size " + s(p.nvlink_domain_size) +
                     " must divide the world of " + s(p.world) + " ranks; valid: 0 (detect), " +
                     common_divisors(p.world, {p.world}));
  }
  if (p.ranks_per_node > 0 && p.world % p.ranks_per_node != 0) {
    throw UsageError("--ranks-per-node " + s(p.ranks_per_node) + " does not divide the " +
                     s(p.world) + " ranks; valid: 0 (detect), " +
                     common_divisors(p.world, {p.world}));
  }

  if (c.optimizer == Optimizer::adamw) {
    const AdamWParams& a = c.adamw;
    if (!(a.lr > 0) || !std::isfinite(a.lr)) {
      throw UsageError("--lr must be a finite number > 0, got " + str(a.lr));
    }
    if (!(a.beta1 >= 0 && a.beta1 < 1)) {
      throw UsageError("--adam-beta1 must be in [0, 1), got " + str(a.beta1));
    }
    if (!(a.beta2 >= 0 && a.beta2 < 1)) {
      throw UsageError("--adam-beta2 must be in [0, 1), got " + str(a.beta2));
    }
    if (!(a.eps > 0) || !std::isfinite(a.eps)) {
      throw UsageError("--adam-eps must be a finite number > 0, got " + str(a.eps));
    }
    if (!(a.weight_decay >= 0) || !std::isfinite(a.weight_decay)) {
      throw UsageError("--weight-decay must be a finite number >= 0, got " + str(a.weight_decay));
    }
  }
}

nlohmann::json to_json(const Workload& w, const ParallelLayout& p) {
  nlohmann::json j;
  j["seq_len"] = w.seq_len;
  j["micro_batch"] = w.micro_batch;
  const std::int64_t g = global_batch(w, p);
  j["global_batch"] = g;
  j["microbatches_per_step"] = g / (w.micro_batch * p.dp());
  j["tokens_per_step"] = g * w.seq_len;
  j["layers"] = w.layers;
  j["dense_layers"] = w.dense_layers;
  j["moe_layers"] = w.moe_layers();
  j["attention"] = w.attention;
  j["head"] = w.head;
  j["mtp_layers"] = w.mtp;
  j["routing"] = to_string(w.routing);
  j["recompute"] = recompute_names(w.recompute);
  j["tokens_per_micro_batch"] = w.tokens_per_rank();
  j["tokens_per_rank"] = static_cast<double>(g * w.seq_len) / p.world;
  return j;
}

nlohmann::json to_json(const ParallelLayout& p) {
  nlohmann::json j;
  j["world"] = p.world;
  j["ep"] = p.ep;
  j["dp"] = p.dp();
  j["edp"] = p.edp();
  j["pp"] = p.pp;
  j["vp"] = p.vp;
  j["pipeline_layout"] = p.pipeline_layout.empty() ? nullptr : nlohmann::json(p.pipeline_layout);
  j["ranks_per_node"] = p.ranks_per_node;
  j["nvlink_domain_size"] = p.nvlink_domain_size;
  j["grid"] = to_json(p.grid());
  return j;
}

}  // namespace moebench
