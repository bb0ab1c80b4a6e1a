// `moebench bench`: the performance probe on one device, one process, no MPI. Measures the dense
// GEMM rate (the roofline reference), the experts' grouped GEMMs of one EP rank at their real
// shapes, and the training step of one EP rank's layers (harness/bench/bench.hpp says how one
// process reproduces that rank's work), then prints a table and writes `--out` JSON.
#include <cmath>
#include <ctime>
#include <iostream>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/local/local_communicator.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/bench/bench.hpp"
#include "harness/bench/bench_report.hpp"
#include "harness/bench/expert_gemm_case.hpp"
#include "harness/cli/commands.hpp"
#include "harness/compute/mla_attention_case.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/host.hpp"
#include "harness/core/human.hpp"
#include "harness/core/version.hpp"
#include "harness/device/device_records.hpp"
#include "harness/measure/summary.hpp"
#include "harness/output/atomic_file.hpp"
#include "workloads/accounting/accounting.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench {

namespace {

// Each call's time between two synchronisations of the backend: a few microseconds of host
// overhead per call, the same for the dense reference and the grouped GEMMs they are compared
// with.
template <typename F>
Stats time_calls(Compute& c, int warmup, int iterations, F&& call) {
  for (int i = 0; i < warmup; ++i) call();
  c.synchronize();
  std::vector<double> t;
  for (int i = 0; i < iterations; ++i) {
    c.synchronize();
    const Clock::time_point start = Clock::now();
    call();
    c.synchronize();
    t.push_back(seconds_since(start));
  }
  return summarize(t);
}

// The mean time per call of `iterations` back-to-back calls, between two compute marks.
template <typename F>
double marked_mean_seconds(Compute& c, int iterations, F&& call) {
  c.synchronize();
  c.clear_marks();
  const int first = c.mark();
  for (int i = 0; i < iterations; ++i) call();
  const int last = c.mark();
  c.synchronize();
  const std::vector<double> t = c.mark_times_s();
  c.clear_marks();
  return (t[static_cast<std::size_t>(last)] - t[static_cast<std::size_t>(first)]) / iterations;
}

// The flags resolved against the model and the backend, checked before anything is allocated.
struct BenchPlan {
  ModelConfig model;
  ExpertShare share;
  std::int64_t gemm_n = 0;
  std::int64_t seq_len = 0;
  Precision precision = Precision::fp32;  // --precision resolved against the backend, once
  Fp8Recipe fp8_recipe = Fp8Recipe::tensor;
  std::vector<RunConfig> stacks;
};

BenchPlan plan_bench(const BenchOptions& b) {
  if (!b.preset.empty() && !b.model_config.empty()) {
    throw UsageError("give at most one of --preset NAME or --model-config FILE");
  }
  const bool cpu = b.backend == ComputeBackend::cpu;
  BenchPlan p;
  p.precision = resolve_precision(b.backend, b.precision);
  p.fp8_recipe = resolve_fp8_recipe(b.fp8_recipe, p.precision);
  std::string preset_name = b.preset;
  if (b.model_config.empty() && preset_name.empty()) {
    preset_name = cpu ? "deepseek-v3-tiny" : "deepseek-v3";  // the cpu backend: seconds, not hours
  }
  std::vector<std::string> warnings;
  p.model =
      preset_name.empty() ? load_model_config(b.model_config, &warnings) : preset(preset_name);
  for (const std::string& w : warnings) std::cerr << "moebench: warning: " << w << "\n";
  validate(p.model, p.model.name);
  std::int64_t seq = 4096;
  for (const PresetInfo& info : preset_list()) {
    if (info.name == preset_name) seq = info.default_seq_len;
  }
  seq = b.seq_len.value_or(seq);
  p.seq_len = seq;
  const int ep = b.ep.value_or(default_bench_ep(p.model));
  p.share = expert_share(p.model, ep, seq);
  p.gemm_n = b.gemm_n.value_or(cpu ? 1024 : 8192);
  if (p.gemm_n < 1) throw UsageError("--gemm-n " + std::to_string(p.gemm_n) + ": must be >= 1");
  if (b.iterations < 1) throw UsageError("--iterations must be >= 1");
  if (b.warmup < 0) throw UsageError("--warmup must be >= 0");
  if (b.optimizer != "adamw" && b.optimizer != "none") {
    throw UsageError("--optimizer " + b.optimizer + ": expected adamw or none");
  }
  if (b.peak_tflops && !(*b.peak_tflops > 0)) throw UsageError("--peak-tflops must be > 0");
  const Optimizer opt = b.optimizer == "none" ? Optimizer::none : Optimizer::adamw;
  for (std::int64_t layers : parse_layer_list(b.layers)) {
    p.stacks.push_back(bench_run_config(p.model, ep, seq, layers, b.backend, p.precision,
                                        b.blas_threads, opt, b.seed, b.warmup, b.iterations));
    p.stacks.back().fp8_recipe = p.fp8_recipe;
  }
  return p;
}

void check_fits(double need, const Compute& c, const std::string& what) {
  const double available = static_cast<double>(c.memory_available_bytes());
  if (need > available) {
    throw UsageError(what + " needs an estimated " + format_gib(need) + " but " +
                     format_gib(available) +
                     " is available; use smaller --gemm-n, --seq-len or --layers");
  }
}

// The dense n^3 GEMM through linear_gemm in `precision`: in fp8 the quantisation of both
// operands is part of every FP8 linear GEMM of the step, so it is part of this time too. Leaves
// the backend's linear precision as it found it.
// keep_weight (fp8): B's quantised copy made once and kept across the calls, as the step keeps a
// weight's; otherwise both operands are quantised in every call (the upper bound).
DenseGemmResult measure_dense(Compute& c, std::int64_t n, int warmup, int iterations,
                              LinearPrecision precision, bool keep_weight = false) {
  const bool fp8 = precision == LinearPrecision::fp8;
  DenseGemmResult r;
  r.n = n;
  r.flops = dense_gemm_flops(n);
  // A, B and C, and in fp8 the two one-byte quantised copies.
  check_fits(3.0 * static_cast<double>(n * n) * dtype_size(c.activation_dtype()) +
                 (fp8 ? 2.0 * static_cast<double>(n * n) : 0.0),
             c, fp8 ? "the fp8 dense GEMM" : "the dense GEMM");
  const LinearPrecision before = c.linear_precision();
  c.set_linear_precision(precision);
  {
    Tensor a = c.alloc(n, n), b = c.alloc(n, n), out = c.alloc(n, n);
    // Random data, not zeros: tensor cores run measurably faster on zeros.
    c.fill_random(a, 11, 1, 1.0f);
    c.fill_random(b, 11, 2, 1.0f);
    // B counts as a weight, whose quantised copy the step reuses across micro-batches:
    // begin_step() before each call drops it, so that both operands are quantised every time.
    if (fp8) c.begin_step();
    auto call = [&] {
      if (fp8 && !keep_weight) c.begin_step();
      c.linear_gemm(false, false, 1.0f, a, b, 0.0f, out);
    };
    r.time_s = time_calls(c, warmup, iterations, call);
    // A device backend's marks are events on its stream: the device time per call, without the
    // host's launch and synchronisation.
    if (c.device_info() && !fp8) r.events_time_s = marked_mean_seconds(c, iterations, call);
  }
  c.set_linear_precision(before);
  return r;
}

GemmCaseResult measure_grouped(Compute& c, const GroupedGemmCase& g, int warmup, int iterations,
                               GroupedGemmImpl impl) {
  c.set_grouped_gemm_impl(impl);
  const double bpe = static_cast<double>(dtype_size(c.activation_dtype()));
  const std::int64_t e = g.count;
  check_fits(bpe * static_cast<double>(e) *
                 static_cast<double>(g.a_rows() * g.a_cols() + g.b_rows() * g.b_cols() + g.m * g.n),
             c, "the expert GEMM " + g.name);
  ExpertGemmCase gemm(c, g, 12);
  GemmCaseResult r;
  r.gemm = g;
  // linear_grouped_gemm: the experts' GEMMs in the step's precision (--precision).
  r.time_s = time_calls(c, warmup, iterations, [&] { gemm.run(); });
  c.set_grouped_gemm_impl(GroupedGemmImpl::loop);
  return r;
}

// Core attention of one layer, one sequence, on the MLA operands the step hands over (q, the kv
// up-projection, the shared rope key), through `impl`: UsageError where the backend has no such
// implementation or cuDNN refuses the shape (the caller records why and sets the implementation
// back to auto).
AttentionCaseResult measure_attention(Compute& c, const ModelConfig& m, std::int64_t seq,
                                      AttentionImpl impl, int warmup, int iterations) {
  const MlaDims d{m.num_attention_heads, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim};
  const double elements =
      static_cast<double>(seq) *
      static_cast<double>(2 * d.heads * d.dq() + 2 * d.kv_width() + 2 * d.dr + 2 * d.heads * d.dv);
  check_fits(elements * static_cast<double>(dtype_size(c.activation_dtype())) +
                 4.0 * static_cast<double>(seq * d.heads) + static_cast<double>(c.reserved_bytes()),
             c, "core attention over " + std::to_string(seq) + " tokens");
  c.set_attention_impl(impl);
  MlaAttentionCase attention(c, d, seq, 13);
  AttentionCaseResult r;
  r.impl = to_string(impl);
  r.batch = attention.shape().batch;
  r.seq_len = seq;
  r.heads = d.heads;
  r.qk_dim = d.dq();
  r.v_dim = d.dv;
  r.flops = core_attention_flops_per_token(m, seq) * static_cast<double>(seq);
  r.forward_time_s = time_calls(c, warmup, iterations, [&] { attention.forward(); });
  r.time_s = time_calls(c, warmup, iterations, [&] { attention.forward_backward(); });
  r.path = c.attention_path();
  return r;
}

LayerStackResult measure_stack(Compute& c, const RunConfig& config, const std::string& host) {
  LayerStackResult r;
  r.config = config;
  r.accounting = account_instantiated(config);
  r.memory = estimate_memory(config, dtype_size(c.activation_dtype()));
  check_fits(r.memory.total(), c,
             std::to_string(config.workload.layers) + " layers of the emulated rank");
  const Topology topo = single_process_topology();
  std::unique_ptr<Communicator> comm = make_local_communicator(c);
  RankSamples rank;
  rank.host = host;
  std::vector<double> forward_backward;
  {
    TrainingStep step(r.config, topo, c, *comm);
    step.initialize();
    for (int i = 0; i < config.warmup; ++i) step.run();
    for (int i = 0; i < config.steps; ++i) {
      const StepSample s = step.run();
      rank.steps.push_back(s);
      forward_backward.push_back(s.step_time_s -
                                 s.time_s[static_cast<std::size_t>(Phase::optimizer)] -
                                 s.time_s[static_cast<std::size_t>(Phase::grad_reduce)]);
    }
  }
  r.results = summarize_run({rank}, static_cast<double>(config.workload.tokens_per_rank()),
                            r.accounting.flops_per_step);
  r.forward_backward_time_s = summarize(forward_backward);
  return r;
}

PeakRate resolve_peak(const BenchOptions& b, const BenchMeta& m) {
  PeakRate p;
  if (b.peak_tflops) {
    p.tflops = b.peak_tflops;
    p.source = "--peak-tflops";
  } else if (const std::optional<KnownPeak> known =
                 m.device ? known_bf16_peak(m.device->info.name) : std::nullopt) {
    p.tflops = known->tflops;
    p.source = known->source;
  } else {
    p.source = "none: unknown device, give --peak-tflops";
  }
  return p;
}

BenchMeta make_meta(const CliOptions& o, const Compute& c, Precision precision,
                    const std::string& start, const std::string& host) {
  BenchMeta m;
  m.tool_version = kToolVersion;
  m.git_sha = git_sha();
  m.git_dirty = git_dirty();
  m.argv = o.argv;
  m.start_time = start;
  m.host = host;
  m.backend = c.kind();
  m.precision = precision;
  m.blas = blas_library_name();
  if (c.kind() == ComputeBackend::cpu) m.blas_core = blas_core();
  m.build_type = MOEBENCH_BUILD_TYPE;
  m.compiler = std::string("g++ ") + __VERSION__;
  m.device = local_device_record(c, 0, host);
  m.gemm_path = c.gemm_path();
  m.grouped_gemm_path = c.grouped_gemm_path();
  m.attention_path = c.attention_path();
  return m;
}

}  // namespace

int bench_command(const CliOptions& o) {
  const BenchOptions& b = o.bench;
  const std::string start = iso_time_utc();
  const BenchPlan plan = plan_bench(b);
  if (!b.out.empty()) ensure_writable_destination(b.out);
  std::unique_ptr<Compute> compute = make_compute(b.backend, 0, b.blas_threads);
  if (b.backend == ComputeBackend::cpu) {
    if (const std::string w = blas_fallback_warning(); !w.empty()) {
      std::cerr << "moebench: warning: " << w << "\n";
    }
  }
  Compute& c = *compute;
  const std::string host = host_name();
  const bool fp8 = plan.precision == Precision::fp8;
  if (fp8) {
    c.set_linear_precision(LinearPrecision::fp8);  // UsageError without FP8 tensor cores
    c.set_fp8_recipe(plan.fp8_recipe);             // UsageError where the GPU cannot run it
  }

  BenchRecord r;
  r.meta = make_meta(o, c, plan.precision, start, host);
  r.model = plan.model;
  r.share = plan.share;
  r.warmup = b.warmup;
  r.iterations = b.iterations;
  r.peak = resolve_peak(b, r.meta);
  auto progress = [&](const std::string& what) {
    if (!b.quiet) std::cerr << "# bench: " << what << "\n" << std::flush;
  };

  progress("dense GEMM " + std::to_string(plan.gemm_n) + "^3");
  r.dense = measure_dense(c, plan.gemm_n, b.warmup, b.iterations, LinearPrecision::standard);
  // cuda: the FP8 rate beside the BF16 one whenever the device has FP8 tensor cores (the "fp8
  // faster than bf16" comparison needs both); cpu: only when asked, it measures the emulation.
  bool fp8_capable = fp8;
  if (c.device_info() && !fp8) {
    try {
      c.set_linear_precision(LinearPrecision::fp8);
      c.set_linear_precision(LinearPrecision::standard);
      fp8_capable = true;
    } catch (const UsageError&) {
      progress("no FP8 tensor cores: dense GEMM in fp8 skipped");
    }
  }
  if (fp8_capable) {
    progress("dense GEMM " + std::to_string(plan.gemm_n) + "^3 in fp8");
    r.dense_fp8 = measure_dense(c, plan.gemm_n, b.warmup, b.iterations, LinearPrecision::fp8);
    r.dense_fp8->weight_kept_time_s =
        measure_dense(c, plan.gemm_n, b.warmup, b.iterations, LinearPrecision::fp8, true).time_s;
  }
  progress("expert grouped GEMMs");
  const std::vector<GroupedGemmCase> expert_cases =
      expert_gemm_cases(plan.share.local_experts, plan.share.rows_per_expert,
                        plan.model.hidden_size, plan.model.moe_intermediate_size);
  for (const GroupedGemmCase& g : expert_cases) {
    r.experts.cases.push_back(measure_grouped(c, g, b.warmup, b.iterations, GroupedGemmImpl::loop));
  }
  // One grouped call per case beside the loop, where the backend has one (cuda) and the GEMMs
  // are BF16 (fp8 scales each expert's operands on their own, one GEMM each).
  bool grouped = !fp8;
  if (grouped) {
    try {
      c.set_grouped_gemm_impl(GroupedGemmImpl::grouped);
      c.set_grouped_gemm_impl(GroupedGemmImpl::loop);
    } catch (const UsageError&) {
      grouped = false;
    }
  }
  if (grouped) {
    progress("expert GEMMs as one grouped GEMM each");
    ExpertGemmResult g;
    for (const GroupedGemmCase& e : expert_cases) {
      g.cases.push_back(measure_grouped(c, e, b.warmup, b.iterations, GroupedGemmImpl::grouped));
    }
    r.experts_grouped = std::move(g);
  }
  // Core attention through each implementation the backend may have: gemm everywhere, cudnn on
  // a device (refused where the binary has no cuDNN or cuDNN has no plan for the shape).
  std::vector<AttentionImpl> attention_impls = {AttentionImpl::gemm};
  if (c.device_info()) attention_impls.push_back(AttentionImpl::cudnn);
  for (AttentionImpl impl : attention_impls) {
    progress(std::string("core attention (") + to_string(impl) + ")");
    try {
      r.attention.push_back(
          measure_attention(c, plan.model, plan.seq_len, impl, b.warmup, b.iterations));
    } catch (const UsageError& e) {
      r.attention_unavailable.push_back({to_string(impl), e.what()});
    }
    c.set_attention_impl(AttentionImpl::automatic);  // the layer stacks run auto
  }
  for (const RunConfig& config : plan.stacks) {
    progress(std::to_string(config.workload.layers) + "-layer training step");
    r.stacks.push_back(measure_stack(c, config, host));
  }

  if (fp8) r.fp8_counts = c.fp8_gemm_counts();

  if (!b.quiet) std::cout << format_bench_table(r) << std::flush;
  if (!b.out.empty()) {
    write_file_atomically(b.out, make_bench_report(r).dump(2) + "\n");
    if (!b.quiet) std::cout << "# report: " << b.out << "\n" << std::flush;
  }
  return 0;
}

}  // namespace moebench
