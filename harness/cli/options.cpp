#include "harness/cli/options.hpp"

#include <algorithm>
#include <sstream>

#include <CLI/CLI.hpp>

#include "harness/backends/registry/registry.hpp"
#include "harness/cli/accept_merge.hpp"
#include "harness/cli/option_checks.hpp"
#include "harness/compute/backend_kind.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {

using namespace option_checks;

namespace {

// The flags that name a backend or a precision, as typed; parse_command_line turns them into
// enums once (harness/compute/backend_kind.hpp, harness/comm/comm_backend.hpp).
struct NamedFlags {
  std::string backend = "cpu";
  std::string comm = "mpi";
  std::string precision;   // empty: the backend's own
  std::string fp8_recipe;  // empty: tensor
};

std::optional<Precision> optional_precision(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return parse_precision(text);
}

std::optional<Fp8Recipe> optional_fp8_recipe(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return parse_fp8_recipe(text);
}

}  // namespace

const std::vector<std::string>& recipe_flags() {
  static const std::vector<std::string> flags = {"--preset",
                                                 "--model-config",
                                                 "--seq-len",
                                                 "--micro-batch",
                                                 "--global-batch",
                                                 "--layers",
                                                 "--dense-layers",
                                                 "--pp",
                                                 "--vp",
                                                 "--pipeline-layout",
                                                 "--ep",
                                                 "--precision",
                                                 "--routing",
                                                 "--attention",
                                                 "--grad-reduce",
                                                 "--head",
                                                 "--mtp",
                                                 "--recompute",
                                                 "--optimizer-state-dtype"};
  return flags;
}

namespace {

// "90", "90s", "30m", "2h": seconds; UsageError otherwise.
double parse_duration_s(const std::string& text) {
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (used == 0 || scale < 0 || !(v > 0) || v * scale > 30 * 86400) {
    throw UsageError("--duration " + text +
                     ": give a time up to 30 days in seconds, or with s, m or h (90, 30m, 2h)");
  }
  return v * scale;
}

void add_workload_flags(CLI::App* app, WorkloadFlags& w, NamedFlags& n) {
  app->add_option("--recipe", w.recipe,
                  "a published row's workload by name (`moebench recipes`): model, layout, batch, "
                  "precision, routing; the flags below override it");
  app->add_flag("--keep-batch", w.keep_batch,
                "with --recipe on another model than the recipe's: keep its sequence length and "
                "micro-batches a rank (default: the model's sequence length and 2 x pp "
                "micro-batches a rank, so that a step takes seconds, not an hour)");
  app->add_option("--preset", w.preset, "built-in model: deepseek-v3, deepseek-v3-tiny");
  app->add_option("--model-config", w.model_config,
                  "Hugging Face config.json of the DeepSeek-V3 family (instead of --preset)");
  app->add_option("--seq-len", w.seq_len, "tokens per sequence (default 4096, tiny preset 128)");
  app->add_option("--micro-batch", w.micro_batch,
                  "sequences per micro-batch per rank (Megatron's micro_batch_size, default 1)");
  app->add_option("--global-batch", w.global_batch,
                  "sequences per step, job-wide: micro-batch x dp x the micro-batches each rank "
                  "accumulates (default micro-batch x dp: one micro-batch a step)");
  app->add_option("--layers", w.layers, "transformer layers to instantiate (default: all)");
  app->add_option("--dense-layers", w.dense_layers,
                  "of which dense (default: the model's proportion)");
  app->add_option("--attention", w.attention, "on|off (default on)");
  app->add_option("--head", w.head,
                  "on|off: the model's ends, the embedding of seeded token ids on the first stage "
                  "and the final norm, output head and cross-entropy loss on the last (default "
                  "on, or off where --pipeline-layout has no E and L)");
  app->add_option("--mtp", w.mtp,
                  "MTP layers (DeepSeek-V3's multi-token prediction, sharing the embedding and "
                  "the head; default the model's num_nextn_predict_layers with --head on, or "
                  "--pipeline-layout's m count; 0 with --head off)");
  app->add_option("--routing", w.routing,
                  "router|balanced|random|zipf:S (default balanced: exact per-expert counts inside "
                  "the group limit; random: Megatron's forced load balancing)");
  app->add_option("--recompute", w.recompute,
                  "modules whose activations the backward recomputes instead of keeping "
                  "(Megatron's recompute_modules): a comma-separated list of core_attn, "
                  "layernorm, mla_up_proj, mlp, moe_act, shared_experts, or none (default none, "
                  "or the recipe's)");
  app->add_option("--ep", w.ep, "expert-parallel size: experts split over N consecutive ranks");
  app->add_option("--pp", w.pp,
                  "pipeline-parallel size: stages over N groups of ranks (default 1)");
  app->add_option("--vp", w.vp,
                  "model chunks per pipeline rank: interleaved 1F1B when > 1 (default 1, or the "
                  "--pipeline-layout's)");
  app->add_option("--pipeline-layout", w.pipeline_layout,
                  "layers per stage in Megatron-Core's pipeline_model_parallel_layout syntax, e.g. "
                  "\"Et*4|(t*4|)*14tmL\" (default: an even split)");
  app->add_option("--ranks-per-node", w.ranks_per_node,
                  "emulate nodes of K ranks (default 0: the real nodes)");
  app->add_option("--nvlink-domain-size", w.nvlink_domain_size,
                  "emulate NVLink domains of K consecutive ranks (default 0: NVML's fabric "
                  "cliques on multi-node NVLink systems, else the nodes)");
  app->add_option("--grad-reduce", w.grad_reduce, "allreduce|reduce-scatter (ZeRO-1)");
  app->add_option("--optimizer", w.optimizer,
                  "adamw|none (default adamw); muon is taken and refused, as the model does not "
                  "price it");
  app->add_option("--optimizer-state-dtype", w.optimizer_state_dtype,
                  "AdamW's moments: fp32 (default) or bf16 (Megatron's precision-aware optimizer; "
                  "on the cuda backend, which stores BF16; the cpu backend keeps FP32), master "
                  "weights FP32 either way (default the recipe's)");
  app->add_option("--lr", w.adamw.lr, "AdamW learning rate");
  app->add_option("--adam-beta1", w.adamw.beta1, "AdamW beta1");
  app->add_option("--adam-beta2", w.adamw.beta2, "AdamW beta2");
  app->add_option("--adam-eps", w.adamw.eps, "AdamW epsilon");
  app->add_option("--weight-decay", w.adamw.weight_decay, "AdamW decoupled weight decay");
  app->add_option("--seed", w.seed, "seed of every weight and input (default 1234)");
  app->add_option("--backend", n.backend, "compute backend: cpu (default) or cuda");
  app->add_option("--comm", n.comm,
                  "communication backend: mpi (default; staged through host memory on a GPU "
                  "backend, so ranks may share a GPU) or nccl (--backend cuda, one GPU per rank)");
  app->add_option("--precision", n.precision,
                  "arithmetic: fp32 (cpu backend), bf16 (cuda backend), or fp8 (the linear "
                  "layers' GEMMs in E4M3; emulated on the cpu backend); default the backend's own");
  app->add_option("--attention-impl", w.attention_impl,
                  "auto (cuDNN's fused flash attention where the binary has it and cuDNN takes the "
                  "shape, default), cudnn (or exit 2), gemm (batched GEMMs around a fused "
                  "softmax; the cpu backend's own loops)");
  app->add_option("--grouped-gemm", w.grouped_gemm,
                  "loop (one GEMM per expert, default) or grouped (one cuBLAS grouped GEMM over "
                  "the local experts, BF16; --backend cuda)");
  app->add_option("--fp8-recipe", n.fp8_recipe,
                  "with --precision fp8: tensor (one scale per tensor, default), blockwise "
                  "(DeepSeek-V3: 1x128 activation tiles, 128x128 weight blocks; Hopper) or mxfp8 "
                  "(1x32 tiles, E8M0 scales; Blackwell); all three emulated on the cpu backend");
  app->add_option("--fp8-weight-copies", w.fp8_weight_copies,
                  "with --precision fp8: kept (each weight quantised once per step, its copies "
                  "kept), per-gemm (quantised at every GEMM, nothing kept) or auto (kept where the "
                  "memory allows, default)");
  app->add_option("--fp8-saved-inputs", w.fp8_saved_inputs,
                  "on|off: with --precision fp8, the routed experts' GEMM inputs kept for the "
                  "weight gradients as their FP8 copies (one byte an element and the tiles' "
                  "scales), as Transformer Engine keeps them (default on), or in the storage "
                  "precision (off); the gradients are the same either way");
  // Megatron's names for what some public rows' trainers ran; taken so that a row's command line
  // can be given as it ran, and refused naming the feature (check_trainer_features).
  const std::string refused = "refused: moebench's step does not run it, predict does not price it";
  app->add_option("--tp,--tensor-model-parallel-size", w.tp,
                  "tensor-parallel size (default 1; above 1 " + refused + ")");
  app->add_flag("--sequence-parallel", w.sequence_parallel,
                "sequence parallelism (" + refused + ")");
  app->add_option("--recompute-granularity", w.recompute_granularity,
                  "selective (default: --recompute's modules); full is " + refused);
  app->add_option("--pipeline-schedule", w.pipeline_schedule,
                  "1f1b (default; interleaved with --vp > 1); dualpipe is " + refused);
  app->add_flag("--use-megatron-fsdp,--use-torch-fsdp2", w.fsdp,
                "fully sharded data parallelism (" + refused + ")");
  app->add_option("--blas-threads", w.blas_threads, "BLAS threads per rank (default 1)");
  app->add_option("--comm-barrier", w.comm_barrier,
                  "on|off: collectives start after a barrier of their group, the wait timed as "
                  "comm_wait (default on)");
  app->add_option("--overlap", w.overlap,
                  "on|off: the shared expert computes during the dispatch, gradients are reduced "
                  "in buckets during the backward (ZeRO-1: one reduce-scatter per group, started "
                  "once the group's gradients are final) (default on)");
  app->add_option("--grad-bucket-mb", w.grad_bucket_mb,
                  "with --overlap on: merge whole layers into a gradient bucket until it holds at "
                  "least this many MiB (default 80, Megatron-LM's 40M BF16 elements; 0: one "
                  "bucket per layer)");
}

// The linkcheck flags that need no world size; UsageError naming what is valid.
void check_linkcheck_options(const CliOptions& o) {
  const LinkcheckOptions& l = o.linkcheck;
  if (l.level != "rank" && l.level != "node") {
    throw UsageError("--level " + l.level + ": valid: rank (every pair) or node (node pairs)");
  }
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 34;  // 16 GiB
  if (l.large_bytes && (*l.large_bytes < 4 || *l.large_bytes > kMaxBytes)) {
    throw UsageError("--large-bytes " + std::to_string(*l.large_bytes) +
                     ": must be from 4 to 17179869184 (16 GiB)");
  }
  if (l.small_bytes < 4 || l.small_bytes > kMaxBytes) {
    throw UsageError("--small-bytes " + std::to_string(l.small_bytes) +
                     ": must be from 4 to 17179869184 (16 GiB)");
  }
  if (l.iterations < 1 || l.iterations > 100000) {
    throw UsageError("--iterations " + std::to_string(l.iterations) + ": must be from 1 to 100000");
  }
  if (l.ranks_per_node < 0 || l.nvlink_domain_size < 0) {
    throw UsageError("--ranks-per-node and --nvlink-domain-size must be >= 0 (0: detect)");
  }
  check_health_flags(l.mad_k, l.min_slowdown);
  check_timeout(l.timeout_s);
  if (o.inject && o.inject->kind != FaultSpec::Kind::slowlink) {
    throw UsageError("--inject " + to_string(*o.inject) +
                     ": linkcheck injects slowlink:a=R1,b=R2,factor=F only");
  }
}

// Integers in decimal only, and no sign where the value is unsigned: CLI11 would read "0x10" as
// 16 and wrap "-1" into 2^64 - 1. File names never empty: `--out ""` would quietly write nothing.
void strict_values(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    if (is_unsigned || type.rfind("INT", 0) == 0) {
      opt->check(CLI::Validator(
          [is_unsigned](std::string& v) -> std::string {
            const std::size_t digits = !is_unsigned && !v.empty() && v[0] == '-' ? 1 : 0;
            const bool ok =
                v.size() > digits && v.find_first_not_of("0123456789", digits) == std::string::npos;
            return ok ? ""
                      : "'" + v + "' is not a " + (is_unsigned ? "non-negative " : "") +
                            "decimal integer";
          },
          "", "decimal"));
    }
    for (const char* file_flag : {"--out", "--step-log", "--markdown", "--plot"}) {
      if (opt->check_lname(std::string(file_flag).substr(2))) {
        opt->check(CLI::Validator(
            [](std::string& v) -> std::string {
              return v.empty() ? "an empty file name; give a path" : "";
            },
            "", "file name"));
      }
    }
  }
  for (CLI::App* sub : app.get_subcommands({})) strict_values(*sub);
}

}  // namespace

CliOptions parse_command_line(int argc, const char* const* argv) {
  CliOptions o;
  o.argv.assign(argv, argv + argc);
  CLI::App app{
      "moebench: DeepSeek-V3-shaped MoE training steps, expert- and data-parallel, measured per "
      "GPU",
      "moebench"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");

  NamedFlags named;
  NamedFlags bench_named;
  CLI::App* run = app.add_subcommand("run", "run training steps and write a run report");
  add_workload_flags(run, o.workload, named);
  std::string inject;
  // The run's own flags; plan takes them too (checked, not used), so that a `moebench run`
  // command line can be planned by changing the word (slurm/scaling.sh's pre-flight does).
  const auto add_run_flags = [&](CLI::App* app_, const std::string& note) {
    app_->add_option("--warmup", o.warmup, "untimed steps first (default 3)" + note);
    app_->add_option("--steps", o.steps, "timed steps (default 10)" + note);
    app_->add_flag("--verify", o.verify,
                   "check one step against a single-process reference of the global batch" + note);
    app_->add_option(
        "--timeout", o.timeout_s,
        "seconds any wait for a peer may take, every collective and transfer (mpi and nccl; "
        "default 600)" +
            note);
    app_->add_flag("--quiet", o.quiet, "no table and no line per step on stdout" + note);
    app_->add_option("--inject", inject,
                     "testing aid: corrupt:rank=R[,phase=dispatch|combine|grad_reduce|pp][,step=S] "
                     "corrupts one value rank R receives there in step S (default dispatch, step "
                     "0: the --verify step), which --verify must catch; slow:rank=R,factor=F "
                     "makes rank R's compute F times as slow, which the health check must name" +
                         note);
    app_->add_flag(
        "--health-gate", o.health_gate,
        "exit 5 when the health check names a suspect (a slow rank, GPU or node)" + note);
    app_->add_option("--health-mad", o.health_mad,
                     "a suspect's compute time is this many robust standard deviations (1.4826 "
                     "MAD) slower than the median rank's (default 6)" +
                         note);
    app_->add_option("--system", o.system,
                     "a known system (`moebench systems`) or a description file: the report gets "
                     "each phase's expected time on it and marks phases over 1.25x" +
                         note);
    app_->add_option("--calibrate", o.calibrate,
                     "with --system: expected times calibrated from this run report of the same "
                     "system (`moebench predict --calibrate`)" +
                         note);
    app_->add_option("--health-min-slowdown", o.health_min_slowdown,
                     "and at least this fraction slower (default 0.1, 10%, on a GPU; 0.5 on the "
                     "cpu backend, whose ranks share cores)" +
                         note);
  };
  add_run_flags(run, "");
  run->add_option("--out", o.out, "write the JSON run report here (atomically)");
  run->add_option("--step-log", o.step_log,
                  "write each finished step as a JSON line here, at once; the file starts afresh "
                  "and must be a step log or new (default OUT.steps.jsonl beside --out)");

  CLI::App* plan = app.add_subcommand("plan", "accounting and per-rank memory, without running");
  add_workload_flags(plan, o.workload, named);
  plan->add_option("--world", o.world,
                   "number of ranks (GPUs) to plan for (default 1, or the recipe's GPU count)");
  plan->add_option("--gpu-memory", o.gpu_memory_gib,
                   "GiB of memory per GPU: exit 2 unless the largest rank's estimate (moebench's "
                   "own step, BF16) fits in it");
  plan->add_flag("--json", o.json, "print JSON instead of text");
  plan->add_option("--out", o.out, "also write the JSON here");
  add_run_flags(plan, " (run's flag: checked as run checks it, not used)");

  CLI::App* report =
      app.add_subcommand("report", "merge run reports into a scaling report with verdicts");
  ReportOptions& r = o.report;
  report->add_option("inputs", r.inputs, "run reports: files, directories, globs")->required();
  report->add_option("--out", r.out, "write the scaling report JSON here");
  report->add_option("--markdown", r.markdown, "write the scaling report as Markdown here");
  report->add_option("--plot", r.plot, "draw the PNG (python3 with matplotlib)");
  report->add_option("--baseline", r.baseline, "GPU count efficiencies are relative to");
  report
      ->add_option("--allow-mixed", r.allow_mixed,
                   "let seq_len, micro_batch or ep differ between sizes (repeat, or a,b)")
      ->allow_extra_args(false)  // one value per flag: the run reports after it stay inputs
      ->delimiter(',');
  report->add_option("--claim-tflops", r.claim_tflops, "claimed TFLOP/s per GPU (largest size)");
  report->add_option("--claim-efficiency", r.claim_efficiency,
                     "claimed efficiency of the largest size against the baseline");
  report->add_option("--min-tflops", r.min_tflops, "required TFLOP/s per GPU at every size");
  report->add_option("--min-efficiency", r.min_efficiency, "required efficiency at every size");
  report->add_flag("--allow-failed", r.allow_failed,
                   "merge runs that were interrupted (SIGTERM, SIGINT) or failed (a timeout, a "
                   "peer's death) too: their figures come from the timed steps that finished");
  report->add_flag("--allow-suspects", r.allow_suspects,
                   "accept runs whose health check named suspect ranks (by default such a size "
                   "fails the `health` verdict, naming them)");
  report->add_flag("--allow-injected", r.allow_injected,
                   "accept runs that injected a fault (--inject; by default such a size fails the "
                   "`injected` verdict)");
  report->add_flag("--claim-from-recipe", r.claim_from_recipe,
                   "judge the runs' recipe's published TFLOP/s per GPU (or --claim-tflops) like "
                   "for like: its step priced with the figures the runs measured, within the "
                   "model's band; moebench's own step beside it as a figure");
  report->add_option("--claim-recipe", r.claim_recipe,
                     "the recipe --claim-tflops and --claim-efficiency are about (its published "
                     "TFLOP/s when neither is given): judged like for like, as "
                     "--claim-from-recipe");
  report->add_option("--claim-gpus", r.claim_gpus,
                     "with a recipe's --claim-efficiency: the GPU count the claimed efficiency "
                     "reaches from the recipe's own (default: the recipe's x largest / baseline)");
  report->add_flag("--quiet", r.quiet, "no table on stdout");
  report->add_option("--system", r.system,
                     "a known system (`moebench systems`) or a file: each run's predicted step and "
                     "TFLOP/s on it beside the measured ones (`moebench predict`)");
  report->add_option("--calibrate", r.calibrate,
                     "with --system: the predictions calibrated from this run report");
  CLI::App* bench = app.add_subcommand(
      "bench", "performance probe on one device: GEMM roofline, expert GEMMs, one EP rank's step");
  BenchOptions& b = o.bench;
  bench->add_option("--backend", bench_named.backend, "compute backend: cpu (default) or cuda");
  bench->add_option("--preset", b.preset, "model (default deepseek-v3; cpu: deepseek-v3-tiny)");
  bench->add_option("--model-config", b.model_config, "Hugging Face config.json instead");
  bench->add_option("--ep", b.ep, "emulated expert-parallel size (default experts / top-k: 32)");
  bench->add_option("--seq-len", b.seq_len, "tokens per micro-batch (default the preset's)");
  bench->add_option("--gemm-n", b.gemm_n, "dense reference GEMM size (default 8192; cpu 1024)");
  bench->add_option("--layers", b.layers, "layer counts of the step, e.g. 1,4 (default 1,4)");
  bench->add_option("--precision", bench_named.precision,
                    "fp32 (cpu), bf16 (cuda) or fp8 (the step's linear GEMMs in E4M3); default the "
                    "backend's");
  bench->add_option("--fp8-recipe", bench_named.fp8_recipe,
                    "with --precision fp8: tensor (default), blockwise or mxfp8 (as run's)");
  bench->add_option("--optimizer", b.optimizer, "adamw|none in the step (default adamw)");
  bench->add_option("--peak-tflops", b.peak_tflops, "BF16 peak (default: known GPUs' datasheet)");
  bench->add_option("--warmup", b.warmup, "untimed iterations first (default 2)");
  bench->add_option("--iterations", b.iterations, "timed iterations and steps (default 10)");
  bench->add_option("--blas-threads", b.blas_threads, "BLAS threads (cpu backend, default 1)");
  bench->add_option("--seed", b.seed, "seed of every weight and input (default 1234)");
  bench->add_option("--out", b.out, "write the JSON here (atomically)");
  bench->add_flag("--quiet", b.quiet, "no table or progress");
  std::string accept_duration;
  CLI::App* accept = app.add_subcommand(
      "accept",
      "acceptance: inventory, every GPU's GEMM and memory rates against the SKU's and the fleet's, "
      "the MoE step verified with per-rank health, silent-data-corruption checks; accept.json, "
      "accept.md, junit.xml and drain.txt in --out DIR");
  add_workload_flags(accept, o.workload, named);
  AcceptOptions& acc = o.accept;
  accept->add_option("--out", acc.out, "the directory for the outputs (made if missing)")
      ->required();
  accept->add_option("--floor", acc.floor,
                     "a GPU figure passes at >= this fraction of the SKU's expected figure "
                     "(default 0.8; the cpu system's figures are nominal and not judged)");
  accept->add_option("--min-slowdown", acc.min_slowdown,
                     "a rank this fraction slower than the median rank fails (default 0.1 on a "
                     "GPU, 1.0, 2x, on the cpu backend, whose ranks share cores)");
  accept->add_option("--baseline", acc.baseline,
                     "a known-good node's accept.json: its ranks' median GEMM and memory rates "
                     "(per SKU) become the expected figures, x --floor");
  accept->add_option("--floors", acc.floors,
                     "the site's own floors, a JSON file ({\"gemm_rate\": FLOP/s, "
                     "\"memory_bandwidth\": bytes/s}, reports/floors.schema.json): a rank "
                     "passes at >= them");
  accept->add_option("--dcgm", acc.dcgm,
                     "`dcgmi diag -r N -j` results to fold into the checks and drain list: a "
                     "node's file, %h in the path standing for the node's name (e.g. "
                     "/shared/dcgm-%h.json); GPU i of a node is its rank of local index i");
  accept->add_option("--sdc-repeats", acc.sdc_repeats,
                     "the same GEMM on the same inputs this many times on every rank (default 5)");
  accept->add_option("--duration", accept_duration,
                     "burn-in after the ladder: the GEMM probe and a step, round after round, "
                     "for this long (seconds, or with s, m or h: 90, 30m, 2h); drift and any "
                     "silent corruption are findings");
  accept->add_option("--gemm-n", acc.gemm_n, "its size n (n x n x n; default 8192, cpu 1024)");
  accept->add_option("--warmup", o.warmup, "the step stage's untimed steps (default 1)");
  accept->add_option("--steps", o.steps, "the step stage's timed steps (default 3)");
  accept->add_option("--timeout", o.timeout_s,
                     "seconds any wait for a peer may take (default 600)");
  accept->add_flag("--quiet", o.quiet, "no progress lines on stdout");
  accept->add_option("--system", o.system,
                     "the SKU's system (`moebench systems`) or a file: the expected figures "
                     "(default: the GPU's built-in system; cpu on the cpu backend)");
  accept->add_option(
      "--inject", inject,
      "testing aid: slow:rank=R,factor=F (a slow GPU), sdc:rank=R[,every=K] (a GPU "
      "whose GEMMs are wrong), slowlink:a=R1,b=R2|all,factor=F (a slow link, or port), "
      "version:rank=R (a rank whose software differs), hang:rank=R[,step=S] (a rank "
      "that stops in the step stage's step S), as run's --inject");
  std::string merge_nodes;
  CLI::App* merge = app.add_subcommand(
      "accept-merge",
      "one verdict and one drain list from many accept reports (a Slurm job a node, and one "
      "across nodes): every report's checks, the nodes with no report, the fleet's view");
  merge
      ->add_option("reports", o.files,
                   "accept.json files, or accept's --out directories (one that holds no "
                   "accept.json is a job that wrote no report)")
      ->required();
  merge->add_option("--out", acc.out, "the directory for the merged outputs (made if missing)")
      ->required();
  merge->add_option("--nodes", merge_nodes,
                    "the nodes that must each have a report, separated by commas or spaces "
                    "(e.g. \"$(scontrol show hostnames $NODELIST)\"); one without fails and is "
                    "drained");
  merge->add_option("--min-slowdown", acc.min_slowdown,
                    "a rank this fraction slower than its SKU's median across the fleet fails "
                    "(default: the largest of the reports')");
  merge->add_flag("--quiet", o.quiet, "no summary line on stdout");
  CLI::App* linkcheck = app.add_subcommand(
      "linkcheck",
      "pairwise bandwidth and latency between ranks: a matrix, a heat map and the slow links");
  LinkcheckOptions& l = o.linkcheck;
  NamedFlags link_named;
  linkcheck->add_option("--backend", link_named.backend, "compute backend: cpu (default) or cuda");
  linkcheck->add_option("--comm", link_named.comm, "mpi (default) or nccl");
  linkcheck->add_option(
      "--level", l.level,
      "rank: every pair of ranks (default; world - 1 rounds); node: every pair of "
      "nodes, rank by rank, then every pair within each node (nodes - 1 + ranks "
      "per node - 1 rounds); the run prints the rounds and their time at 1,024 "
      "ranks");
  linkcheck->add_option(
      "--large-bytes", l.large_bytes,
      "the bandwidth message (default 64 MiB on a GPU, 4 MiB on the cpu backend)");
  linkcheck->add_option("--small-bytes", l.small_bytes, "the latency message (default 8)");
  linkcheck->add_option("--iterations", l.iterations,
                        "timed transfers of the large message per pair and direction, and 5x "
                        "as many ping-pongs of the small one; the fastest counts (default 20)");
  linkcheck->add_option("--ranks-per-node", l.ranks_per_node, "emulate nodes (0: detect)");
  linkcheck->add_option("--nvlink-domain-size", l.nvlink_domain_size,
                        "emulate NVLink domains of K consecutive ranks (default 0: NVML's fabric "
                        "cliques on multi-node NVLink systems, else the nodes)");
  linkcheck->add_option("--health-mad", l.mad_k,
                        "an outlier is this many robust standard deviations worse than the "
                        "median of its class (default 6)");
  linkcheck->add_option(
      "--health-min-slowdown", l.min_slowdown,
      "and at least this fraction worse (default 0.1 on a GPU; 9, 10x, on cpu, whose "
      "ranks share cores and memory bandwidth)");
  linkcheck->add_flag("--health-gate", l.gate, "exit 5 when a link is an outlier");
  linkcheck->add_option("--timeout", l.timeout_s, "seconds any transfer may take (default 600)");
  linkcheck->add_option("--inject", inject,
                        "testing aid: slowlink:a=R1,b=R2,factor=F makes every transfer between "
                        "R1 and R2 F times as slow");
  linkcheck->add_option("--out", l.out, "write the JSON here (atomically)");
  linkcheck->add_option("--plot", l.plot, "draw the heat map PNG (python3 with matplotlib)");
  linkcheck->add_flag("--quiet", l.quiet, "no table on stdout");
  app.add_subcommand("presets", "list the built-in models");
  CLI::App* recipes_cmd =
      app.add_subcommand("recipes", "the published rows --recipe runs, with their figures");
  recipes_cmd->add_flag("--json", o.json, "print JSON instead of text");
  CLI::App* phases =
      app.add_subcommand("phases", "the phases a step's time is split into, with their kinds");
  phases->add_flag("--json", o.json, "print JSON instead of text");
  CLI::App* predict = app.add_subcommand(
      "predict", "the step time, TFLOP/s and scaling a system should reach, from the accounting");
  add_workload_flags(predict, o.workload, named);
  predict->add_option("--system", o.system,
                      "a built-in system (`moebench systems`) or a description file (default: the "
                      "recipe's)");
  predict
      ->add_option("--gpus", o.gpus,
                   "GPU counts to predict, comma-separated (default: the recipe's, 4x and 32x "
                   "it; without a recipe 1)")
      ->delimiter(',');
  predict->add_option("--global-batch-per-gpu", o.global_batch_per_gpu,
                      "sequences a step per GPU at every GPU count (weak scaling: the global batch "
                      "grows with the GPUs), in place of --global-batch (one batch at every "
                      "count: strong scaling)");
  predict->add_flag("--json", o.json, "print JSON (reports/predict.schema.json) instead of text");
  predict->add_option("--out", o.out, "also write the JSON here (atomically)");
  predict->add_option("--plot", o.plot,
                      "draw the predicted TFLOP/s per GPU with the system's published rows, and "
                      "the step's phases per GPU count, as a PNG (python3 with matplotlib)");
  predict->add_option("--measured", o.measured,
                      "run reports (`moebench run --out`) measured on the system: the rates each "
                      "kind of work reached there (GEMMs, attention, memory, links) in place of "
                      "the datasheet x the generation's efficiency, the trainer's own terms kept; "
                      "repeatable (docs/predicting.md)");
  predict->add_option("--calibrate", o.calibrate,
                      "a run report (`moebench run --out`) measured on the system: each phase "
                      "scaled by what it measured against the model, in place of the efficiencies");
  predict->add_flag("--explain", o.explain,
                    "print the largest terms of the step: what the step is bound by");
  predict->add_option("--cuda-graphs", o.cuda_graphs,
                      "with --recipe: none|partial|full_iteration, what the trainer captures in "
                      "CUDA graphs in place of the recipe's (its host's gaps priced accordingly)");
  predict->add_option("--fp8-attention", o.fp8_attention,
                      "with --recipe: on|off, core attention in FP8 in place of the recipe's");
  predict->add_option("--ep-comm-overlap", o.ep_comm_overlap,
                      "with --recipe: on|off, the trainer's all-to-all overlap in place of the "
                      "recipe's (`moebench recipes --json`: ep_comm_overlap), to see what it is "
                      "worth");
  CLI::App* systems = app.add_subcommand(
      "systems", "the built-in system descriptions (hardware figures per GPU, with sources)");
  systems->add_flag("--json", o.json,
                    "print the descriptions as JSON, each figure with its source");
  systems->add_option("--system", o.system_files,
                      "also a system description file of your own (reports/system.schema.json), "
                      "checked; repeatable");
  CLI::App* validate =
      app.add_subcommand("validate", "check run reports (and link tests) against their schemas");
  validate->add_option("files", o.files, "run report or linkcheck files")->required();
  app.add_subcommand("version", "print the version");

  // `moebench --help` by job, so that a first-time reader sees where to start.
  const std::pair<const char*, std::vector<const char*>> groups[] = {
      {"Measure (mpirun or srun, one rank a GPU)", {"run", "bench", "linkcheck", "accept"}},
      {"Judge (files in, verdicts out)", {"report", "accept-merge", "validate"}},
      {"Predict (before buying or queueing)", {"predict", "plan"}},
      {"Inspect", {"presets", "recipes", "phases", "systems", "version"}}};
  for (const auto& [group, names] : groups) {
    for (const char* name : names) app.get_subcommand(name)->group(group);
  }
  strict_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    o.command = Command::help;
    o.help_text = app.get_subcommands().empty() ? app.help() : app.get_subcommands()[0]->help();
    return o;
  } catch (const CLI::CallForAllHelp&) {
    o.command = Command::help;
    o.help_text = app.help("", CLI::AppFormatMode::All);
    return o;
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-') {
      throw UsageError(
          std::string("unknown command '") + argv[1] +
          "'; valid: run, plan, predict, bench, linkcheck, accept, accept-merge, report, "
          "presets, recipes, "
          "phases, systems, validate, version");
    }
    std::string what = e.what();
    const std::string sub =
        app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name();
    if (what.empty()) what = e.get_name();
    throw UsageError(what + " (see `moebench " + (sub.empty() ? "" : sub + " ") + "--help`)");
  }

  const std::string name = app.get_subcommands()[0]->get_name();
  o.command = name == "run"            ? Command::run
              : name == "plan"         ? Command::plan
              : name == "predict"      ? Command::predict
              : name == "presets"      ? Command::presets
              : name == "recipes"      ? Command::recipes
              : name == "phases"       ? Command::phases
              : name == "systems"      ? Command::systems
              : name == "validate"     ? Command::validate
              : name == "report"       ? Command::report
              : name == "bench"        ? Command::bench
              : name == "linkcheck"    ? Command::linkcheck
              : name == "accept"       ? Command::accept
              : name == "accept-merge" ? Command::accept_merge
                                       : Command::version;
  if (o.command == Command::bench) {
    b.backend = parse_compute_backend(bench_named.backend);
    b.precision = optional_precision(bench_named.precision);
    b.fp8_recipe = optional_fp8_recipe(bench_named.fp8_recipe);
  }
  if (!inject.empty()) o.inject = parse_fault_spec(inject);
  if (o.command == Command::linkcheck) {
    l.backend = parse_compute_backend(link_named.backend);
    l.comm = parse_comm_backend(link_named.comm);
    check_comm_backend(l.comm, l.backend);
    check_linkcheck_options(o);
  }
  if (o.command == Command::accept) {
    // The tiny model unless a workload is named: the step stage checks the arithmetic and the
    // ranks' health, the GPU stage the rates at the model's GEMM size.
    if (o.workload.recipe.empty() && o.workload.preset.empty() && o.workload.model_config.empty()) {
      o.workload.preset = "deepseek-v3-tiny";
    }
    CLI::App* sub = app.get_subcommands()[0];
    if (sub->count("--warmup") == 0) o.warmup = 1;
    if (sub->count("--steps") == 0) o.steps = 3;
    if (!accept_duration.empty()) o.accept.duration_s = parse_duration_s(accept_duration);
    if (!(o.accept.floor > 0 && o.accept.floor <= 1)) {
      throw UsageError("--floor " + strprintf("%g", o.accept.floor) +
                       ": give a fraction of the expected figure in (0, 1], e.g. 0.8");
    }
    if (!o.accept.baseline.empty() && !o.accept.floors.empty()) {
      throw UsageError(
          "--baseline and --floors: give one (a known-good node's report, or the "
          "site's floors)");
    }
    if (o.accept.sdc_repeats < 2 || o.accept.sdc_repeats > 1000) {
      throw UsageError("--sdc-repeats " + std::to_string(o.accept.sdc_repeats) +
                       ": give 2 to 1000 (a GEMM's checksum is compared with its repeats')");
    }
    if (o.accept.gemm_n && (*o.accept.gemm_n < 16 || *o.accept.gemm_n > 65536)) {
      throw UsageError("--gemm-n " + std::to_string(*o.accept.gemm_n) + ": give 16 to 65536");
    }
    if (o.inject && o.inject->kind != FaultSpec::Kind::slow &&
        o.inject->kind != FaultSpec::Kind::sdc && o.inject->kind != FaultSpec::Kind::slowlink &&
        o.inject->kind != FaultSpec::Kind::version && o.inject->kind != FaultSpec::Kind::hang) {
      throw UsageError("--inject " + to_string(*o.inject) +
                       ": accept injects slow:rank=R,factor=F, sdc:rank=R[,every=K], "
                       "slowlink:a=R1,b=R2|all,factor=F, version:rank=R or "
                       "hang:rank=R[,step=S]");
    }
  }
  if (o.inject && o.inject->kind == FaultSpec::Kind::slowlink && o.command != Command::accept &&
      o.command != Command::linkcheck) {
    throw UsageError("--inject " + to_string(*o.inject) +
                     ": a slow link is injected into `moebench linkcheck`, which measures the "
                     "links; run slows compute (slow:rank=R,factor=F)");
  }
  if (o.inject && o.inject->kind == FaultSpec::Kind::version && o.command != Command::accept) {
    throw UsageError("--inject " + to_string(*o.inject) +
                     ": only moebench accept compares the ranks' versions");
  }
  if (o.command == Command::accept_merge &&
      (!merge_nodes.empty() || app.get_subcommands()[0]->count("--nodes") > 0)) {
    o.accept.nodes = parse_node_list(merge_nodes);
  }
  if ((o.command == Command::accept || o.command == Command::accept_merge) &&
      o.accept.min_slowdown && !(*o.accept.min_slowdown > 0 && *o.accept.min_slowdown <= 100)) {
    throw UsageError("--min-slowdown: give a fraction in (0, 100], e.g. 0.1 for 10% slower");
  }
  if (o.command == Command::run || o.command == Command::plan || o.command == Command::predict ||
      o.command == Command::accept) {
    // A feature the model does not price is named first, whatever else is missing.
    check_trainer_features(o.workload.tp, o.workload.sequence_parallel,
                           o.workload.recompute_granularity, o.workload.pipeline_schedule,
                           o.workload.fsdp, o.workload.optimizer);
    o.workload.backend = parse_compute_backend(named.backend);
    o.workload.comm = parse_comm_backend(named.comm);
    o.workload.precision = optional_precision(named.precision);
    o.workload.fp8_recipe = optional_fp8_recipe(named.fp8_recipe);
    CLI::App* sub = app.get_subcommands()[0];
    for (const std::string& f : recipe_flags()) {
      if (sub->count(f) > 0) o.workload.given.push_back(f);
    }
    o.workload.backend_given = sub->count("--backend") > 0;
    if (!o.workload.preset.empty() && !o.workload.model_config.empty()) {
      throw UsageError(
          "give one of --preset NAME (deepseek-v3, deepseek-v3-tiny) or --model-config FILE, not "
          "both");
    }
    if (o.workload.recipe.empty() && o.workload.preset.empty() && o.workload.model_config.empty()) {
      throw UsageError(
          "give one of --preset NAME (deepseek-v3, deepseek-v3-tiny), --model-config FILE or "
          "--recipe NAME (`moebench recipes`)");
    }
    on_off("--attention", o.workload.attention);
    if (!o.workload.head.empty()) on_off("--head", o.workload.head);
    on_off("--comm-barrier", o.workload.comm_barrier);
    on_off("--overlap", o.workload.overlap);
    on_off("--fp8-saved-inputs", o.workload.fp8_saved_inputs);
    grad_bucket_bytes(o.workload.grad_bucket_mb);
    parse_routing(o.workload.routing);  // a bad --routing fails here, before MPI starts
    if (o.workload.grad_reduce != "allreduce" && o.workload.grad_reduce != "reduce-scatter") {
      throw UsageError("--grad-reduce " + o.workload.grad_reduce +
                       ": expected allreduce or reduce-scatter");
    }
    if (!o.workload.recipe.empty()) recipe(o.workload.recipe);  // a bad name fails here
    if (!o.cuda_graphs.empty() && o.cuda_graphs != "none" && o.cuda_graphs != "partial" &&
        o.cuda_graphs != "full_iteration") {
      throw UsageError("--cuda-graphs " + o.cuda_graphs +
                       ": expected none, partial (attention, router, preprocessing) or "
                       "full_iteration");
    }
    if (!o.fp8_attention.empty()) on_off("--fp8-attention", o.fp8_attention);
    for (const auto& [flag, value] :
         {std::pair<const char*, const std::string*>{"--cuda-graphs", &o.cuda_graphs},
          {"--fp8-attention", &o.fp8_attention}}) {
      if (!value->empty() && o.workload.recipe.empty()) {
        throw UsageError(std::string(flag) + " " + *value +
                         ": sets a recipe's trainer; give --recipe NAME (moebench's own step has "
                         "no CUDA graphs and computes attention in the run's precision)");
      }
    }
    if (!o.ep_comm_overlap.empty()) {
      on_off("--ep-comm-overlap", o.ep_comm_overlap);
      if (o.workload.recipe.empty()) {
        throw UsageError("--ep-comm-overlap " + o.ep_comm_overlap +
                         ": sets a recipe's trainer; give --recipe NAME (moebench's own step "
                         "overlaps its exchanges with --overlap)");
      }
    }
    if (!o.measured.empty() && !o.calibrate.empty()) {
      throw UsageError(
          "--measured with --calibrate: give one (--measured replaces the hardware's "
          "figures, --calibrate each phase of moebench's step)");
    }
    if (o.global_batch_per_gpu) {
      if (*o.global_batch_per_gpu < 1) {
        throw UsageError("--global-batch-per-gpu " + std::to_string(*o.global_batch_per_gpu) +
                         ": must be >= 1 sequences");
      }
      if (o.workload.global_batch) {
        throw UsageError(
            "--global-batch-per-gpu with --global-batch: give one (per GPU: weak scaling; "
            "job-wide: strong)");
      }
    }
    if (o.world && *o.world < 1) {
      throw UsageError("--world " + std::to_string(*o.world) + ": must be >= 1");
    }
    if (o.gpu_memory_gib && !(*o.gpu_memory_gib > 0 && *o.gpu_memory_gib <= 1e6)) {
      std::ostringstream v;
      v << *o.gpu_memory_gib;
      throw UsageError("--gpu-memory " + v.str() +
                       ": give the GiB of one GPU, a number in (0, 1e6], e.g. 141 for an H200");
    }
  }
  return o;
}

}  // namespace moebench
