// What `moebench run` gathers for its report: the run's meta, every rank's samples, memory and
// telemetry on rank 0, the kernels that ran (run_command.cpp drives it).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/cli/options.hpp"
#include "harness/cli/prediction.hpp"
#include "harness/cli/run_setup.hpp"
#include "harness/compute/compute.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/host.hpp"
#include "harness/device/telemetry.hpp"
#include "harness/measure/health.hpp"
#include "harness/output/output_lock.hpp"
#include "harness/output/run_record.hpp"
#include "harness/output/table.hpp"
#include "harness/parallel/topology.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "harness/systems/systems.hpp"
#include "workloads/accounting/memory_model.hpp"
#include "workloads/config/run_config.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench::run_parts {

RunMeta make_meta(const CliOptions& o, const RunConfig& c, const MpiRuntime& rt,
                  const std::string& start);

// Gathers every rank's samples to rank 0 and summarises them there.
RunResults gather_results(const MpiRuntime& rt, const Topology& topo,
                          const std::vector<StepSample>& samples, const RunConfig& c,
                          const StackAccounting& inst);

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
MemoryRecord modelled_memory(const RunConfig& c, const Compute& compute);

// Every rank's measured peak on rank 0, into `m` per pipeline rank. Collective.
void gather_memory(const MpiRuntime& rt, const Topology& topo, StepMemory& measured,
                   MemoryRecord& m);

// The kernels the compute backend ran so far, their counts, and the libraries loaded.
void refresh_kernels(RunMeta& m, const Compute& compute);

// Everything of the report that does not depend on the steps, gathered before them: once a rank
// has failed, nothing more can be gathered.
RunRecord make_record(const CliOptions& o, const Setup& s, const MpiRuntime& rt,
                      const Compute& compute, const std::string& start);

// --health-mad and --health-min-slowdown, with the backend's default.
HealthThresholds health_thresholds(const CliOptions& o, const RunConfig& c);

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
    gpu_ = NvmlGpu::open({gpu->pci_bus_id, -1}, note_);
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
void gather_telemetry(const MpiRuntime& rt, Telemetry& t, RunRecord& record);

// The step's gradient buckets, counted per group into the results.
void count_grad_buckets(RunResults& results, const std::vector<GradBucket>& buckets);

}  // namespace moebench::run_parts
