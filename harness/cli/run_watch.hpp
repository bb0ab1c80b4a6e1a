// What watches `moebench run`'s steps beside them on rank 0: the progress they left, a line inside
// a long step, the report of a run that failed or was signalled (run_command.cpp drives them).
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
#include "harness/cli/run_gather.hpp"
#include "harness/cli/run_outputs.hpp"
#include "harness/compute/compute.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/host.hpp"
#include "harness/core/polling_thread.hpp"
#include "harness/core/stop_request.hpp"
#include "harness/device/telemetry.hpp"
#include "harness/measure/health.hpp"
#include "harness/measure/summary.hpp"
#include "harness/output/output_lock.hpp"
#include "harness/output/run_record.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/table.hpp"
#include "harness/parallel/topology.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "harness/systems/systems.hpp"
#include "workloads/accounting/memory_model.hpp"
#include "workloads/config/run_config.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench::run_parts {

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

}  // namespace moebench::run_parts
