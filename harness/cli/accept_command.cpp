// `moebench accept`: the acceptance ladder in one job (docs/accept.md). Every rank goes through
// the stages in order: its inventory; its GEMM and memory rates at the model's sizes; every
// link to every other rank; the MoE
// step, verified against the single-process reference, with per-rank health; silent data
// corruption (the same step twice, the data-parallel replicas' parameters, the same GEMM
// repeated). Rank 0 judges what the ranks measured (accept_checks.hpp) and writes accept.json,
// accept.md, junit.xml and drain.txt; the exit code is 9 when a check failed.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <set>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/cli/accept_checks.hpp"
#include "harness/cli/commands.hpp"
#include "harness/cli/link_pairs.hpp"
#include "harness/cli/run_gather.hpp"
#include "harness/cli/run_setup.hpp"
#include "harness/core/human.hpp"
#include "harness/core/version.hpp"
#include "harness/device/device_records.hpp"
#include "harness/device/nvlink_domains.hpp"
#include "harness/measure/stats.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/schema.hpp"
#include "harness/systems/efficiencies.hpp"
#include "harness/verify/reference_check.hpp"
#include "workloads/config/run_config.hpp"

namespace moebench {

using namespace run_parts;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Seconds of this rank's own work: its thread's CPU time on the host, where ranks share cores
// and a wall clock would time the neighbours too; the wall clock around a synchronised device.
class WorkClock {
 public:
  explicit WorkClock(Compute& c) : c_(c), host_(c.memory_is_host()) {}
  double now() {
    if (!host_) {
      c_.synchronize();
      return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    }
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }

 private:
  Compute& c_;
  bool host_;
};

std::uint64_t checksum(Compute& c, const Mat& m) {
  std::vector<float> host(static_cast<std::size_t>(m.rows * m.cols));
  c.download(m, host.data());
  return fnv1a(host.data(), host.size() * sizeof(float));
}

// The GEMM probe: the same n x n x n GEMM on the same inputs (the same seed on every rank),
// `repeats` times: its rate (the median repeat's) and each result's checksum.
struct GemmProbe {
  double flops_per_s = 0;
  std::vector<std::uint64_t> sums;
};
GemmProbe probe_gemm(Compute& c, std::int64_t n, int repeats) {
  Tensor a = c.alloc(n, n, DType::f32), b = c.alloc(n, n, DType::f32),
         out = c.alloc(n, n, DType::f32);
  c.fill_random(a.view(), 20261205, 0, 1.0f);
  c.fill_random(b.view(), 20261205, 1, 1.0f);
  c.gemm(false, false, 1.0f, a.view(), b.view(), 0.0f, out.view());  // untimed: plans, caches
  WorkClock clock(c);
  GemmProbe p;
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = clock.now();
    c.gemm(false, false, 1.0f, a.view(), b.view(), 0.0f, out.view());
    times.push_back(clock.now() - t0);
    p.sums.push_back(checksum(c, out.view()));
  }
  p.flops_per_s = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) /
                  std::max(1e-9, median(times));
  return p;
}

// A streaming copy's rate: bytes read and written over the median repeat's time.
double probe_memory(Compute& c, std::int64_t floats, int repeats) {
  Tensor a = c.alloc(1, floats, DType::f32), b = c.alloc(1, floats, DType::f32);
  c.fill(a.view(), 1.0f);
  c.copy(a.view(), b.view());
  WorkClock clock(c);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = clock.now();
    c.copy(a.view(), b.view());
    times.push_back(clock.now() - t0);
  }
  return 2.0 * 4.0 * static_cast<double>(floats) / std::max(1e-9, median(times));
}

// The checksums of this rank's parameters after a step: dense, then the experts'.
std::vector<std::uint64_t> parameter_sums(Compute& c, const TrainingStep& step) {
  return {checksum(c, step.params().flat_params(ParamGroup::dense)),
          checksum(c, step.params().flat_params(ParamGroup::expert))};
}

// Every rank's checksums on rank 0 (each rank gives as many), exactly: each 64-bit value as two
// 32-bit halves, which a double holds exactly (a string gather would cut a long list short).
std::vector<std::vector<std::uint64_t>> gather_sums(const MpiRuntime& rt,
                                                    const std::vector<std::uint64_t>& mine) {
  std::vector<double> halves;
  for (std::uint64_t x : mine) {
    halves.push_back(static_cast<double>(x >> 32));
    halves.push_back(static_cast<double>(x & 0xffffffffULL));
  }
  const std::vector<double> all = rt.gather_to_root(halves);
  std::vector<std::vector<std::uint64_t>> out;
  if (rt.rank() != 0) return out;
  for (int r = 0; r < rt.size(); ++r) {
    std::vector<std::uint64_t> sums;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      const std::size_t at = static_cast<std::size_t>(r) * halves.size() + 2 * k;
      sums.push_back((static_cast<std::uint64_t>(all[at]) << 32) |
                     static_cast<std::uint64_t>(all[at + 1]));
    }
    out.push_back(sums);
  }
  return out;
}

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
  CliOptions o = given;
  o.verify = true;
  const AcceptOptions& a = o.accept;
  Setup s;
  agree(rt, usage_problem([&] {
          default_ep(o, rt.size());
          const bool host = o.workload.backend == ComputeBackend::cpu;
          o.health_min_slowdown = a.min_slowdown.value_or(host ? 1.0 : 0.1);
          s = prepare(o, rt);
          if (rt.rank() == 0) {
            fs::create_directories(a.out);
            for (const char* f : {"accept.json", "accept.md", "junit.xml", "drain.txt"}) {
              ensure_writable_destination((fs::path(a.out) / f).string(), "--out");
            }
          }
        }));
  const RunConfig& c = s.config;
  Compute& compute = *s.compute;
  std::unique_ptr<Communicator> comm = connect_and_check_memory(s, rt);
  const bool host = compute.memory_is_host();
  const double min_slowdown = a.min_slowdown.value_or(host ? 1.0 : 0.1);
  const auto say = [&](const std::string& line) {
    if (rt.rank() == 0 && !o.quiet) std::cout << "# accept: " << line << "\n" << std::flush;
  };
  AcceptResult result;
  auto stage_start = Clock::now();
  const auto end_stage = [&](const std::string& name) {
    const double t = std::chrono::duration<double>(Clock::now() - stage_start).count();
    result.stages.push_back({name, t});
    say(name + " done in " + strprintf("%.1f", t) + " s");
    stage_start = Clock::now();
  };

  // 1. Inventory: who each rank is and what it runs.
  const std::vector<DeviceRecord> devices = gather_device_records(rt, compute);
  std::string sku,
      software = "moebench " + std::string(kToolVersion) + ", " + MpiRuntime::library_version();
  if (const std::optional<DeviceRecord> d = local_device_record(compute, rt.rank(), rt.host())) {
    sku = d->info.name;
    software += ", driver " + d->driver_version + ", CUDA " + d->info.runtime_version + ", NCCL " +
                d->nccl_version;
  } else {
    const BlasCore core = blas_core();
    sku = "cpu (" + (core.name.empty() ? std::string("BLAS") : core.name) + ")";
    software += ", BLAS core " + core.name;
  }
  const std::vector<std::string> skus = rt.all_gather(sku);
  const std::vector<std::string> softwares = rt.all_gather(software);
  const std::vector<std::string> nodes = rt.all_gather(std::to_string(s.topo.node));
  const std::vector<std::string> hosts = rt.all_hosts();
  for (int r = 0; r < rt.size(); ++r) {
    const std::size_t i = static_cast<std::size_t>(r);
    result.ranks.push_back({r, std::stoi(nodes[i]), hosts[i], skus[i], softwares[i]});
  }
  result.node_names = node_names(result.ranks);
  end_stage("inventory");

  // 2. Each GPU: the GEMM rate (its repeats' checksums kept for stage 5) and memory bandwidth.
  const std::int64_t n = a.gemm_n.value_or(host ? 1024 : 8192);
  const GemmProbe gemm = probe_gemm(compute, n, a.sdc_repeats);
  const double memory =
      probe_memory(compute, host ? (std::int64_t{8} << 20) : (std::int64_t{256} << 20), 5);
  const std::vector<double> rates = rt.gather_to_root({gemm.flops_per_s, memory});
  end_stage("gpu");

  // 3. Links: every pair of ranks, each link against its class's median (linkcheck's rule).
  const PairMeasurement links =
      measure_pairs(*comm, compute, rt, all_pairs_rounds(rt.size()),
                    host ? (std::int64_t{4} << 20) : (std::int64_t{64} << 20), 8, host ? 5 : 10);
  const NvlinkDomains domains =
      find_nvlink_domains(rt, compute, c.layout.nvlink_domain_size, s.topo.node);
  end_stage("links");

  // 4. The MoE step: verified, then timed, with per-rank health.
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
  HealthResult health;
  if (rt.rank() == 0) health = find_stragglers(record.results.per_rank, health_thresholds(o, c));
  end_stage("step");

  // 5. Silent data corruption: the same step from the same state twice, the replicas'
  // parameters after it, and the GEMM's repeats (stage 2).
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
  end_stage("sdc");

  // 6. Burn-in (--duration): the GEMM probe and a training step, round after round, until the
  // time is up on every rank (the slowest rank's clock decides, so every rank runs as many
  // rounds); each round's rate, step time and checksums kept.
  std::vector<std::uint64_t> all_sums = gemm.sums;
  std::vector<double> burn_rates, burn_steps;
  if (a.duration_s > 0) {
    const auto begin = Clock::now();
    for (double elapsed = 0; elapsed < a.duration_s;) {
      const GemmProbe p = probe_gemm(compute, n, 2);
      burn_rates.push_back(p.flops_per_s);
      all_sums.insert(all_sums.end(), p.sums.begin(), p.sums.end());
      burn_steps.push_back(step.run().step_time_s);
      elapsed = rt.allreduce_max(std::chrono::duration<double>(Clock::now() - begin).count());
    }
    end_stage("burnin");
  }
  const std::vector<std::vector<std::uint64_t>> gemm_sums = gather_sums(rt, all_sums);
  const std::vector<double> burn = rt.gather_to_root(burn_rates);
  const std::vector<double> burn_time = rt.gather_to_root(burn_steps);

  int failed = 0;
  if (rt.rank() == 0) {
    // The SKU's expected figures: the system's peak and bandwidth x the generation's
    // efficiencies, as `predict` prices them.
    std::optional<SystemSpec> system = s.system;
    if (!system && host) system = find_system("cpu");
    if (!system && !devices.empty()) {
      std::string why;
      system = detected_system(devices.front().info.name, c, &why);
    }
    RateSpec g{"gemm_rate", "gpu", "FLOP/s", "", std::nullopt, false, a.floor, min_slowdown};
    RateSpec m{"memory_bandwidth", "gpu", "bytes/s", "",
               std::nullopt,       false, a.floor,   min_slowdown};
    if (system) {
      const Hardware hw = hardware_for(*system, c);
      const Efficiencies& e = efficiencies_for(*system).values;
      g.expected = hw.gemm_flops * e.dense_gemm;
      m.expected = hw.memory_bandwidth * e.memory;
      g.nominal = m.nominal = system->generation == "cpu";
      g.source = "system " + system->name + ": peak " + to_string(c.precision) + " x the " +
                 system->generation + " dense-GEMM efficiency (moebench predict's)";
      m.source = "system " + system->name + ": memory bandwidth x the " + system->generation +
                 " memory efficiency";
    }
    std::vector<double> gemm_rates, memory_rates;
    for (int r = 0; r < rt.size(); ++r) {
      gemm_rates.push_back(rates[2 * static_cast<std::size_t>(r)]);
      memory_rates.push_back(rates[2 * static_cast<std::size_t>(r) + 1]);
    }
    std::vector<AcceptCheck>& checks = result.checks;
    const auto add = [&](std::vector<AcceptCheck> more) {
      checks.insert(checks.end(), more.begin(), more.end());
    };
    add(judge_inventory(result.ranks));
    add(judge_rates(g, result.ranks, gemm_rates));
    add(judge_rates(m, result.ranks, memory_rates));
    LinkPlacement placement;
    for (const AcceptRank& r : result.ranks) placement.node.push_back(r.node);
    placement.domain = domains.of_rank;
    add(judge_links(result.ranks, links.samples,
                    analyse_links(links.samples, placement,
                                  {6.0, host ? kHostLinkMinSlowdown : kDeviceMinSlowdown})));
    AcceptCheck v;
    v.name = "verification";
    v.stage = "step";
    v.status = verification.passed ? "pass" : "fail";
    v.measured = static_cast<double>(verification.mismatches);
    v.expected = 0;
    v.unit = "values";
    v.reason = std::to_string(verification.mismatches) + " of " +
               std::to_string(verification.compared) +
               " values differ from the single-process reference beyond tolerance";
    checks.push_back(v);
    const std::set<int> suspects = [&] {
      std::set<int> out;
      for (const Suspect& x : health.suspects) out.insert(x.rank);
      return out;
    }();
    for (const AcceptRank& r : result.ranks) {
      AcceptCheck h;
      h.name = "health";
      h.stage = "step";
      h.rank = r.rank;
      h.node = r.node;
      h.status = suspects.contains(r.rank) ? "fail" : "pass";
      h.reason = "rank " + std::to_string(r.rank) + " on " + r.host + ": ";
      for (const Suspect& x : health.suspects) {
        if (x.rank == r.rank && x.metric == kComputeMetric) h.reason += x.reason;
      }
      if (h.status == "pass") {
        h.reason += health.ranks_compared > 0 ? "its step's compute in line with its stage's"
                                              : "not compared (" + health.note + ")";
      }
      checks.push_back(h);
    }
    std::vector<std::vector<std::uint64_t>> twice, dense, expert, repeats;
    std::vector<std::string> dense_group, expert_group, sku_group;
    for (int r = 0; r < rt.size(); ++r) {
      const std::size_t i = static_cast<std::size_t>(r);
      const std::vector<std::uint64_t>& x = step_sums[i];
      twice.push_back({x[0] ^ x[2], x[1] ^ x[3]});  // one value a run of the step
      dense.push_back({x[0]});
      expert.push_back({x[2]});
      repeats.push_back(gemm_sums[i]);
      const std::string pp = places[i].substr(0, places[i].find(' '));
      dense_group.push_back("pipeline stage " + pp);
      expert_group.push_back("pipeline stage " + pp + ", expert slot " +
                             places[i].substr(places[i].find(' ') + 1));
      sku_group.push_back(result.ranks[i].sku);
    }
    // Each rank against itself only: a group of one per rank.
    std::vector<std::string> own;
    for (int r = 0; r < rt.size(); ++r) own.push_back("rank " + std::to_string(r));
    add(judge_checksums("sdc_same_step", "sdc", "the same step from the same state", result.ranks,
                        twice, own));
    add(judge_checksums("sdc_replicas", "sdc", "its dense parameters after the step", result.ranks,
                        dense, dense_group));
    add(judge_checksums("sdc_replicas", "sdc", "its experts' parameters after the step",
                        result.ranks, expert, expert_group));
    add(judge_checksums("sdc_gemm", "sdc",
                        strprintf("the same %lldx%lldx%lld GEMM%s", static_cast<long long>(n),
                                  static_cast<long long>(n), static_cast<long long>(n),
                                  a.duration_s > 0 ? " (and through the burn-in)" : ""),
                        result.ranks, repeats, sku_group));
    if (a.duration_s > 0) {
      BurnIn b;
      b.duration_s = a.duration_s;
      b.rounds = static_cast<int>(burn_rates.size());
      for (int r = 0; r < rt.size(); ++r) {
        const auto at = static_cast<std::ptrdiff_t>(r) * b.rounds;
        b.gemm_rate.emplace_back(burn.begin() + at, burn.begin() + at + b.rounds);
        b.step_time_s.emplace_back(burn_time.begin() + at, burn_time.begin() + at + b.rounds);
      }
      add(judge_drift("burnin_gemm_drift", "FLOP/s", result.ranks, b.gemm_rate, min_slowdown));
      result.burnin = std::move(b);
    }

    nlohmann::ordered_json meta = {{"tool_version", kToolVersion},
                                   {"git_sha", git_sha()},
                                   {"argv", o.argv},
                                   {"start_time", start},
                                   {"backend", to_string(c.backend)},
                                   {"system", system ? system->name : std::string("none")},
                                   {"world", rt.size()},
                                   {"nodes", result.node_names.size()},
                                   {"floor", a.floor},
                                   {"min_slowdown", min_slowdown},
                                   {"gemm_n", n},
                                   {"duration_s", a.duration_s},
                                   {"inject", c.inject ? to_string(*c.inject) : std::string()}};
    const nlohmann::ordered_json doc = accept_json(result, meta);
    const std::vector<std::string> errors =
        schema_errors(nlohmann::json(doc), load_schema("accept.schema.json"));
    MB_CHECK(errors.empty(), "accept.json does not match accept.schema.json: " << errors.front());
    const fs::path dir(a.out);
    write_file_atomically((dir / "accept.json").string(), doc.dump(2) + "\n");
    write_file_atomically((dir / "accept.md").string(), accept_markdown(result, meta));
    write_file_atomically((dir / "junit.xml").string(), junit_xml(result));
    std::string drain;
    for (const std::string& line : drain_lines(result)) drain += line + "\n";
    write_file_atomically((dir / "drain.txt").string(), drain);
    for (const AcceptCheck& x : checks) {
      if (x.status == "fail") {
        ++failed;
        std::cerr << "moebench: accept FAIL: " << x.name << ": " << x.reason << "\n";
      }
    }
    say(std::to_string(checks.size()) + " checks, " + std::to_string(failed) + " failed; " +
        std::to_string(drain_lines(result).size()) + " node(s) to drain; " +
        (result.passed() ? "PASS" : "FAIL") + " (" + a.out + "/accept.json, accept.md, " +
        "junit.xml, drain.txt)");
  }
  return rt.allreduce_max(failed > 0 ? 1.0 : 0.0) > 0 ? static_cast<int>(ExitCode::acceptance) : 0;
}

}  // namespace moebench
