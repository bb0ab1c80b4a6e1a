#include "harness/bench/bench_report.hpp"

#include <cstdio>
#include <sstream>

#include "harness/output/run_report.hpp"
#include "workloads/accounting/accounting.hpp"

namespace moebench {

namespace {

double rate(double flops, double seconds) {
  return seconds > 0 ? flops / seconds : 0.0;
}

nlohmann::ordered_json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

// A fraction of the peak, or null without one.
nlohmann::ordered_json of_peak(double flop_rate, const PeakRate& peak) {
  if (!peak.tflops || *peak.tflops <= 0) return nullptr;
  return flop_rate / (*peak.tflops * 1e12);
}

nlohmann::ordered_json meta_json(const BenchMeta& m) {
  nlohmann::ordered_json j;
  j["tool_version"] = m.tool_version;
  j["git_sha"] = m.git_sha;
  j["git_dirty"] = m.git_dirty;
  j["argv"] = m.argv;
  j["start_time"] = m.start_time;
  j["host"] = m.host;
  j["backend"] = to_string(m.backend);
  j["precision"] = to_string(m.precision);
  j["blas"] = m.blas;
  if (!m.blas_core.name.empty()) j["blas_core"] = blas_core_json(m.blas_core);
  j["build_type"] = m.build_type;
  j["compiler"] = m.compiler;
  j["gemm_path"] = m.gemm_path;
  j["grouped_gemm_path"] = m.grouped_gemm_path;
  j["attention_path"] = m.attention_path;
  j["device"] = m.device ? to_json(*m.device) : nlohmann::ordered_json(nullptr);
  return j;
}

nlohmann::ordered_json stack_json(const LayerStackResult& s, const PeakRate& peak) {
  const RunResults& r = s.results;
  nlohmann::ordered_json j;
  j["layers"] = s.config.workload.layers;
  j["flops_per_step"] = s.accounting.flops_per_step;
  j["step_time_s"] = to_json(r.step_time_s);
  j["forward_backward_time_s"] = to_json(s.forward_backward_time_s);
  j["tflops"] = r.tflops_per_gpu;
  j["forward_backward_tflops"] = s.forward_backward_flop_rate() / 1e12;
  j["fraction_of_peak"] = of_peak(r.tflops_per_gpu * 1e12, peak);
  j["forward_backward_fraction_of_peak"] = of_peak(s.forward_backward_flop_rate(), peak);
  j["tokens_per_s"] = r.tokens_per_s_per_gpu;
  nlohmann::ordered_json phases = nlohmann::ordered_json::object();
  for (const PhaseResult& p : r.phases) {
    const double t = p.time_s.median;
    phases[std::string(phase_name(p.phase))] = {
        {"time_s", t},
        {"share", r.step_time_s.median > 0 ? t / r.step_time_s.median : 0.0},
        {"flops", p.flops},
        {"tflops", is_communication(p.phase) ? 0.0 : p.flop_rate / 1e12}};
  }
  j["phases"] = phases;
  j["accounting"] = to_json(s.accounting);
  j["memory_estimate"] = to_json(s.memory);
  j["workload"] = to_json(s.config.workload, s.config.layout);
  return j;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string percent_of_peak(double flop_rate, const PeakRate& peak) {
  if (!peak.tflops || *peak.tflops <= 0) return "-";
  return fmt("%.1f%%", 100.0 * flop_rate / (*peak.tflops * 1e12));
}

}  // namespace

double DenseGemmResult::flop_rate() const {
  return rate(flops, time_s.median);
}
// Both operands quantised minus B's kept: B's quantisation, a call's other half besides the GEMM
// being A's, of the same size. Noise can make the difference negative: then it says nothing.
std::optional<double> DenseGemmResult::quantisation_s() const {
  if (!weight_kept_time_s) return std::nullopt;
  const double q = time_s.median - weight_kept_time_s->median;
  return q > 0 ? std::optional<double>(q) : std::nullopt;
}
std::optional<double> DenseGemmResult::gemm_only_s() const {
  const std::optional<double> q = quantisation_s();
  if (!q || weight_kept_time_s->median <= *q) return std::nullopt;
  return weight_kept_time_s->median - *q;
}
double GemmCaseResult::flop_rate() const {
  return rate(gemm.flops(), time_s.median);
}
double ExpertGemmResult::flops() const {
  double f = 0;
  for (const GemmCaseResult& c : cases) f += c.gemm.flops();
  return f;
}
double ExpertGemmResult::time_s() const {
  double t = 0;
  for (const GemmCaseResult& c : cases) t += c.time_s.median;
  return t;
}
double ExpertGemmResult::flop_rate() const {
  return rate(flops(), time_s());
}
double AttentionCaseResult::flop_rate() const {
  return rate(flops, time_s.median);
}
double AttentionCaseResult::forward_flop_rate() const {
  return rate(flops / 3.0, forward_time_s.median);
}
double LayerStackResult::forward_backward_flop_rate() const {
  return rate(accounting.flops_per_step, forward_backward_time_s.median);
}

double reference_dense_rate(const BenchRecord& r) {
  if (r.meta.precision == Precision::fp8 && r.dense_fp8) return r.dense_fp8->flop_rate();
  return r.dense.flop_rate();
}

nlohmann::ordered_json make_bench_report(const BenchRecord& r) {
  nlohmann::ordered_json j;
  j["schema_version"] = kBenchSchemaVersion;
  j["kind"] = kBenchReportKind;
  j["meta"] = meta_json(r.meta);
  nlohmann::ordered_json c;
  c["model"] = to_json(r.model);
  c["ep"] = r.share.ep;
  c["local_experts"] = r.share.local_experts;
  c["top_k"] = r.model.num_experts_per_tok;
  c["tokens"] = r.share.tokens;
  c["rows_per_expert"] = r.share.rows_per_expert;
  c["gemm_n"] = r.dense.n;
  c["warmup"] = r.warmup;
  c["iterations"] = r.iterations;
  c["emulation"] =
      "one process with the rank's local experts as its routed experts, the same top-k and "
      "balanced routing: the same expert rows, attention and shared-expert work as one EP rank; "
      "the all-to-alls are local copies (no network traffic) and there is no data-parallel "
      "gradient reduction";
  j["config"] = c;
  j["peak"] = {{"tflops", optional_number(r.peak.tflops)}, {"source", r.peak.source}};

  nlohmann::ordered_json res;
  const double dense_rate = r.dense.flop_rate();
  res["dense_gemm"] = {
      {"n", r.dense.n},
      {"flops", r.dense.flops},
      {"time_s", to_json(r.dense.time_s)},
      {"tflops", dense_rate / 1e12},
      {"fraction_of_peak", of_peak(dense_rate, r.peak)},
      {"events_time_s", optional_number(r.dense.events_time_s)},
      {"events_tflops",
       r.dense.events_time_s
           ? nlohmann::ordered_json(rate(r.dense.flops, *r.dense.events_time_s) / 1e12)
           : nlohmann::ordered_json(nullptr)}};
  if (r.dense_fp8) {
    const double fp8_rate = r.dense_fp8->flop_rate();
    res["dense_gemm_fp8"] = {{"n", r.dense_fp8->n},
                             {"flops", r.dense_fp8->flops},
                             {"time_s", to_json(r.dense_fp8->time_s)},
                             {"tflops", fp8_rate / 1e12},
                             {"fp8_over_dense", rate(fp8_rate, dense_rate)},
                             {"includes",
                              "the recipe's amax, scales and E4M3 quantisation of both "
                              "operands in every call"}};
    // The same calls with B's copy kept, and the split of a call they give.
    const std::optional<double> q = r.dense_fp8->quantisation_s();
    const std::optional<double> g = r.dense_fp8->gemm_only_s();
    res["dense_gemm_fp8"]["weight_kept_time_s"] =
        r.dense_fp8->weight_kept_time_s
            ? nlohmann::ordered_json(to_json(*r.dense_fp8->weight_kept_time_s))
            : nlohmann::ordered_json(nullptr);
    res["dense_gemm_fp8"]["quantisation_s"] = optional_number(q);
    res["dense_gemm_fp8"]["gemm_only_s"] = optional_number(g);
    res["dense_gemm_fp8"]["gemm_only_tflops"] =
        g ? nlohmann::ordered_json(rate(r.dense_fp8->flops, *g) / 1e12)
          : nlohmann::ordered_json(nullptr);
    res["dense_gemm_fp8"]["gemm_only_over_dense"] =
        g ? nlohmann::ordered_json(rate(rate(r.dense_fp8->flops, *g), dense_rate))
          : nlohmann::ordered_json(nullptr);
    res["dense_gemm_fp8"]["split"] =
        "quantisation_s: the median with both operands quantised in every call less the median "
        "with B's copy kept (one n x n operand's amax, scales and E4M3 copy); gemm_only_s: the "
        "kept median less that (A's quantisation, the same size)";
  } else {
    res["dense_gemm_fp8"] = nullptr;
  }
  if (r.fp8_counts) {
    res["fp8_gemms"] = {{"fp8", r.fp8_counts->gemms}, {"bf16_fallbacks", r.fp8_counts->fallbacks}};
  }
  const double expert_reference = reference_dense_rate(r);
  auto experts_json = [&](const ExpertGemmResult& e, const char* impl) {
    nlohmann::ordered_json cases = nlohmann::ordered_json::array();
    for (const GemmCaseResult& g : e.cases) {
      const GroupedGemmCase& s = g.gemm;
      cases.push_back({{"name", s.name},
                       {"pass", s.pass},
                       {"trans_a", s.trans_a},
                       {"trans_b", s.trans_b},
                       {"m", s.m},
                       {"n", s.n},
                       {"k", s.k},
                       {"count", s.count},
                       {"flops", s.flops()},
                       {"time_s", to_json(g.time_s)},
                       {"tflops", g.flop_rate() / 1e12},
                       {"ratio_to_dense", rate(g.flop_rate(), expert_reference)}});
    }
    const double ratio = rate(e.flop_rate(), expert_reference);
    return nlohmann::ordered_json{{"implementation", impl},
                                  {"cases", cases},
                                  {"flops", e.flops()},
                                  {"time_s", e.time_s()},
                                  {"tflops", e.flop_rate() / 1e12},
                                  {"ratio_to_dense", ratio},
                                  {"target_ratio", kExpertGemmTargetRatio},
                                  {"meets_target", ratio >= kExpertGemmTargetRatio}};
  };
  res["expert_gemms"] = experts_json(r.experts, "loop");
  if (r.experts_grouped) {
    res["expert_gemms_grouped"] = experts_json(*r.experts_grouped, "grouped");
    res["faster_expert_gemms"] =
        r.experts_grouped->time_s() < r.experts.time_s() ? "grouped" : "loop";
  } else {
    res["expert_gemms_grouped"] = nullptr;
  }
  nlohmann::ordered_json attention = nlohmann::ordered_json::array();
  const AttentionCaseResult* fastest = nullptr;
  for (const AttentionCaseResult& a : r.attention) {
    attention.push_back({{"implementation", a.impl},
                         {"path", a.path},
                         {"batch", a.batch},
                         {"seq_len", a.seq_len},
                         {"heads", a.heads},
                         {"qk_dim", a.qk_dim},
                         {"v_dim", a.v_dim},
                         {"flops", a.flops},
                         {"forward_time_s", to_json(a.forward_time_s)},
                         {"time_s", to_json(a.time_s)},
                         {"forward_tflops", a.forward_flop_rate() / 1e12},
                         {"tflops", a.flop_rate() / 1e12},
                         {"fraction_of_peak", of_peak(a.flop_rate(), r.peak)}});
    if (!fastest || a.time_s.median < fastest->time_s.median) fastest = &a;
  }
  nlohmann::ordered_json unavailable = nlohmann::ordered_json::array();
  for (const AttentionUnavailable& u : r.attention_unavailable) {
    unavailable.push_back({{"implementation", u.impl}, {"why", u.why}});
  }
  res["core_attention"] = {
      {"operands",
       "one layer's MLA operands in place: q, the kv up-projection (per head k_nope "
       "and v), the rope key shared by the heads"},
      {"cases", attention},
      {"unavailable", unavailable},
      {"fastest",
       fastest ? nlohmann::ordered_json(fastest->impl) : nlohmann::ordered_json(nullptr)}};
  nlohmann::ordered_json stacks = nlohmann::ordered_json::array();
  for (const LayerStackResult& s : r.stacks) stacks.push_back(stack_json(s, r.peak));
  res["layer_stacks"] = stacks;
  j["results"] = res;
  return j;
}

std::string format_bench_table(const BenchRecord& r) {
  std::ostringstream os;
  const BenchMeta& m = r.meta;
  os << "# moebench bench: backend " << to_string(m.backend) << ", precision "
     << to_string(m.precision);
  if (m.device)
    os << ", device " << m.device->info.name << " (" << m.device->info.pci_bus_id << ")";
  os << "\n";
  if (!m.gemm_path.empty()) {
    os << "# gemm: " << m.gemm_path << "; grouped: " << m.grouped_gemm_path
       << "; attention: " << m.attention_path << "\n";
  }
  os << "# " << r.model.name << " as one EP=" << r.share.ep << " rank: " << r.share.local_experts
     << " local experts, top-" << r.model.num_experts_per_tok << ", " << r.share.tokens
     << " tokens, balanced routing: " << r.share.rows_per_expert << " rows per expert\n";
  os << "# peak: "
     << (r.peak.tflops ? fmt("%g TFLOP/s", *r.peak.tflops) + " (" + r.peak.source + ")"
                       : r.peak.source)
     << "\n# " << r.warmup << " warmup + " << r.iterations << " timed iterations; medians\n#\n";

  const double dense_rate = r.dense.flop_rate();
  os << "# dense GEMM " << r.dense.n << "^3: " << fmt("%.3f ms", r.dense.time_s.median * 1e3)
     << ", " << fmt("%.4g TFLOP/s", dense_rate / 1e12) << " ("
     << percent_of_peak(dense_rate, r.peak) << " of peak)";
  if (r.dense.events_time_s) {
    os << "; CUDA events: "
       << fmt("%.4g TFLOP/s", rate(r.dense.flops, *r.dense.events_time_s) / 1e12);
  }
  if (r.dense_fp8) {
    const double fp8_rate = r.dense_fp8->flop_rate();
    os << "\n# dense GEMM " << r.dense_fp8->n
       << "^3 in fp8 (with quantisation): " << fmt("%.3f ms", r.dense_fp8->time_s.median * 1e3)
       << ", " << fmt("%.4g TFLOP/s", fp8_rate / 1e12) << ", "
       << fmt("%.2fx", rate(fp8_rate, dense_rate)) << " the "
       << to_string(native_precision(m.backend)) << " rate";
    if (const std::optional<double> g = r.dense_fp8->gemm_only_s()) {
      const double gemm_rate = rate(r.dense_fp8->flops, *g);
      os << "\n#   of which quantising each operand "
         << fmt("%.3f ms", *r.dense_fp8->quantisation_s() * 1e3) << ", the GEMM alone "
         << fmt("%.3f ms", *g * 1e3) << ", " << fmt("%.4g TFLOP/s", gemm_rate / 1e12) << ", "
         << fmt("%.2fx", rate(gemm_rate, dense_rate)) << " the "
         << to_string(native_precision(m.backend)) << " rate";
    }
  }
  if (r.fp8_counts) {
    os << "\n# fp8 linear GEMMs: " << r.fp8_counts->gemms << " in fp8, " << r.fp8_counts->fallbacks
       << " fell back to bf16";
  }
  os << "\n#\n";
  const double expert_reference = reference_dense_rate(r);

  char line[160];
  auto experts_table = [&](const ExpertGemmResult& e, const char* title) {
    std::snprintf(line, sizeof line, "# %-14s %5s %7s %7s %7s %10s %9s %9s\n", title, "count", "m",
                  "n", "k", "time(ms)", "TFLOP/s", "vs dense");
    os << line;
    for (const GemmCaseResult& g : e.cases) {
      const GroupedGemmCase& s = g.gemm;
      std::snprintf(line, sizeof line, "  %-14s %5lld %7lld %7lld %7lld %10.3f %9.4g %9.3f\n",
                    s.name.c_str(), static_cast<long long>(s.count), static_cast<long long>(s.m),
                    static_cast<long long>(s.n), static_cast<long long>(s.k), g.time_s.median * 1e3,
                    g.flop_rate() / 1e12, rate(g.flop_rate(), expert_reference));
      os << line;
    }
    const double ratio = rate(e.flop_rate(), expert_reference);
    std::snprintf(line, sizeof line,
                  "  %-14s %5s %7s %7s %7s %10.3f %9.4g %9.3f  (target >= %.2f: %s)\n", "all six",
                  "", "", "", "", e.time_s() * 1e3, e.flop_rate() / 1e12, ratio,
                  kExpertGemmTargetRatio, ratio >= kExpertGemmTargetRatio ? "met" : "missed");
    os << line << "#\n";
  };
  experts_table(r.experts, "expert GEMMs");
  if (r.experts_grouped) {
    experts_table(*r.experts_grouped, "grouped GEMM");
    os << "# faster: " << (r.experts_grouped->time_s() < r.experts.time_s() ? "grouped" : "loop")
       << " (--grouped-gemm)\n#\n";
  }

  if (!r.attention.empty() || !r.attention_unavailable.empty()) {
    std::snprintf(line, sizeof line, "# %-14s %7s %6s %5s %9s %9s %12s %9s %8s\n", "core attention",
                  "batch", "seq", "heads", "fwd(ms)", "TFLOP/s", "fwd+bwd(ms)", "TFLOP/s",
                  "of peak");
    os << line;
    for (const AttentionCaseResult& a : r.attention) {
      std::snprintf(line, sizeof line, "  %-14s %7lld %6lld %5lld %9.3f %9.4g %12.3f %9.4g %8s\n",
                    a.impl.c_str(), static_cast<long long>(a.batch),
                    static_cast<long long>(a.seq_len), static_cast<long long>(a.heads),
                    a.forward_time_s.median * 1e3, a.forward_flop_rate() / 1e12,
                    a.time_s.median * 1e3, a.flop_rate() / 1e12,
                    percent_of_peak(a.flop_rate(), r.peak).c_str());
      os << line;
    }
    for (const AttentionUnavailable& u : r.attention_unavailable) {
      os << "  " << u.impl << ": not run: " << u.why << "\n";
    }
    os << "# one layer's MLA operands in place (q, kv, the shared rope key); TFLOP/s in Megatron's "
          "causal accounting\n#\n";
  }

  std::snprintf(line, sizeof line, "# %-7s %10s %8s %8s %12s %8s %8s %10s\n", "layers", "step(ms)",
                "TFLOP/s", "of peak", "fwd+bwd(ms)", "TFLOP/s", "of peak", "tokens/s");
  os << line;
  for (const LayerStackResult& s : r.stacks) {
    const RunResults& res = s.results;
    const double fb = s.forward_backward_flop_rate();
    std::snprintf(line, sizeof line, "  %-7lld %10.3f %8.4g %8s %12.3f %8.4g %8s %10.0f\n",
                  static_cast<long long>(s.config.workload.layers), res.step_time_s.median * 1e3,
                  res.tflops_per_gpu, percent_of_peak(res.tflops_per_gpu * 1e12, r.peak).c_str(),
                  s.forward_backward_time_s.median * 1e3, fb / 1e12,
                  percent_of_peak(fb, r.peak).c_str(), res.tokens_per_s_per_gpu);
    os << line;
  }
  os << "# step: forward + backward"
     << (!r.stacks.empty() && r.stacks[0].config.optimizer == Optimizer::adamw ? " + AdamW" : "")
     << " of MoE layers with attention; fwd+bwd: the step without the optimizer; TFLOP/s in "
        "Megatron's accounting\n";
  for (const LayerStackResult& s : r.stacks) {
    const RunResults& res = s.results;
    os << "#\n# where the time goes, " << s.config.workload.layers << " layer"
       << (s.config.workload.layers == 1 ? "" : "s") << ":\n";
    std::snprintf(line, sizeof line, "# %-14s %10s %7s %9s\n", "phase", "time(ms)", "share",
                  "TFLOP/s");
    os << line;
    for (const PhaseResult& p : res.phases) {
      const double t = p.time_s.median;
      if (t <= 0 && p.flops <= 0) continue;
      const std::string tf = is_communication(p.phase) || p.flops <= 0
                                 ? std::string("-")
                                 : fmt("%.4g", p.flop_rate / 1e12);
      std::snprintf(line, sizeof line, "  %-14s %10.3f %6.1f%% %9s\n",
                    std::string(phase_name(p.phase)).c_str(), t * 1e3,
                    res.step_time_s.median > 0 ? 100.0 * t / res.step_time_s.median : 0.0,
                    tf.c_str());
      os << line;
    }
  }
  return os.str();
}

}  // namespace moebench
