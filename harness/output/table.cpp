#include "harness/output/table.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "harness/measure/summary.hpp"
#include "harness/output/rank_identity.hpp"
#include "harness/output/system_name.hpp"

namespace moebench {

namespace {

std::string sprintf_str(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string sprintf_str(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

// A right-aligned cell, blank when the quantity does not apply to the phase.
std::string cell(bool applies, const char* fmt, double value, int width) {
  if (!applies) return std::string(static_cast<std::size_t>(width), ' ');
  std::string text = sprintf_str(fmt, value);
  if (static_cast<int>(text.size()) < width) text.insert(0, width - text.size(), ' ');
  return text;
}

std::string header(const RunRecord& r) {
  const RunConfig& c = r.config;
  const Workload& w = c.workload;
  std::string out;
  if (r.state != "completed") {
    out += sprintf_str("# %s by %s after %d of %d timed steps: the figures below are theirs\n",
                       r.state.c_str(), r.signal.c_str(), r.steps_completed, c.steps);
  }
  const std::string ends = !w.head ? ""
                           : w.mtp > 0
                               ? sprintf_str(", embedding, head and loss, %lld MTP layer%s",
                                             static_cast<long long>(w.mtp), w.mtp == 1 ? "" : "s")
                               : std::string(", embedding, head and loss");
  out += sprintf_str(
      "# moebench: model %s, %lld layers (%lld dense, %lld MoE)%s, %lld tokens/micro-batch\n",
      c.model.name.c_str(), static_cast<long long>(w.layers),
      static_cast<long long>(w.dense_layers), static_cast<long long>(w.moe_layers()), ends.c_str(),
      static_cast<long long>(w.tokens_per_rank()));
  const SystemName system =
      system_name(r.meta.devices, r.meta.backend, r.meta.mpi_library, r.meta.blas);
  out += "# system: " + describe_system(system, c.layout.world, r.topology.nodes) + "\n";
  out += sprintf_str("# world %d, ep %d, edp %d, nodes %d (%d ranks/node), backend %s, comm %s\n",
                     c.layout.world, c.layout.ep, c.layout.edp(), r.topology.nodes,
                     r.topology.ranks_per_node, r.meta.backend.c_str(), r.meta.comm.c_str());
  const PipelineShape shape = pipeline_shape(c);
  out += sprintf_str("# global batch %lld (%d micro-batch%s of %lld a rank), pp %d, vp %d",
                     static_cast<long long>(global_batch(c)), shape.microbatches,
                     shape.microbatches == 1 ? "" : "es", static_cast<long long>(w.micro_batch),
                     shape.pp, shape.vp);
  if (shape.pp > 1) {
    const std::optional<double> bubble = measured_bubble(r.results);
    out += sprintf_str(" (%s, layout %s): bubble %.3f measured, %.3f theoretical",
                       shape.vp == 1 ? "1f1b" : "interleaved 1f1b", pipeline_layout(c).text.c_str(),
                       bubble.value_or(0.0), theoretical_bubble(shape));
  }
  out += "\n";
  if (c.recipe) out += "# recipe " + *c.recipe + " (its published figures are in the report)\n";
  out += sprintf_str(
      "# %d warmup + %d timed steps; a step's time is its slowest rank's; medians over steps\n#\n",
      c.warmup, c.steps);
  return out;
}

// The phases of the rank that sets the step time, in one of its steps, so that time and share
// add up (with "other", what no phase times); max(ms) and the rates beside them are each phase's
// slowest rank's, which do not add up in a pipelined run.
std::string phase_rows(const RunRecord& r) {
  const StepBreakdown& b = r.results.breakdown;
  const bool own = b.rank >= 0 && b.step_time_s > 0;
  const double step = own ? b.step_time_s : r.results.step_time_s.median;
  std::string out;
  if (own) {
    out += sprintf_str(
        "# time(ms), share: rank %d (stage %d, host %s), which sets the step time, in its median "
        "step (%.3f ms); they add up to it\n",
        b.rank, b.stage, b.host.c_str(), b.step_time_s * 1e3);
  }
  out +=
      "# max(ms): each phase's slowest rank, median over steps (different ranks: not additive)\n"
      "#  phase           time(ms)   share   max(ms)  busy(ms)  TFLOP/s   size(MB)  algbw(GB/s)  "
      "busbw(GB/s)\n";
  for (const PhaseResult& p : r.results.phases) {
    const bool comm = is_communication(p.phase);
    const double t = own ? b.phase_time_s[static_cast<std::size_t>(p.phase)] : p.time_s.median;
    out += sprintf_str("   %-14s", std::string(phase_name(p.phase)).c_str());
    out += cell(true, "%.3f", t * 1e3, 10);
    out += cell(step > 0, "%.1f%%", 100.0 * t / step, 8);
    out += cell(true, "%.3f", p.time_s.median * 1e3, 10);
    out += cell(comm, "%.3f", p.busy_s.median * 1e3, 10);
    out += cell(!comm && p.flops > 0, "%.3f", p.flop_rate / 1e12, 9);
    out += cell(comm, "%.2f", p.bytes / 1e6, 11);
    const bool moves = comm && p.group_size > 1;  // a group of one rank moves nothing
    out += cell(moves, "%.2f", p.algbw / 1e9, 13);
    out += cell(moves, "%.2f", p.busbw / 1e9, 13);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    for (const ExpectedPhase& e : r.expected.phases) {
      if (e.slow && e.name == phase_name(p.phase)) {
        out += sprintf_str("  << %.2fx expected", e.ratio);
      }
    }
    out += '\n';
  }
  if (own) {
    out += sprintf_str("   %-14s", "other");
    out += cell(true, "%.3f", b.other_s * 1e3, 10);
    out += cell(step > 0, "%.1f%%", 100.0 * b.other_s / step, 8);
    out += "   (host work no phase times)\n";
  }
  return out;
}

std::string verification_line(const VerificationResult& v) {
  if (!v.enabled) return "# verification: off\n";
  const std::string nonfinite =
      v.nonfinite > 0 ? sprintf_str(", %lld NaN or infinite", v.nonfinite) : std::string();
  return sprintf_str("# verification: %lld wrong of %lld compared (max rel err %.1e%s) %s\n",
                     v.mismatches, v.compared, v.max_rel_error, nonfinite.c_str(),
                     v.passed ? "PASSED" : "FAILED");
}

}  // namespace

std::string format_run_table(const RunRecord& r) {
  const RunResults& res = r.results;
  std::string out = header(r) + phase_rows(r);
  out += "#\n";
  out +=
      sprintf_str("# step time: median %.3f ms, p95 %.3f ms over %zu steps\n",
                  res.step_time_s.median * 1e3, res.step_time_s.p95 * 1e3, res.step_time_s.count);
  out += sprintf_str("# TFLOP/s/GPU: %.3f   tokens/s/GPU: %.0f\n", res.tflops_per_gpu,
                     res.tokens_per_s_per_gpu);
  // A communication phase's time(ms) is what the compute stream waited for it (exposed); busy(ms)
  // the collectives' own duration.
  // The compute of the rank and step the table's time(ms) column shows, so that it adds up with
  // the rest of that step (the max(ms) column's figures come from different ranks and do not).
  const StepBreakdown& b = res.breakdown;
  if (b.rank >= 0) {
    double compute = 0;
    for (const PhaseDef& p : kPhases) {
      if (p.kind == PhaseKind::compute)
        compute += b.phase_time_s[static_cast<std::size_t>(p.phase)];
    }
    out += sprintf_str(
        "# compute %.3f ms, not computing %.3f ms: rank %d's median step, as time(ms)\n",
        compute * 1e3, std::max(0.0, b.step_time_s - compute) * 1e3, b.rank);
  } else {
    out += sprintf_str("# compute %.3f ms, not computing %.3f ms (step - compute, from max(ms))\n",
                       res.compute_time_s * 1e3, res.exposed_communication_s * 1e3);
  }
  out += sprintf_str(
      "# communication: busy %.3f ms, exposed %.3f ms, hidden %.3f ms (%.0f%% overlapped); "
      "overlap %s, gradient buckets %d dense + %d expert\n",
      res.overlap.busy_s * 1e3, res.overlap.exposed_s * 1e3, res.overlap.hidden_s * 1e3,
      100.0 * res.overlap.fraction, r.config.overlap ? "on" : "off", res.grad_buckets_dense,
      res.grad_buckets_expert);
  const DomainRecord& d = r.domains;
  if (!d.of_rank.empty()) {
    out += sprintf_str(
        "# NVLink domains: %d (%s); all-to-all per rank and step: %.3f MB inside "
        "its domain, %.3f MB across (%.0f%%)%s\n",
        d.count(), d.source.c_str(), d.in_domain_bytes / 1e6, d.cross_domain_bytes / 1e6,
        100 * d.cross_domain_share(),
        d.warnings.empty() ? "" : "; expert groups span domains (warnings above)");
  }
  out += verification_line(r.verification);
  return out;
}

namespace {

// "# telemetry: ..." : what the GPUs did during the timed steps, or why there is nothing.
std::string telemetry_line(const RunRecord& r) {
  if (r.telemetry.empty()) {
    return "# telemetry: none" + (r.telemetry_note.empty() ? "" : ": " + r.telemetry_note) + "\n";
  }
  double sm_lo = 1e300, sm_hi = 0, t_hi = 0, p_hi = 0;
  int samples = 0;
  for (const GpuTelemetrySummary& s : r.telemetry) {
    samples += s.samples;
    if (s.sm_clock_mhz) sm_lo = std::min(sm_lo, s.sm_clock_mhz->min);
    if (s.sm_clock_mhz) sm_hi = std::max(sm_hi, s.sm_clock_mhz->max);
    if (s.temperature_c) t_hi = std::max(t_hi, s.temperature_c->max);
    if (s.power_w) p_hi = std::max(p_hi, s.power_w->max);
  }
  return sprintf_str(
      "# telemetry: %zu GPUs, %d samples; SM clock %.0f-%.0f MHz, up to %.0f C and "
      "%.0f W\n",
      r.telemetry.size(), samples, sm_hi > 0 ? sm_lo : 0.0, sm_hi, t_hi, p_hi);
}

std::string format_suspects(const RunRecord& r) {
  const HealthResult& h = r.health;
  const std::string rule = sprintf_str("> %.3g robust SD and %.0f%% slower than the median",
                                       h.thresholds.mad_k, 100.0 * h.thresholds.min_slowdown);
  if (!h.note.empty()) return "# health: " + h.note + "\n";
  if (h.suspects.empty()) {
    return sprintf_str("# health: no suspects among %d ranks (", h.ranks_compared) + rule + ")\n";
  }
  std::string out = sprintf_str("# health: %d suspect rank(s) on %zu node(s) among %d ranks (",
                                h.suspect_ranks(), h.nodes.size(), h.ranks_compared) +
                    rule + ")\n";
  for (const NodeSuspects& n : h.nodes) {
    std::string ranks;
    for (int rank : n.ranks) {
      if (!ranks.empty()) ranks += ',';
      ranks += std::to_string(rank);
    }
    out += sprintf_str("#   node %d (%s): ranks %s\n", n.node, n.host.c_str(), ranks.c_str());
  }
  for (const Suspect& s : h.suspects) {
    out += "#     " + describe(identify_rank(r, s.rank)) + ": " + s.reason + "\n";
  }
  return out;
}

}  // namespace

// The expected times' verdict (run --system): the step against its expected time, and each phase
// slower than the threshold named, with where to look.
std::string format_expected(const RunRecord& r) {
  const ExpectedRecord& e = r.expected;
  if (!e.present()) return "";
  std::string out = sprintf_str(
      "# expected on %s%s: step %.3f ms, measured %.3f ms (%.2fx); pipeline rank %d's phases "
      "compared, over %.2fx marked <<\n",
      e.system.c_str(),
      e.calibration.empty() ? " (its efficiencies)"
                            : (" (calibrated from " + e.calibration + ")").c_str(),
      e.expected_step_s * 1e3, e.measured_step_s * 1e3,
      e.expected_step_s > 0 ? e.measured_step_s / e.expected_step_s : 0.0, e.pp_rank, e.threshold);
  std::vector<std::string> compute, comm;
  for (const ExpectedPhase& p : e.phases) {
    if (!p.slow) continue;
    if (p.communication) {
      comm.push_back(sprintf_str("%s at %.0f%% of the bandwidth this system should give",
                                 p.name.c_str(), 100.0 / p.ratio));
    } else {
      compute.push_back(sprintf_str("%s at %.2fx its expected time", p.name.c_str(), p.ratio));
    }
  }
  const auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  };
  if (!compute.empty()) {
    out += "# expected: slow compute: " + join(compute) +
           ": check the compute (a slow rank in the health check; GPU clocks, thermal or power "
           "limits)\n";
  }
  if (!comm.empty()) {
    out += "# expected: slow communication: " + join(comm) +
           ": check the links (linkcheck; the inter-node fabric, NVLink)\n";
  }
  if (compute.empty() && comm.empty()) {
    out += sprintf_str("# expected: no phase over %.2fx its expected time\n", e.threshold);
  }
  return out;
}

std::string format_health(const RunRecord& r) {
  return telemetry_line(r) + format_suspects(r) + format_expected(r);
}

std::string format_device_list(const std::vector<RankPlace>& ranks,
                               const std::vector<DeviceRecord>& devices) {
  std::string out = "# Using devices\n";
  for (const RankPlace& r : ranks) {
    const auto dev = std::find_if(devices.begin(), devices.end(),
                                  [&](const DeviceRecord& d) { return d.rank == r.rank; });
    std::string device = "cpu (host memory)";
    if (dev != devices.end()) {
      device = sprintf_str("%2d [%s] %s", dev->info.ordinal, dev->info.pci_bus_id.c_str(),
                           dev->info.name.c_str());
    }
    out += sprintf_str("#  Rank %3d Pid %7ld on %10s local rank %2d device %s\n", r.rank, r.pid,
                       r.host.c_str(), r.local_rank, device.c_str());
  }
  return out;
}

std::string format_step_line(const StepProgress& p) {
  char line[256];
  std::snprintf(line, sizeof line,
                "# step %d/%d %s %d/%d: %.3f ms, %.3f TFLOP/s/GPU, %.0f tokens/s/GPU\n", p.overall,
                p.total, p.kind, p.index + 1, p.of, p.step_time_s * 1e3, p.tflops_per_gpu,
                p.tokens_per_s_per_gpu);
  return line;
}

std::string format_pass_line(const PassProgress& p) {
  std::string out = sprintf_str("# step %d/%d %s %d/%d: %.1f s in, rank 0 ", p.overall, p.total,
                                p.kind, p.index + 1, p.of, p.since_start_s);
  if (p.done >= p.passes) {
    out += sprintf_str("past its %d passes (gradient reduction and optimizer)\n", p.passes);
  } else {
    out += sprintf_str("at pass %d of %d (micro-batch %d of %d, chunk %d of %d, %s)\n", p.done + 1,
                       p.passes, p.current.microbatch + 1, p.shape.microbatches,
                       p.current.chunk + 1, p.shape.vp, p.current.forward ? "forward" : "backward");
  }
  return out;
}

namespace {
std::string friendly_seconds(double s) {
  if (s < 1) return sprintf_str("%.0f ms", s * 1e3);
  if (s < 120) return sprintf_str("%.1f s", s);
  return sprintf_str("%.1f min", s / 60);
}
}  // namespace

double estimate_step_s(double first_pass_s, const PipelineShape& shape) {
  return 3.0 * first_pass_s * (shape.vp * shape.microbatches + shape.pp - 1);
}

std::string format_step_estimate(double first_pass_s, const PipelineShape& shape) {
  return sprintf_str(
      "# a step should take about %s: 3 x rank 0's first forward pass (%.3f s) x %d (vp %d x %d "
      "micro-batch%s + pp %d - 1)\n",
      friendly_seconds(estimate_step_s(first_pass_s, shape)).c_str(), first_pass_s,
      shape.vp * shape.microbatches + shape.pp - 1, shape.vp, shape.microbatches,
      shape.microbatches == 1 ? "" : "es", shape.pp);
}

}  // namespace moebench
