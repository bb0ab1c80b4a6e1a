// `moebench accept`: the acceptance ladder in one job (docs/accept.md). Every rank goes through
// the stages in order: its inventory, its GEMM, attention and memory rates, every link, the
// collectives (accept_stages.hpp); the MoE step, verified against the single-process reference,
// with per-rank health; silent data corruption (the same step twice, the data-parallel replicas'
// parameters, the same GEMM repeated); the burn-in (--duration). Rank 0 judges what the ranks
// measured (accept_checks.hpp) and writes accept.json, accept.md, junit.xml and drain.txt, also
// when a rank hangs or a stop signal comes (accept_watch.hpp); the exit code is 9 when a check
// failed.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <numeric>
#include <thread>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/backends/fault/fault_communicator.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/cli/accept_burnin.hpp"
#include "harness/cli/accept_checks.hpp"
#include "harness/cli/accept_collectives.hpp"
#include "harness/cli/accept_dcgm.hpp"
#include "harness/cli/accept_figures.hpp"
#include "harness/cli/accept_nvml.hpp"
#include "harness/cli/accept_outputs.hpp"
#include "harness/cli/accept_probes.hpp"
#include "harness/cli/accept_stages.hpp"
#include "harness/cli/accept_transport.hpp"
#include "harness/cli/accept_watch.hpp"
#include "harness/cli/commands.hpp"
#include "harness/cli/link_pairs.hpp"
#include "harness/cli/run_gather.hpp"
#include "harness/cli/run_setup.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/core/stop_request.hpp"
#include "harness/core/version.hpp"
#include "harness/device/device_records.hpp"
#include "harness/device/nvlink_domains.hpp"
#include "harness/measure/stats.hpp"
#include "harness/systems/efficiencies.hpp"
#include "harness/verify/reference_check.hpp"
#include "workloads/config/run_config.hpp"

namespace moebench {

using namespace run_parts;

namespace {

// The step stage's expert parallelism unless --ep is given: every rank, as far as the experts
// divide (the all-to-all then crosses every node).
void default_ep(CliOptions& o, int world) {
  if (!o.workload.recipe.empty() || o.workload.ep != 1) return;
  const RunConfig probe = resolve_run_config(o, world);
  o.workload.ep = std::gcd(world, static_cast<int>(probe.model.n_routed_experts));
}

}  // namespace

int accept_command(const CliOptions& given, MpiRuntime& rt) {
  const std::string start = iso_time_utc();
  clear_stop_signal();
  install_stop_handlers();
  CliOptions o = given;
  o.verify = true;
  const AcceptOptions& a = o.accept;
  Setup s;
  SiteFigures site;
  agree(rt, usage_problem([&] {
          if (!a.floors.empty()) site = read_floors(a.floors);
          if (!a.baseline.empty()) site = read_baseline(a.baseline);
          default_ep(o, rt.size());
          const bool host = o.workload.backend == ComputeBackend::cpu;
          o.health_min_slowdown = a.min_slowdown.value_or(host ? 1.0 : 0.1);
          s = prepare(o, rt);
          check_site_comparable(site, a.gemm_n.value_or(host ? 1024 : 8192),
                                to_string(s.config.backend));
          if (rt.rank() == 0) check_accept_destination(a.out, "--out");
        }));
  const RunConfig& c = s.config;
  Compute& compute = *s.compute;
  // NCCL's log of the transports it uses, asked for before it starts (nccl_log.hpp).
  std::optional<NcclLogRequest> nccl_log;
  if (c.comm == CommBackend::nccl) nccl_log.emplace();
  std::unique_ptr<Communicator> comm = connect_and_check_memory(s, rt);
  // A slow link (the link stage's exchanges) and a hang (the step stage's steps) are the
  // communicator's faults.
  if (c.inject &&
      (c.inject->kind == FaultSpec::Kind::slowlink || c.inject->kind == FaultSpec::Kind::hang)) {
    comm = make_fault_communicator(std::move(comm), compute, *c.inject);
  }
  const bool host = compute.memory_is_host();
  const double min_slowdown = a.min_slowdown.value_or(host ? 1.0 : 0.1);
  AcceptResult result;
  std::optional<SystemSpec> system = s.system;
  AcceptJob job{o, a, c, s, rt, compute, *comm, site, result, system, host, min_slowdown};
  const auto say = [&](const std::string& line) { job.say(line); };
  const auto add = [&](const std::vector<AcceptCheck>& more) { job.add(more); };
  auto stage_start = Clock::now();
  const std::int64_t n = a.gemm_n.value_or(host ? 1024 : 8192);
  const auto meta = [&](const AcceptResult& r) {
    return nlohmann::ordered_json{{"tool_version", kToolVersion},
                                  {"git_sha", git_sha()},
                                  {"argv", o.argv},
                                  {"start_time", start},
                                  {"backend", to_string(c.backend)},
                                  {"system", system ? system->name : std::string("none")},
                                  {"world", rt.size()},
                                  {"nodes", r.node_names.size()},
                                  {"floor", a.floor},
                                  {"min_slowdown", min_slowdown},
                                  {"gemm_n", n},
                                  {"duration_s", a.duration_s},
                                  {"inject", c.inject ? to_string(*c.inject) : std::string()}};
  };
  std::string stage_now = "inventory";
  // Rank 0's files of what `base`'s finished stages found, with the stage in flight (`stage`; ""
  // between stages) marked stopped and the failing checks that say why. Its caller holds
  // watch.files().
  const auto write_partial = [&](const AcceptResult& base, const nlohmann::ordered_json& m,
                                 const std::string& stage, double stage_s,
                                 const std::vector<AcceptCheck>& why) {
    AcceptResult partial = base;
    if (!stage.empty()) partial.stages.push_back({stage, stage_s, true});
    partial.checks.insert(partial.checks.end(), why.begin(), why.end());
    write_accept_outputs(a.out, partial, m);
    say((stage.empty() ? "stopped between stages" : "stopped in stage " + stage) + ": " +
        std::to_string(drain_lines(partial).size()) + " node(s) to drain; FAIL (" + a.out +
        "/accept.json, accept.md, junit.xml, drain.txt)");
  };
  // A stop signal's files within a poll of it, from the last published state (accept_watch.hpp).
  AcceptWatch watch(rt.rank() == 0,
                    [&](const AcceptResult& finished, const nlohmann::ordered_json& m,
                        const std::string& stage, double stage_s, const AcceptCheck& why) {
                      write_partial(finished, m, stage, stage_s, {why});
                    });
  // Only copies cross to the watch's thread: the result, and the meta (which names the system
  // the gpu stage may detect meanwhile).
  const auto publish = [&](const std::string& in_flight) {
    if (rt.rank() == 0) watch.publish(result, meta(result), in_flight, stage_start);
  };
  // After each stage every rank agrees on a pending stop signal (Slurm's time limit, scancel):
  // the stages after it do not run.
  const auto end_stage = [&](const std::string& name, bool check_stop = true) {
    const double t = seconds_since(stage_start);
    result.stages.push_back({name, t});
    say(name + " done in " + strprintf("%.1f", t) + " s");
    stage_start = Clock::now();
    publish("");
    if (!check_stop) return;
    if (const int sig = static_cast<int>(rt.allreduce_max(static_cast<double>(stop_signal())))) {
      throw Error(ExitCode::interrupted, signal_name(sig) + " arrived in stage " + name +
                                             ": the stages after it did not run");
    }
  };
  const auto begin_stage = [&](const std::string& name) {
    stage_now = name;
    publish(name);
  };
  const auto write_stopped = [&](const std::vector<AcceptCheck>& why, bool in_flight) {
    std::lock_guard<std::mutex> lock(watch.files());
    write_partial(result, meta(result), in_flight ? stage_now : std::string(),
                  seconds_since(stage_start), why);
  };
  // A signal while a wait is blocked (a launcher's SIGTERM before its SIGKILL): the files at
  // once, replaced if the stage still ends.
  set_stopped_wait_hook([&](const std::string& waiting_for) {
    if (rt.rank() != 0 || result.ranks.empty()) return;
    write_stopped({cluster_check("interrupted", stage_now, "fail",
                                 signal_name(stop_signal()) + " arrived in stage " + stage_now +
                                     " while waiting for " + waiting_for +
                                     ": the stages after it did not run")},
                  true);
  });
  // The hook refers to this function's state: gone with it, however the function ends.
  struct HookReset {
    ~HookReset() { set_stopped_wait_hook(nullptr); }
  } hook_reset;
  // This rank's GPU as NVML names it: its CUDA device's PCI bus id, else (a host backend) the
  // node's GPU of its local index, as the NVML stand-in numbers them.
  const std::optional<DeviceInfo> device = compute.device_info();
  const NvmlGpuId gpu_id =
      device ? NvmlGpuId{device->pci_bus_id, -1} : NvmlGpuId{std::string(), s.topo.local_rank};
  try {
    // The stages of accept_stages.hpp, then the step's, which share one training step.
    const std::vector<DeviceRecord> devices = run_inventory(job, gpu_id);
    end_stage("inventory");

    begin_stage("gpu");
    const GemmProbe gemm = run_gpu_stage(job, n, devices);  // its checksums join stage 5's
    end_stage("gpu");
    begin_stage("links");
    run_links(job);
    end_stage("links");
    begin_stage("collectives");
    run_collectives(job, nccl_log ? &*nccl_log : nullptr);
    end_stage("collectives");

    // 4. The MoE step: verified, then timed, with per-rank health.
    begin_stage("step");
    TrainingStep step(c, s.topo, compute, *comm);
    step.initialize();
    RunRecord record = make_record(o, s, rt, compute, start);
    step.run();
    const VerificationResult verification = verify_step(c, s.topo, rt, compute, step);
    step.initialize();
    std::vector<StepSample> samples;
    for (int i = 0; i < o.warmup; ++i) step.run();
    for (int i = 0; i < o.steps; ++i) samples.push_back(step.run());
    record.results = gather_results(rt, s.topo, samples, c, record.instantiated);
    if (rt.rank() == 0) {
      add({verification_check(verification)});
      add(health_checks(result.ranks,
                        find_stragglers(record.results.per_rank, health_thresholds(o, c))));
    }
    end_stage("step");

    // 5. Silent data corruption: the same step from the same state twice, the replicas'
    // parameters after it, and the GEMM's repeats (stage 2, and the burn-in's).
    begin_stage("sdc");
    step.initialize();
    step.run();
    const std::vector<std::uint64_t> first = parameter_sums(compute, step);
    step.initialize();
    step.run();
    const std::vector<std::uint64_t> second = parameter_sums(compute, step);
    const int pp_rank = s.topo.group(Group::pipeline).rank;
    const int ep_rank = s.topo.group(Group::expert).rank;
    const std::vector<std::vector<std::uint64_t>> step_sums =
        gather_sums(rt, {first[0], second[0], first[1], second[1]});
    const std::vector<std::string> places =
        rt.all_gather(std::to_string(pp_rank) + " " + std::to_string(ep_rank));
    if (rt.rank() == 0) add(step_sdc_checks(result.ranks, step_sums, places));
    end_stage("sdc");

    // 6. Burn-in (--duration): the GEMM probe and a training step, round after round, until the
    // time is up on every rank (the slowest rank's clock decides, so every rank runs as many
    // rounds); each round's rate, step time and checksums kept.
    std::vector<std::uint64_t> all_sums = gemm.sums;
    std::vector<double> burn_rates, burn_steps;
    int burn_stopped = 0;  // a stop signal every rank saw during the burn-in
    std::optional<BurninTelemetry> telemetry;
    if (a.duration_s > 0) {
      begin_stage("burnin");
      const auto begin = Clock::now();
      telemetry.emplace(gpu_id);
      telemetry->start();
      for (double elapsed = 0; elapsed < a.duration_s;) {
        const GemmProbe p = probe_gemm(compute, n, 2);
        burn_rates.push_back(p.flops_per_s);
        all_sums.insert(all_sums.end(), p.sums.begin(), p.sums.end());
        burn_steps.push_back(step.run().step_time_s);
        telemetry->end_round();
        double agreed[2] = {seconds_since(begin), static_cast<double>(stop_signal())};
        rt.allreduce_max(std::span<double>(agreed, 2));
        elapsed = agreed[0];
        burn_stopped = static_cast<int>(agreed[1]);
        if (burn_stopped) break;  // the rounds that finished are judged, then the job stops
      }
      telemetry->stop();
      end_stage("burnin", false);
    }
    const BurninTelemetryAll gpus = telemetry
                                        ? gather_burnin_telemetry(rt, *telemetry, burn_rates.size())
                                        : BurninTelemetryAll{};
    const std::vector<std::vector<std::uint64_t>> gemm_sums = gather_sums(rt, all_sums);
    const std::vector<double> burn = rt.gather_to_root(burn_rates);
    const std::vector<double> burn_time = rt.gather_to_root(burn_steps);
    if (rt.rank() == 0) {
      std::vector<std::string> sku_group;
      for (const AcceptRank& x : result.ranks) sku_group.push_back(x.sku);
      add(judge_checksums("sdc_gemm", "sdc",
                          strprintf("the same %lldx%lldx%lld GEMM%s", static_cast<long long>(n),
                                    static_cast<long long>(n), static_cast<long long>(n),
                                    a.duration_s > 0 ? " (and through the burn-in)" : ""),
                          result.ranks, gemm_sums, sku_group));
      if (a.duration_s > 0) {
        BurnIn b;
        b.duration_s = a.duration_s;
        b.rounds = static_cast<int>(burn_rates.size());
        for (int r = 0; r < rt.size(); ++r) {
          const auto at = static_cast<std::ptrdiff_t>(r) * b.rounds;
          b.gemm_rate.emplace_back(burn.begin() + at, burn.begin() + at + b.rounds);
          b.step_time_s.emplace_back(burn_time.begin() + at, burn_time.begin() + at + b.rounds);
        }
        add(judge_drift("burnin_gemm_drift", "FLOP/s", result.ranks, b.gemm_rate, min_slowdown,
                        !host));
        for (std::size_t r = 0; r < gpus.rounds.size(); ++r) {
          b.telemetry.push_back(gpus.available[r] ? std::optional(gpus.rounds[r]) : std::nullopt);
        }
        b.telemetry_note = gpus.note();
        add(judge_burnin_telemetry(result.ranks, gpus, a.duration_s));
        result.burnin = std::move(b);
      }
    }
    if (burn_stopped) {
      throw Error(ExitCode::interrupted, signal_name(burn_stopped) +
                                             " arrived in the burn-in after " +
                                             std::to_string(burn_rates.size()) +
                                             " rounds, which are judged; the rest did not run");
    }
  } catch (const TimeoutError& e) {
    // A rank stopped answering: rank 0 writes what the finished stages found, with the silent
    // ranks' failure, and ends the job (exit 9); the others wait for that.
    set_stopped_wait_hook(nullptr);
    watch.stop();  // what follows replaces its files: none of its may come after
    const std::vector<int> silent = rt.silent_ranks(std::min(c.comm_timeout_s, 60.0));
    if (rt.rank() != 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(c.comm_timeout_s + 120));
      throw;
    }
    if (result.ranks.empty()) throw;  // stopped before anyone was known: nothing to report
    write_stopped(hang_checks(result.ranks, silent, stage_now, e.what()), true);
    rt.abort(static_cast<int>(ExitCode::acceptance));
  } catch (const Error& e) {
    // A stop signal: agreed after a stage (every rank here), or a wait that gave up on it.
    set_stopped_wait_hook(nullptr);
    watch.stop();
    if (e.code() != ExitCode::interrupted) throw;
    const bool in_flight = result.stages.empty() || result.stages.back().name != stage_now;
    if (rt.rank() == 0 && !result.ranks.empty()) {
      write_stopped({cluster_check("interrupted", stage_now, "fail", e.what())}, in_flight);
    }
    if (rt.rank() == 0) std::cerr << "moebench: accept: " << e.what() << "\n";
    return static_cast<int>(ExitCode::interrupted);
  }
  set_stopped_wait_hook(nullptr);
  watch.stop();

  int failed = 0;
  if (rt.rank() == 0) {
    failed = write_accept_outputs(a.out, result, meta(result));
    say(std::to_string(result.checks.size()) + " checks, " + std::to_string(failed) + " failed; " +
        std::to_string(drain_lines(result).size()) + " node(s) to drain; " +
        (result.passed() ? "PASS" : "FAIL") + " (" + a.out + "/accept.json, accept.md, " +
        "junit.xml, drain.txt)");
  }
  return rt.allreduce_max(failed > 0 ? 1.0 : 0.0) > 0 ? static_cast<int>(ExitCode::acceptance) : 0;
}

}  // namespace moebench
