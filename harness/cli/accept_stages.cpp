#include "harness/cli/accept_stages.hpp"

#include <algorithm>
#include <cstdlib>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/backends/fault/fault_communicator.hpp"
#include "harness/cli/accept_collectives.hpp"
#include "harness/cli/accept_dcgm.hpp"
#include "harness/cli/accept_nvml.hpp"
#include "harness/cli/accept_transport.hpp"
#include "harness/cli/link_pairs.hpp"
#include "harness/cli/nccl_log.hpp"
#include "harness/cli/prediction.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/core/version.hpp"
#include "harness/device/nvlink_domains.hpp"
#include "harness/device/nvml_inventory.hpp"
#include "harness/measure/links.hpp"
#include "harness/systems/efficiencies.hpp"

namespace moebench {

using namespace run_parts;

namespace {

// --dcgm: each node's file (FILE with %h its name) read and parsed; a node whose file cannot be
// read or is not DCGM's is a finding (its error kept), unless no node's is: bad input.
void read_dcgm_files(const std::string& pattern, const std::vector<std::string>& nodes,
                     std::vector<std::optional<DcgmDiag>>& diags,
                     std::vector<std::string>& errors) {
  if (pattern.find("%h") == std::string::npos && nodes.size() > 1) {
    throw UsageError("--dcgm " + pattern + " is one node's results and this job has " +
                     std::to_string(nodes.size()) +
                     " nodes: put %h in the path for each node's file (e.g. dcgm-%h.json)");
  }
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const std::string path = dcgm_path(pattern, nodes[k]);
    try {
      const std::string text = read_regular_file(path, "give --dcgm dcgmi diag -j output");
      diags[k] = parse_dcgm(nlohmann::json::parse(text));
    } catch (const std::exception& e) {
      errors[k] = std::string(e.what()).find(path) == 0 ? e.what() : path + ": " + e.what();
    }
  }
  if (std::none_of(diags.begin(), diags.end(), [](const auto& d) { return d.has_value(); })) {
    throw UsageError("--dcgm " + errors.front());
  }
}

// `spec` with the site's figures where --floors or --baseline gives them (each SKU's own; every
// SKU of the run has one: check_site_skus), else as it is (the system's).
RateSpec site_spec(const RateSpec& spec, const SiteFigures& site,
                   const std::vector<AcceptRank>& ranks) {
  if (site.value.count(spec.name) == 0) return spec;
  RateSpec x = spec;
  x.expected.reset();
  x.nominal = false;
  x.source = site.source;
  if (site.floors) x.floor = 1.0;
  for (const AcceptRank& r : ranks) x.expected_by_sku[r.sku] = *site_value(site, x.name, r.sku);
  return x;
}

}  // namespace

std::vector<DeviceRecord> run_inventory(AcceptJob& job, const NvmlGpuId& gpu_id) {
  const std::vector<DeviceRecord> devices = gather_device_records(job.rt, job.compute);
  std::string sku,
      software = "moebench " + std::string(kToolVersion) + ", " + MpiRuntime::library_version();
  if (const std::optional<DeviceRecord> d =
          local_device_record(job.compute, job.rt.rank(), job.rt.host())) {
    sku = d->info.name;
    software += ", driver " + d->driver_version + ", CUDA " + d->info.runtime_version + ", NCCL " +
                d->nccl_version;
  } else {
    const BlasCore core = blas_core();
    sku = "cpu (" + (core.name.empty() ? std::string("BLAS") : core.name) + ")";
    software += ", BLAS core " + core.name;
  }
  if (job.c.inject && job.c.inject->kind == FaultSpec::Kind::version &&
      job.c.inject->rank == job.rt.rank()) {
    software += ", injected: a different build";
  }
  const NvmlRead nvml = read_nvml_inventory(gpu_id);
  const std::vector<std::string> nvml_all =
      job.rt.gather_strings_to_root(nvml.gpu ? to_json(*nvml.gpu).dump() : std::string());
  const std::vector<std::string> skus = job.rt.all_gather(sku);
  const std::vector<std::string> softwares = job.rt.gather_strings_to_root(software);
  const std::vector<std::string> nodes = job.rt.all_gather(std::to_string(job.s.topo.node));
  // A node's name is Slurm's where the job runs under Slurm (what drain.txt's scontrol lines
  // and --nodes need), else its host name.
  const char* slurm_name = std::getenv("SLURMD_NODENAME");
  const std::vector<std::string> hosts =
      job.rt.all_gather(slurm_name != nullptr && *slurm_name != '\0' ? slurm_name : job.rt.host());
  for (int r = 0; r < job.rt.size(); ++r) {
    const std::size_t i = static_cast<std::size_t>(r);
    job.result.ranks.push_back({r, std::stoi(nodes[i]), hosts[i], skus[i],
                                job.rt.rank() == 0 ? softwares[i] : std::string()});
  }
  job.result.node_names = node_names(job.result.ranks);
  // --dcgm: each node's results, read and parsed before any work (none usable: bad input).
  std::vector<std::optional<DcgmDiag>> dcgm(job.result.node_names.size());
  std::vector<std::string> dcgm_errors(job.result.node_names.size());
  agree(job.rt, usage_problem([&] {
          check_site_skus(job.site, skus);
          if (job.rt.rank() == 0 && !job.a.dcgm.empty()) {
            read_dcgm_files(job.a.dcgm, job.result.node_names, dcgm, dcgm_errors);
          }
        }));
  if (job.rt.rank() == 0) {
    job.add(judge_inventory(job.result.ranks));
    std::vector<std::optional<NvmlInventory>> gpus;
    for (std::size_t i = 0; i < job.result.ranks.size(); ++i) {
      if (!nvml_all[i].empty()) {
        job.result.ranks[i].nvml = nvml_inventory_from_json(nlohmann::json::parse(nvml_all[i]));
      }
      gpus.push_back(job.result.ranks[i].nvml);
    }
    job.add(judge_nvml(job.result.ranks, gpus, nvml.why));
    for (std::size_t k = 0; k < dcgm.size() && !job.a.dcgm.empty(); ++k) {
      if (dcgm[k]) {
        job.add(
            judge_dcgm(job.result.ranks, static_cast<int>(k), job.result.node_names[k], *dcgm[k]));
        continue;
      }
      AcceptCheck x;
      x.name = x.stage = "dcgm";
      x.node = static_cast<int>(k);
      x.status = "fail";
      x.reason = job.result.node_names[k] + ": no DCGM results: " + dcgm_errors[k];
      job.result.checks.push_back(x);
    }
  }
  return devices;
}

GemmProbe run_gpu_stage(AcceptJob& job, std::int64_t n, const std::vector<DeviceRecord>& devices) {
  Compute& c = job.compute;
  const GemmProbe gemm = probe_gemm(c, n, job.a.sdc_repeats);
  // The experts' GEMMs and core attention at DeepSeek-V3's shapes on a GPU (8 experts of 4,096
  // rows: a GPU's share at EP 32 and 4,096 tokens; one layer's attention over 4,096 tokens); at
  // the tiny model's on the cpu backend, smaller (seconds, not minutes, on shared cores). The
  // same shapes on every run of a backend, whatever the step runs, so that a --baseline compares.
  const ModelConfig model = preset(job.host ? "deepseek-v3-tiny" : "deepseek-v3");
  const std::vector<double> mine = {
      gemm.flops_per_s, probe_expert_gemms(c, model, job.host ? 4 : 8, job.host ? 128 : 4096, 5),
      probe_attention(c, model, job.host ? 512 : 4096, 5),
      probe_memory(c, job.host ? (std::int64_t{8} << 20) : (std::int64_t{256} << 20), 5)};
  const std::vector<double> rates = job.rt.gather_to_root(mine);
  const std::vector<std::vector<std::uint64_t>> probe_sums =
      gather_sums(job.rt, {gemm.sums.front()});
  if (job.rt.rank() != 0) return gemm;
  if (!job.system && job.host) job.system = find_system("cpu");
  if (!job.system && !devices.empty()) {
    std::string why;
    job.system = detected_system(devices.front().info.name, job.c, &why);
  }
  // The figures in `mine`'s order, each against the system's peak x the generation's efficiency
  // for it, as `predict` prices a step (nominal on the cpu system).
  std::vector<RateSpec> specs;
  for (const char* name : {"gemm_rate", "grouped_gemm_rate", "attention_rate"}) {
    specs.push_back(
        {name, "gpu", "FLOP/s", "", std::nullopt, false, job.a.floor, job.min_slowdown});
  }
  specs.push_back({"memory_bandwidth", "gpu", "bytes/s", "", std::nullopt, false, job.a.floor,
                   job.min_slowdown});
  if (job.system) {
    const Hardware hw = hardware_for(*job.system, job.c);
    const Efficiencies& e = efficiencies_for(*job.system).values;
    const std::string sys = "system " + job.system->name + ": ";
    const std::string gen = job.system->generation;
    const std::string peak = "peak " + std::string(to_string(job.c.precision));
    const std::pair<double, std::string> expected[] = {
        {hw.gemm_flops * e.dense_gemm, peak + " x the " + gen + " dense-GEMM efficiency"},
        {hw.gemm_flops * e.grouped_gemm, peak + " x the " + gen + " grouped-GEMM efficiency"},
        {hw.attention_flops * e.attention,
         "the core-attention peak x the " + gen + " attention efficiency"},
        {hw.memory_bandwidth * e.memory, "memory bandwidth x the " + gen + " memory efficiency"}};
    for (std::size_t k = 0; k < specs.size(); ++k) {
      specs[k].expected = expected[k].first;
      specs[k].nominal = gen == "cpu";
      specs[k].source = sys + expected[k].second + " (moebench predict's)";
    }
  }
  for (std::size_t i = 0; i < job.result.ranks.size(); ++i) {
    job.result.ranks[i].gemm_sum = probe_sums[i].front();
  }
  for (std::size_t k = 0; k < specs.size(); ++k) {
    std::vector<double> values;
    for (std::size_t i = 0; i < job.result.ranks.size(); ++i) {
      values.push_back(rates[mine.size() * i + k]);
    }
    job.add(judge_rates(site_spec(specs[k], job.site, job.result.ranks), job.result.ranks, values));
  }
  return gemm;
}

void run_links(AcceptJob& job) {
  const PairMeasurement links = measure_pairs(
      job.comm, job.compute, job.rt, all_pairs_rounds(job.rt.size()),
      job.host ? (std::int64_t{4} << 20) : (std::int64_t{64} << 20), 8, job.host ? 5 : 10);
  const NvlinkDomains domains =
      find_nvlink_domains(job.rt, job.compute, job.c.layout.nvlink_domain_size, job.s.topo.node);
  if (job.rt.rank() == 0) {
    LinkPlacement placement;
    for (const AcceptRank& r : job.result.ranks) placement.node.push_back(r.node);
    placement.domain = domains.of_rank;
    LinkAnalysis analysis = analyse_links(
        links.samples, placement, {6.0, job.host ? kHostLinkMinSlowdown : kDeviceMinSlowdown});
    // On the cpu backend ranks share cores: a ping-pong's latency is how the scheduler
    // happened to run both ends (thousands of times the median under load), so only
    // bandwidth is judged there.
    if (job.host) {
      std::erase_if(analysis.outliers, [](const LinkOutlier& x) { return x.metric == "latency"; });
    }
    // One slow link alone is stated there too (a CI run saw one link 11x its class's median on a
    // clean machine); a slow port, two or more links of a rank, still fails.
    job.add(judge_links(job.result.ranks, links.samples, analysis, !job.host));
  }
}

void run_collectives(AcceptJob& job, NcclLogRequest* nccl_log) {
  job.result.collectives = measure_collectives(
      job.comm, job.compute, job.rt,
      job.host ? std::vector<std::int64_t>{std::int64_t{256} << 10, std::int64_t{4} << 20}
               : std::vector<std::int64_t>{std::int64_t{8} << 20, std::int64_t{64} << 20,
                                           std::int64_t{512} << 20},
      job.host ? 3 : 20);
  const std::vector<std::string> transports =
      job.rt.gather_strings_to_root(nccl_log ? nccl_log->read() : std::string());
  const std::vector<std::string> why = job.rt.gather_strings_to_root(
      nccl_log ? nccl_log->why() : std::string("the collectives run over MPI, not NCCL"));
  if (job.rt.rank() == 0) {
    std::vector<std::optional<NcclTransports>> seen;
    for (std::size_t i = 0; i < transports.size(); ++i) {
      if (transports[i].empty()) {
        seen.emplace_back();
      } else {
        seen.push_back(nccl_transports_from_json(nlohmann::json::parse(transports[i])));
        job.result.ranks[i].nccl = seen.back();
      }
    }
    TransportExpectation expect;
    expect.spans_nodes = job.result.node_names.size() > 1;
    if (job.system) {
      const Hardware hw = hardware_for(*job.system, job.c);
      expect.nvlink = hw.nvlink_domain > 1;
      expect.scale_out_bytes_per_s = hw.scale_out.bandwidth_bytes_per_s;
    }
    job.add(judge_transports(job.result.ranks, seen, expect, why));
    RateSpec k{"collective_busbw", "collectives", "bytes/s",   "",
               std::nullopt,       false,         job.a.floor, job.min_slowdown};
    if (job.system) {
      const Hardware hw = hardware_for(*job.system, job.c);
      const Efficiencies& e = efficiencies_for(*job.system).values;
      const bool across = job.result.node_names.size() > 1 && hw.nvlink_domain < job.rt.size();
      const LinkCost& link = across || hw.nvlink_domain <= 1 ? hw.scale_out : hw.nvlink;
      const double eff = &link == &hw.scale_out ? e.scale_out : e.nvlink;
      if (link.bandwidth_bytes_per_s > 0) k.expected = link.bandwidth_bytes_per_s * eff;
      k.nominal = job.system->generation == "cpu";
      k.source = "system " + job.system->name + ": the " +
                 (&link == &hw.scale_out ? "scale-out" : "NVLink") +
                 " bandwidth a GPU each way x the " + job.system->generation + " " +
                 (&link == &hw.scale_out ? "scale-out" : "NVLink") + " efficiency";
    }
    job.add(judge_collectives(job.result.collectives, k));
    if (!job.o.quiet) {
      job.say("collectives over " + std::to_string(job.rt.size()) +
              " ranks (nccl-tests' columns):");
      for (const std::string& line : collectives_table(job.result.collectives)) {
        std::cout << "#   " << line << "\n";
      }
      std::cout << std::flush;
    }
  }
}

}  // namespace moebench
