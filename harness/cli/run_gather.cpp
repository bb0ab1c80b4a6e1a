#include "harness/cli/run_gather.hpp"

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

extern char** environ;

namespace moebench::run_parts {

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
  record.full_model = account_full_model(
      c.model, c.workload.seq_len, static_cast<double>(tokens_per_step(c)), c.workload.recompute);
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

void count_grad_buckets(RunResults& results, const std::vector<GradBucket>& buckets) {
  for (const GradBucket& b : buckets) {
    ++(b.group == ParamGroup::dense ? results.grad_buckets_dense : results.grad_buckets_expert);
  }
}

}  // namespace moebench::run_parts
