#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/fault/fault_communicator.hpp"
#include "harness/backends/fault/slow_compute.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/cli/commands.hpp"
#include "harness/cli/prediction.hpp"
#include "harness/cli/run_outputs.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/host.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/core/stop_request.hpp"
#include "harness/core/version.hpp"
#include "harness/device/device_records.hpp"
#include "harness/device/nvlink_domains.hpp"
#include "harness/device/telemetry.hpp"
#include "harness/measure/summary.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/rank_identity.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/table.hpp"
#include "harness/parallel/domains.hpp"
#include "harness/verify/reference_check.hpp"
#include "harness/verify/verify_cost.hpp"
#include "workloads/config/recipes.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench {

namespace {

// Everything a run needs before its first allocation; UsageError when the run cannot be done.
struct Setup {
  RunConfig config;
  Topology topo;
  std::unique_ptr<Compute> compute;
  // --system (and --calibrate): the expected phase times the report carries.
  std::optional<SystemSpec> system;
  std::optional<CalibrationRun> calibration;
  MemoryEstimate memory;  // set once --fp8-weight-copies is resolved (resolve_weight_copies)
  std::shared_ptr<OutputLock> out_lock;  // rank 0: --out is this run's alone while it runs
};

Setup prepare(const CliOptions& o, MpiRuntime& rt) {
  Setup s;
  // A recipe moebench cannot run as published, before anything about its layout.
  if (!o.workload.recipe.empty()) {
    const std::string refusal = offload_refusal(recipe(o.workload.recipe));
    if (!refusal.empty()) throw UsageError(refusal);
  }
  s.config = resolve_run_config(o, rt.size());
  s.topo = rt.topology(s.config.layout.grid(), s.config.layout.ranks_per_node);
  s.compute = make_compute(s.config.backend, s.topo.local_rank, s.config.blas_threads);
  if (s.config.inject && s.config.inject->kind == FaultSpec::Kind::slow &&
      s.config.inject->rank == rt.rank()) {
    s.compute = make_slow_compute(std::move(s.compute), s.config.inject->factor);
  }
  s.compute->set_grouped_gemm_impl(s.config.grouped_gemm);  // UsageError on the cpu backend
  s.compute->set_attention_impl(s.config.attention_impl);   // UsageError: cudnn where there is none
  if (s.config.precision == Precision::fp8) {
    // UsageError where the device has no FP8 tensor cores.
    s.compute->set_linear_precision(LinearPrecision::fp8);
    s.compute->set_fp8_recipe(s.config.fp8_recipe);  // UsageError where the GPU cannot run it
  }
  // Bad system files and calibration reports fail here, on every rank, before any step.
  ExpectedInputs expected = expected_inputs(o, s.config);
  s.system = std::move(expected.system);
  s.calibration = std::move(expected.calibration);
  if (rt.rank() == 0) s.out_lock = check_destinations(o);
  return s;
}

// What the memory check weighs an estimate against, on this rank: the memory free now, after the
// communicator exists, so it already lacks what the CUDA context and NCCL's connection buffers
// (allocated by its warm-up) took; the ranks whose tensors live in the same memory (a real host's
// memory, or one GPU that ranks share with --comm mpi), who all see it free before any allocates
// and so must fit together; and the --verify reference where rank 0 is (an equal per-rank share
// would refuse whenever the reference outgrows one share). Collective.
struct MemoryBudget {
  double available = 0;
  long sharing = 1;
  bool with_reference = false;
  double reference = 0;          // the --verify reference's step, in the compute's memory
  double reference_results = 0;  // its results, FP32, in rank 0's host memory
  double reserved = 0;           // the backend's own, not yet allocated
  bool host = true;              // the compute's memory is the host's
  double need(const MemoryEstimate& per_rank) const {
    return (per_rank.total() + reserved) * static_cast<double>(sharing) +
           (with_reference ? reference + (host ? reference_results : 0.0) : 0.0);
  }
};
MemoryBudget memory_budget(const Setup& s, MpiRuntime& rt) {
  const std::size_t bpe = dtype_size(s.compute->activation_dtype());
  MemoryBudget b;
  const std::vector<std::string> domains =
      rt.all_gather(rt.host() + " " + s.compute->memory_domain());
  const std::string& mine = domains[static_cast<std::size_t>(rt.rank())];
  b.sharing = static_cast<long>(std::count(domains.begin(), domains.end(), mine));
  b.with_reference = s.config.verify && domains.front() == mine;
  if (s.config.verify) {
    const VerifyCost v = estimate_verify_cost(s.config, bpe);
    b.reference = v.reference_step_bytes;
    b.reference_results = v.reference_results_bytes;
  }
  b.host = s.compute->memory_is_host();
  b.reserved = static_cast<double>(s.compute->reserved_bytes());
  b.available = static_cast<double>(s.compute->memory_available_bytes());
  return b;
}

// --fp8-weight-copies auto: kept, unless some rank fits only without the copies; the same on every
// rank, and on the backend. Collective.
void resolve_weight_copies(Setup& s, const MemoryBudget& b, MpiRuntime& rt) {
  RunConfig& c = s.config;
  if (c.fp8_weight_copies == Fp8WeightCopies::automatic) {
    const std::size_t bpe = dtype_size(s.compute->activation_dtype());
    RunConfig kept = c, none = c;
    kept.fp8_weight_copies = Fp8WeightCopies::kept;
    none.fp8_weight_copies = Fp8WeightCopies::per_gemm;
    const bool only_without = c.precision == Precision::fp8 &&
                              b.need(estimate_memory(kept, bpe)) > b.available &&
                              b.need(estimate_memory(none, bpe)) <= b.available;
    c.fp8_weight_copies = rt.allreduce_max(only_without ? 1.0 : 0.0) > 0 ? Fp8WeightCopies::per_gemm
                                                                         : Fp8WeightCopies::kept;
  }
  s.compute->set_fp8_weight_copies(c.fp8_weight_copies != Fp8WeightCopies::per_gemm);
  s.memory = estimate_memory(c, dtype_size(s.compute->activation_dtype()));
}

// UsageError when the run's estimate does not fit the memory budget.
void check_memory(const Setup& s, const MemoryBudget& b) {
  const double need = b.need(s.memory);
  std::string scope = " per rank";
  if (b.sharing > 1) {
    scope = " for the " + std::to_string(b.sharing) + " ranks sharing this " +
            (s.compute->memory_is_host() ? "host" : "GPU");
  }
  if (b.with_reference && !b.host) {
    // The reference's results stay in rank 0's host memory while every rank takes its slices.
    const double host = static_cast<double>(host_memory_available_bytes());
    if (b.reference_results > host) {
      throw UsageError("--verify: the single-process reference's results need an estimated " +
                       format_gib(b.reference_results) + " of rank 0's host memory but " +
                       format_gib(host) +
                       " is available; verify fewer --layers, a smaller --global-batch or "
                       "--seq-len, or a model with fewer experts (see `moebench plan --verify`)");
    }
  }
  if (need > b.available) {
    throw UsageError("this configuration needs an estimated " + format_gib(need) + scope +
                     (b.with_reference ? " (with the --verify reference)" : "") + " but " +
                     format_gib(b.available) +
                     " is available; use fewer --layers, a smaller --seq-len or --micro-batch, a "
                     "larger --ep, --recompute, or --fp8-weight-copies per-gemm (see `moebench "
                     "plan`)");
  }
}

// Ranks agree before anything runs: a bad file on one node must not hang the others. The first
// failing rank says why; the others end quietly with the same exit code.
void agree(MpiRuntime& rt, const std::string& problem) {
  const int first_bad = static_cast<int>(rt.allreduce_min(problem.empty() ? rt.size() : rt.rank()));
  if (first_bad < rt.size()) {
    if (rt.rank() == first_bad) throw UsageError(problem);
    throw Error(ExitCode::usage, "");
  }
}

std::string usage_problem(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

RunMeta make_meta(const CliOptions& o, const RunConfig& c, const MpiRuntime& rt,
                  const std::string& start) {
  RunMeta m;
  m.tool_version = kToolVersion;
  m.git_sha = git_sha();
  m.git_dirty = git_dirty();
  m.argv = o.argv;
  m.start_time = start;
  for (const std::string& h : rt.all_hosts()) {
    if (std::find(m.hosts.begin(), m.hosts.end(), h) == m.hosts.end()) m.hosts.push_back(h);
  }
  m.mpi_library = MpiRuntime::library_version();
  m.backend = to_string(c.backend);
  m.comm = to_string(c.comm);
  m.blas = blas_library_name();
  if (c.backend == ComputeBackend::cpu) m.blas_core = blas_core();
  m.build_type = MOEBENCH_BUILD_TYPE;
  m.compiler = std::string("g++ ") + __VERSION__;
  m.environment = recorded_environment(environ);
  return m;
}

// Gathers every rank's samples to rank 0 and summarises them there.
RunResults gather_results(const MpiRuntime& rt, const Topology& topo,
                          const std::vector<StepSample>& samples, const RunConfig& c,
                          const StackAccounting& inst) {
  constexpr std::size_t kHead = 3;  // node, local rank, pipeline stage
  std::vector<double> mine = {static_cast<double>(topo.node), static_cast<double>(topo.local_rank),
                              static_cast<double>(topo.group(Group::pipeline).rank)};
  for (const StepSample& s : samples) {
    const std::vector<double> f = flatten(s);
    mine.insert(mine.end(), f.begin(), f.end());
  }
  const std::vector<double> all = rt.gather_to_root(mine);
  const std::vector<std::string> hosts = rt.all_hosts();
  if (rt.rank() != 0) return {};
  std::vector<RankSamples> ranks;
  for (int r = 0; r < rt.size(); ++r) {
    const double* p = all.data() + static_cast<std::size_t>(r) * mine.size();
    RankSamples rs;
    rs.rank = r;
    rs.host = hosts[r];
    rs.node = static_cast<int>(p[0]);
    rs.local_rank = static_cast<int>(p[1]);
    rs.stage = static_cast<int>(p[2]);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      rs.steps.push_back(unflatten(p + kHead + i * kSampleDoubles));
    }
    ranks.push_back(std::move(rs));
  }
  // Per GPU: the global batch's tokens and FLOPs over the world (Megatron's TFLOP/s per GPU).
  return summarize_run(ranks, static_cast<double>(tokens_per_step(c)) / c.layout.world,
                       inst.flops_per_step / c.layout.world);
}

// The peak of the bytes the step's tensors take, from before the step is built to the last timed
// step, the --verify reference (built and dropped between them) left out.
class StepMemory {
 public:
  explicit StepMemory(Compute& c)
      : c_(c), base_(c.allocation_stats().live_bytes), resident_(resident_memory().now_bytes) {
    // On a GPU: what the context, the libraries and the communicator took before the step.
    if (const std::optional<DeviceInfo> d = c.device_info()) {
      device_ = static_cast<double>(d->total_memory_bytes - c.memory_available_bytes());
    }
    c.reset_allocation_peak();
  }
  void pause() { peak_ = std::max(peak_, c_.allocation_stats().peak_bytes); }
  void resume() { c_.reset_allocation_peak(); }
  double peak_bytes() {
    pause();
    return static_cast<double>(peak_ - base_);
  }
  double resident_baseline_bytes() const { return resident_; }
  double device_baseline_bytes() const { return device_; }  // -1: no device

 private:
  Compute& c_;
  std::int64_t base_;
  double resident_;
  double device_ = -1;
  std::int64_t peak_ = 0;
};

// The memory model's side of the report: its estimate of the step's tensors per pipeline rank.
MemoryRecord modelled_memory(const RunConfig& c, const Compute& compute) {
  MemoryRecord m;
  m.recompute = recompute_names(c.workload.recompute);
  const std::size_t bpe = dtype_size(compute.activation_dtype());
  // What the activations would be without the recompute and with every input in storage
  // precision: activation_bytes_saved is what --recompute and --fp8-saved-inputs save together.
  ActivationPolicy plain = run_policy(c);
  plain.recompute = Recompute{};
  plain.fp8_saved_inputs = false;
  const std::vector<StageMemory> with = estimate_stage_memory(c, bpe);
  const std::vector<StageMemory> without = estimate_stage_memory(c, bpe, plain);
  double largest = -1;
  for (std::size_t i = 0; i < with.size(); ++i) {
    m.estimate_bytes.push_back(with[i].memory.tensors());
    if (with[i].memory.tensors() > largest) {
      largest = with[i].memory.tensors();
      m.activation_bytes = with[i].memory.activations;
      m.activation_bytes_without_recompute = without[i].memory.activations;
    }
  }
  return m;
}

// Every rank's measured peak on rank 0, into `m` per pipeline rank. Collective.
void gather_memory(const MpiRuntime& rt, const Topology& topo, StepMemory& measured,
                   MemoryRecord& m) {
  const std::vector<double> mine = {static_cast<double>(topo.group(Group::pipeline).rank),
                                    measured.peak_bytes(), measured.resident_baseline_bytes(),
                                    resident_memory().peak_bytes, measured.device_baseline_bytes()};
  const std::vector<double> all = rt.gather_to_root(mine);
  if (rt.rank() != 0) return;
  m.measured = true;
  m.measured_peak_bytes.assign(m.estimate_bytes.size(), 0.0);
  for (std::size_t r = 0; r < all.size() / mine.size(); ++r) {
    const double* p = all.data() + r * mine.size();
    double& peak = m.measured_peak_bytes[static_cast<std::size_t>(p[0])];
    peak = std::max(peak, p[1]);
    m.resident_baseline_bytes = std::max(m.resident_baseline_bytes, p[2]);
    m.resident_peak_bytes = std::max(m.resident_peak_bytes, p[3]);
    m.device_baseline_bytes = std::max(m.device_baseline_bytes, p[4]);
  }
}

// The kernels the compute backend ran so far, their counts, and the libraries loaded.
void refresh_kernels(RunMeta& m, const Compute& compute) {
  m.gemm_path = compute.gemm_path();
  m.grouped_gemm_path = compute.grouped_gemm_path();
  m.attention_path = compute.attention_path();
  m.kernel_calls = compute.kernel_calls();
  m.loaded_libraries =
      loaded_libraries({"libcudnn", "libnvrtc", "libcublas", "libcudart", "libnccl", "libopenblas",
                        "libscipy_openblas", "libblas", "libmpi"});
}

// Everything of the report that does not depend on the steps, gathered before them: once a rank
// has failed, nothing more can be gathered.
RunRecord make_record(const CliOptions& o, const Setup& s, const MpiRuntime& rt,
                      const Compute& compute, const std::string& start) {
  const RunConfig& c = s.config;
  RunRecord record;
  record.meta = make_meta(o, c, rt, start);
  record.meta.devices = gather_device_records(rt, compute);
  refresh_kernels(record.meta, compute);
  record.config = c;
  record.topology = s.topo;
  record.full_model =
      account_full_model(c.model, c.workload.seq_len, static_cast<double>(tokens_per_step(c)));
  record.instantiated = account_instantiated(c);
  record.collective_bytes = collective_bytes(c, dtype_size(compute.activation_dtype()));
  record.memory = s.memory;
  record.measured_memory = modelled_memory(c, compute);
  return record;
}

// --health-mad and --health-min-slowdown, with the backend's default.
HealthThresholds health_thresholds(const CliOptions& o, const RunConfig& c) {
  const double fallback = c.backend == ComputeBackend::cpu ? kHostMinSlowdown : kDeviceMinSlowdown;
  return {o.health_mad, o.health_min_slowdown.value_or(fallback)};
}

// How often the background sampler reads a GPU during the timed steps.
constexpr double kTelemetryIntervalS = 0.1;

// This rank's GPU telemetry over the timed steps: a reading before, the sampler during, a
// reading after. Nothing on a host backend or without NVML (note() says why).
class Telemetry {
 public:
  explicit Telemetry(const Compute& compute) {
    const std::optional<DeviceInfo> gpu = compute.device_info();
    if (!gpu) {
      note_ = "the " + compute.name() + " backend has no GPU telemetry";
      return;
    }
    gpu_ = NvmlGpu::open(gpu->pci_bus_id, note_);
    if (gpu_) sampler_.emplace(*gpu_, kTelemetryIntervalS);
  }
  void start() {
    if (!gpu_) return;
    data_.start = gpu_->read(0);
    sampler_->start();
  }
  void stop() {
    if (!gpu_ || stopped_) return;
    stopped_ = true;
    data_.during = sampler_->stop();
    data_.end = gpu_->read(data_.during.empty() ? 0 : data_.during.back().t_s);
  }
  bool available() const { return gpu_ != nullptr; }
  const std::string& note() const { return note_; }
  GpuTelemetrySummary summary(int rank) {
    data_.rank = rank;
    return summarize_telemetry(data_);
  }

 private:
  std::unique_ptr<NvmlGpu> gpu_;
  std::optional<TelemetrySampler> sampler_;
  GpuTelemetry data_;
  std::string note_;
  bool stopped_ = false;
};

// Every rank's telemetry summary on rank 0, and its flags added to the health check's suspects.
// Collective.
void gather_telemetry(const MpiRuntime& rt, Telemetry& t, RunRecord& record) {
  record.telemetry_interval_s = kTelemetryIntervalS;
  if (!rt.all_true(t.available())) {
    // Telemetry from every GPU or none: the first rank without it says why, and which rank it
    // is where the others have telemetry or another reason.
    const std::vector<std::string> notes = rt.gather_strings_to_root(t.note());
    const auto first =
        std::find_if(notes.begin(), notes.end(), [](const std::string& n) { return !n.empty(); });
    if (first == notes.end()) return;
    record.telemetry_note = *first;
    if (std::count(notes.begin(), notes.end(), *first) != static_cast<long>(notes.size())) {
      record.telemetry_note += " (rank " + std::to_string(first - notes.begin()) +
                               "; telemetry is kept only when every GPU has it)";
    }
    return;
  }
  const std::vector<double> all = rt.gather_to_root(flatten(t.summary(rt.rank())));
  if (rt.rank() != 0) return;
  std::vector<Suspect> flagged;
  for (int r = 0; r < rt.size(); ++r) {
    const GpuTelemetrySummary s = unflatten_telemetry(all.data() + r * kTelemetryDoubles);
    for (const TelemetryFlag& f : telemetry_flags(s)) {
      Suspect x;
      x.rank = s.rank;
      x.metric = f.metric;
      x.value = f.value;
      x.reason = f.reason;
      flagged.push_back(x);
    }
    record.telemetry.push_back(s);
  }
  add_suspects(record.health, flagged, record.results.per_rank);
}

// What the steps left, for the report, read by rank 0's stop watcher thread while the steps run:
// the step loop changes it, and the watcher copies it, under `mutex`.
struct Progress {
  std::mutex mutex;
  std::vector<StepSample> samples;      // this rank's timed steps
  std::vector<double> slowest_times_s;  // each timed step's slowest rank, as agreed after it
  int steps_run = 0;                    // every kind
  std::string in_step;                  // "timed step 3 of 10", for the messages
  // For rank 0's lines inside long steps (StepTicker): the step under way, when it started, and
  // when the console last had a line.
  PassProgress step;
  bool stepping = false;
  Clock::time_point step_start{};
  Clock::time_point last_line{};
};

// A thread that calls `poll` every `period` until stop() (or `poll` returns false): rank 0's
// watchers beside the steps.
class PollingThread {
 public:
  void start(std::chrono::milliseconds period, std::function<bool()> poll) {
    thread_ = std::thread([this, period, poll = std::move(poll)] {
      while (!done_.load() && poll()) std::this_thread::sleep_for(period);
    });
  }
  ~PollingThread() { stop(); }
  void stop() {
    done_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Rank 0's line every kTickS while a step runs longer, saying where rank 0 is in it, so that a
// long step and a hung one look different before the step's own line (a step of the published
// recipes' size takes minutes on a few CPU cores).
class StepTicker {
 public:
  static constexpr double kTickS = 5;
  StepTicker(bool active, Progress& progress, const TrainingStep& step) {
    if (!active) return;
    thread_.start(std::chrono::milliseconds(100), [&progress, &step] {
      std::lock_guard<std::mutex> lock(progress.mutex);
      const Clock::time_point now = Clock::now();
      if (!progress.stepping ||
          std::chrono::duration<double>(now - progress.last_line).count() < kTickS) {
        return true;
      }
      const TrainingStep::Position at = step.position();
      PassProgress p = progress.step;
      p.since_start_s = std::chrono::duration<double>(now - progress.step_start).count();
      p.done = at.done;
      p.passes = at.passes;
      p.current = at.current;
      std::cout << format_pass_line(p) << std::flush;
      progress.last_line = now;
      return true;
    });
  }
  void stop() { thread_.stop(); }

 private:
  PollingThread thread_;
};

// The step's gradient buckets, counted per group into the results.
void count_grad_buckets(RunResults& results, const std::vector<GradBucket>& buckets) {
  for (const GradBucket& b : buckets) {
    ++(b.group == ParamGroup::dense ? results.grad_buckets_dense : results.grad_buckets_expert);
  }
}

// Rank 0's report of a run that failed: its own samples, the agreed step times, and why.
// Written at most once; nothing without --out, and only a line when no timed step finished.
class FailureReport {
 public:
  FailureReport(const CliOptions& o, const RunRecord& base, const Topology& topo,
                Progress& progress, const std::vector<GradBucket>& buckets)
      : o_(o), base_(base), topo_(topo), progress_(progress), buckets_(buckets) {}

  // Rank 0's report of the steps that finished, as `state` ("failed" or "interrupted"); written
  // once, unless `replace` (a later, more precise account of the same stop). Thread-safe: the
  // stop watcher and the step loop may both call it.
  void write(const std::string& error, const std::string& signal,
             const std::string& state = "failed", bool replace = false) {
    std::lock_guard<std::mutex> once(mutex_);
    if ((written_ && !replace) || o_.out.empty()) return;
    written_ = true;
    std::vector<StepSample> samples;
    std::vector<double> slowest;
    {
      std::lock_guard<std::mutex> lock(progress_.mutex);
      samples = progress_.samples;
      slowest = progress_.slowest_times_s;
    }
    const std::size_t n = samples.size();
    RunRecord r = base_;
    const RunConfig& c = r.config;
    RankSamples own{0,
                    r.meta.hosts.empty() ? std::string() : r.meta.hosts.front(),
                    topo_.node,
                    topo_.local_rank,
                    topo_.group(Group::pipeline).rank,
                    samples};
    r.results =
        summarize_own(own, slowest, static_cast<double>(tokens_per_step(c)) / c.layout.world,
                      r.instantiated.flops_per_step / c.layout.world);
    count_grad_buckets(r.results, buckets_);
    r.state = state;
    r.signal = signal;
    r.error = error;
    r.steps_completed = static_cast<int>(n);
    r.ranks_reporting = 1;
    r.health = find_stragglers({}, health_thresholds(o_, c));
    r.health.note = "the run failed: only rank 0's own figures were kept, nothing to compare";
    try {
      // Where --out cannot take it, a fallback does (write_report says where).
      if (write_report(o_, make_run_report(r).dump(2) + "\n")) return;
      if (n == 0) {
        std::cerr << "moebench: no timed step finished before the " << state_noun(state)
                  << "; the report " << o_.out << " says so (status " << state << ", 0 steps)\n";
      } else {
        std::cerr << "moebench: the report of the " << n << " timed steps that finished is "
                  << o_.out << " (status " << state << ", rank 0's own phases)\n";
      }
    } catch (const std::exception& e) {
      std::cerr << "moebench: could not write the failed run's report: " << e.what() << "\n";
    }
  }

 private:
  static const char* state_noun(const std::string& state) {
    return state == "interrupted" ? "signal" : "failure";
  }
  const CliOptions& o_;
  const RunRecord& base_;
  const Topology& topo_;
  Progress& progress_;
  const std::vector<GradBucket>& buckets_;
  std::mutex mutex_;
  bool written_ = false;
};

// Rank 0's watch for SIGTERM and SIGINT while the steps run: the report of the finished steps is
// written within a poll of the signal (interrupted, rank 0's own figures), before a launcher's
// SIGKILL can come (mpirun sends it a second after its SIGTERM, whatever the step's length).
// A step that still ends normally replaces it with the whole report.
class StopWatcher {
 public:
  StopWatcher(bool active, FailureReport& failure, Progress& progress) {
    if (!active) return;
    thread_.start(std::chrono::milliseconds(10), [&failure, &progress] {
      const int sig = stop_signal();
      if (sig == 0) return true;
      std::string in_step;
      {
        std::lock_guard<std::mutex> lock(progress.mutex);
        in_step = progress.in_step;
      }
      failure.write(signal_name(sig) + " arrived in " + in_step +
                        ", before it finished: the report keeps the timed steps that had "
                        "(rank 0's own figures) and is replaced by the whole report if the "
                        "step still ends",
                    signal_name(sig), "interrupted");
      return false;
    });
  }
  void stop() { thread_.stop(); }

 private:
  PollingThread thread_;
};

// How long a rank other than 0 that timed out waits before ending the job, so that rank 0,
// whose own wait ends about as late, writes the failed run's report first.
double failure_grace_s(double timeout_s) {
  return std::min(5.0, timeout_s);
}

}  // namespace

int run_command(const CliOptions& o, MpiRuntime& rt) {
  const std::string start = iso_time_utc();
  // From the start: a signal during the set-up (stdout piped into `head`, which has exited) stops
  // the run after its first step with the interrupted report, rather than killing it silently.
  clear_stop_signal();
  install_stop_handlers();
  Setup s;
  agree(rt, usage_problem([&] { s = prepare(o, rt); }));

  const RunConfig& c = s.config;
  if (rt.rank() == 0) {
    for (const std::string& w : c.warnings) std::cerr << "moebench: warning: " << w << "\n";
    if (c.backend == ComputeBackend::cpu) {
      if (const std::string w = blas_fallback_warning(); !w.empty()) {
        std::cerr << "moebench: warning: " << w << "\n";
      }
    }
  }
  rt.set_timeout(c.comm_timeout_s);
  Compute& compute = *s.compute;
  std::unique_ptr<Communicator> comm =
      make_communicator(c.comm, rt.world(), s.topo, compute, c.comm_timeout_s);
  const MemoryBudget budget = memory_budget(s, rt);
  resolve_weight_copies(s, budget, rt);
  agree(rt, usage_problem([&] { check_memory(s, budget); }));
  if (c.inject) comm = make_fault_communicator(std::move(comm), compute, *c.inject);
  DomainRecord domains;
  NvlinkDomains found = find_nvlink_domains(rt, compute, c.layout.nvlink_domain_size, s.topo.node);
  domains.source = std::move(found.source);
  domains.of_rank = std::move(found.of_rank);
  domains.warnings = straddling_expert_groups(c.layout.grid(), domains.of_rank);
  comm->set_domains(domains.of_rank);
  StepMemory step_memory(compute);
  TrainingStep step(c, s.topo, compute, *comm);
  step.initialize();
  RunRecord record = make_record(o, s, rt, compute, start);
  record.domains = domains;
  record.meta.comm_ordering = comm->lane_ordering();
  if (rt.rank() == 0) {
    for (const std::string& w : domains.warnings) std::cerr << "moebench: warning: " << w << "\n";
  }
  {
    // Every rank's place, printed before the first step (nccl-tests' device list).
    const std::vector<std::string> places =
        rt.all_gather(std::to_string(getpid()) + " " + std::to_string(s.topo.local_rank));
    const std::vector<std::string> hosts = rt.all_hosts();
    if (rt.rank() == 0 && !o.quiet) {
      std::vector<RankPlace> ranks;
      for (int r = 0; r < rt.size(); ++r) {
        RankPlace p;
        p.rank = r;
        p.host = hosts[static_cast<std::size_t>(r)];
        std::sscanf(places[static_cast<std::size_t>(r)].c_str(), "%ld %d", &p.pid, &p.local_rank);
        ranks.push_back(p);
      }
      std::cout << format_device_list(ranks, record.meta.devices) << std::flush;
    }
  }

  std::optional<StepLog> log;
  // Every rank learns whether rank 0 could open it (a link or FIFO planted since the check).
  agree(rt, usage_problem([&] {
          if (rt.rank() == 0) log.emplace(step_log_path(o), c, record.instantiated.flops_per_step);
        }));
  Progress progress;
  FailureReport failure(o, record, s.topo, progress, step.grad_buckets());
  // A signal while a wait stays blocked: the report the watcher wrote gets what rank 0 was
  // waiting for (the launcher may be ending the job because a peer died; the ranks cannot tell
  // that from Ctrl-C or scancel). Either way the step will still end and the full report replace
  // it, or the job ends here.
  if (rt.rank() == 0) {
    set_stopped_wait_hook([&](const std::string& waiting_for) {
      std::string in_step;
      {
        std::lock_guard<std::mutex> lock(progress.mutex);
        in_step = progress.in_step;
      }
      failure.write(signal_name(stop_signal()) + " arrived while rank 0 waited for " + waiting_for +
                        ", in " + in_step +
                        "; the job ended before every rank finished the step (the launcher "
                        "stopped it: Ctrl-C, scancel or a time limit, or a peer died or hung)",
                    signal_name(stop_signal()), "interrupted", true);
    });
  }
  StopWatcher watcher(rt.rank() == 0 && !o.out.empty(), failure, progress);
  StepTicker ticker(rt.rank() == 0 && !o.quiet, progress, step);
  if (rt.rank() == 0 && !o.quiet) {
    // Before the first step ends: how long a step should take, from its first pass.
    step.set_pass_observer([&](int pass, double since_start_s) {
      if (pass != 0) return;
      std::lock_guard<std::mutex> lock(progress.mutex);
      if (progress.steps_run == 0) {
        std::cout << format_step_estimate(since_start_s, step.shape()) << std::flush;
        progress.last_line = Clock::now();
      }
    });
  }
  int stop = 0;  // the signal any rank received, agreed after each step
  const int total_steps = (c.verify ? 1 : 0) + c.warmup + c.steps;
  // One step, its slowest rank's time logged; a wait past --timeout names the step it was in.
  const auto run_step = [&](const char* kind, int index, int of) {
    {
      std::lock_guard<std::mutex> lock(progress.mutex);
      progress.in_step =
          std::string(kind) + " step " + std::to_string(index + 1) + " of " + std::to_string(of);
      PassProgress& p = progress.step;
      p.overall = progress.steps_run + 1;
      p.total = total_steps;
      p.kind = kind;
      p.index = index;
      p.of = of;
      p.shape = step.shape();
      progress.stepping = true;
      progress.step_start = progress.last_line = Clock::now();
    }
    try {
      StepSample sample = step.run();
      // One reduction: the slowest rank's step time, and any rank's stop signal.
      double agreed[2] = {sample.step_time_s, static_cast<double>(stop_signal())};
      rt.allreduce_max(agreed);
      stop = static_cast<int>(agreed[1]);
      std::lock_guard<std::mutex> lock(progress.mutex);
      progress.stepping = false;
      progress.last_line = Clock::now();
      ++progress.steps_run;
      if (log) {
        const StepProgress p =
            log->progress(kind, index, of, progress.steps_run, total_steps, agreed[0]);
        log->add(p);
        // A long run and a hung one look different: a line per step, as it ends.
        if (!o.quiet) std::cout << format_step_line(p) << std::flush;
      }
      if (std::string_view(kind) == "timed") {
        progress.samples.push_back(sample);
        progress.slowest_times_s.push_back(agreed[0]);
      }
    } catch (const TimeoutError& e) {
      throw TimeoutError(std::string(e.what()) + ", in " + progress.in_step);
    }
  };
  VerificationResult verification;
  Telemetry telemetry(compute);
  try {
    if (c.verify) {
      run_step("verify", 0, 1);
      step_memory.pause();  // the reference's tensors are not the step's
      if (stop == 0) verification = verify_step(c, s.topo, rt, compute, step);
      step_memory.resume();
      step.initialize();  // the timed steps start from the same state either way
    }
    for (int i = 0; i < c.warmup && stop == 0; ++i) run_step("warmup", i, c.warmup);
    comm->reset_domain_traffic();  // the timed steps' traffic only
    telemetry.start();
    for (int i = 0; i < c.steps && stop == 0; ++i) run_step("timed", i, c.steps);
    telemetry.stop();
  } catch (const Error& e) {
    watcher.stop();
    ticker.stop();
    set_stopped_wait_hook(nullptr);
    // Rank 0 writes what it has; the others give it the time to, then the job ends (main).
    if (rt.rank() != 0 && e.code() != ExitCode::timeout) throw;
    std::cerr << "moebench: error on rank " << rt.rank() << " (host " << rt.host()
              << "): " << e.what() << "\n"
              << std::flush;
    if (rt.rank() == 0) {
      failure.write(e.what(), stop_signal() != 0 ? signal_name(stop_signal()) : "");
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(failure_grace_s(c.comm_timeout_s)));
    }
    throw Error(e.code(), "");  // said above
  }
  // The early report, if any, is on disk before the whole one replaces it.
  watcher.stop();
  ticker.stop();
  step.set_pass_observer(nullptr);
  set_stopped_wait_hook(nullptr);
  const std::vector<StepSample>& samples = progress.samples;
  if (stop != 0 && samples.empty()) {
    if (rt.rank() == 0) {
      std::cerr << "moebench: interrupted by " << signal_name(stop) << " after "
                << progress.steps_run << " steps, before any timed step finished"
                << (o.out.empty() ? "" : "; the report says so (0 steps)")
                << " (the step log has them)\n";
    }
    return static_cast<int>(ExitCode::interrupted);
  }

  record.results = gather_results(rt, s.topo, samples, c, record.instantiated);
  gather_memory(rt, s.topo, step_memory, record.measured_memory);
  {
    const Communicator::DomainTraffic t = comm->domain_traffic();
    const double per = static_cast<double>(c.layout.world) * static_cast<double>(samples.size());
    record.domains.in_domain_bytes = rt.allreduce_sum(t.in_domain_bytes) / per;
    record.domains.cross_domain_bytes = rt.allreduce_sum(t.cross_domain_bytes) / per;
  }
  count_grad_buckets(record.results, step.grad_buckets());
  record.verification = verification;
  record.steps_completed = static_cast<int>(samples.size());
  record.ranks_reporting = c.layout.world;
  if (rt.rank() == 0) {
    record.health = find_stragglers(record.results.per_rank, health_thresholds(o, c));
  }
  gather_telemetry(rt, telemetry, record);
  // Which kernels ran and how often, now that the steps have run (make_record took them before,
  // for a report of a run that fails), and the libraries they loaded on the way.
  refresh_kernels(record.meta, compute);
  if (stop != 0) {
    record.state = "interrupted";
    record.signal = signal_name(stop);
  }

  bool elsewhere = false;  // the report went to a fallback: --out could not take it
  if (rt.rank() == 0) {
    // The expected times on the system given, or on the one the GPUs name.
    std::optional<SystemSpec> system = s.system;
    if (!system && c.backend != ComputeBackend::cpu && !record.meta.devices.empty()) {
      std::string why;
      system = detected_system(record.meta.devices.front().info.name, c, &why);
      if (!why.empty()) std::cerr << "moebench: note: no expected times: " << why << "\n";
    }
    if (system) {
      record.expected = expected_for_run(record, *system, efficiencies_for(*system),
                                         s.calibration ? &*s.calibration : nullptr);
    }
    if (!o.quiet) std::cout << format_run_table(record) << format_health(record) << std::flush;
    if (!o.out.empty()) {
      elsewhere = write_report(o, make_run_report(record).dump(2) + "\n");
      if (!o.quiet && !elsewhere) std::cout << "# report: " << o.out << "\n" << std::flush;
    }
  }
  // Every rank ends with the same code: rank 0 alone wrote the report.
  elsewhere = rt.allreduce_max(elsewhere ? 1.0 : 0.0) > 0;
  if (stop != 0) {
    if (rt.rank() == 0) {
      std::cerr << "moebench: interrupted by " << signal_name(stop) << " after " << samples.size()
                << " of " << c.steps << " timed steps; the report says so\n";
    }
    if (!(c.verify && verification.enabled && !verification.passed)) {
      return static_cast<int>(ExitCode::interrupted);
    }
  }
  if (c.verify && !verification.passed) {
    if (rt.rank() == 0) {
      std::cerr << "moebench: verification failed: " << verification.mismatches << " of "
                << verification.compared
                << " values differ from the single-process reference beyond tolerance\n";
      // One line per tensor that differs, also under --quiet.
      for (const TensorCheck& t : verification.tensors) {
        if (t.mismatches == 0) continue;
        std::cerr << "moebench: verification failed: " << t.name << ": " << t.mismatches << " of "
                  << t.compared << " wrong (max abs error " << t.max_abs_error << ", "
                  << t.nonfinite << " not finite)\n";
      }
    }
    return static_cast<int>(ExitCode::verification);
  }
  // Rank 0 alone judged the ranks: it tells the others (every rank has the same flags).
  if (o.health_gate &&
      rt.allreduce_max(rt.rank() == 0 && !record.health.suspects.empty() ? 1.0 : 0.0) > 0) {
    if (rt.rank() == 0) {
      std::cerr << "moebench: --health-gate: " << record.health.suspect_ranks()
                << " suspect rank(s) on " << record.health.nodes.size()
                << " node(s); the report's health section names them\n";
      // One line per culprit, also under --quiet: a CI log must say which rank and host.
      for (const std::string& line : suspect_lines(record)) {
        std::cerr << "moebench: --health-gate: suspect " << line << "\n";
      }
    }
    return static_cast<int>(ExitCode::health);
  }
  return elsewhere ? static_cast<int>(ExitCode::report_elsewhere) : 0;
}

}  // namespace moebench
