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
#include "harness/cli/run_gather.hpp"
#include "harness/cli/run_outputs.hpp"
#include "harness/cli/run_setup.hpp"
#include "harness/cli/run_watch.hpp"
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

using namespace run_parts;

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
  Compute& compute = *s.compute;
  std::unique_ptr<Communicator> comm = connect_and_check_memory(s, rt);
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
