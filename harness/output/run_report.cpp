#include "harness/output/run_report.hpp"

#include <algorithm>
#include <string>

#include "harness/measure/summary.hpp"
#include "harness/output/rank_identity.hpp"
#include "harness/output/system_name.hpp"
#include "workloads/config/recipes.hpp"

namespace moebench {

namespace {

using ojson = nlohmann::ordered_json;

ojson kernel_calls_json(const KernelCalls& k) {
  return ojson{{"attention_cudnn", k.attention_cudnn},
               {"attention_gemm", k.attention_gemm},
               {"attention_cudnn_refused", k.attention_cudnn_refused},
               {"gemm_cublaslt", k.gemm_cublaslt},
               {"gemm_fallbacks", k.gemm_fallbacks},
               {"grouped_calls", k.grouped_calls},
               {"grouped_loop_problems", k.grouped_loop_problems},
               {"fp8_gemms", k.fp8.gemms},
               {"fp8_fallbacks", k.fp8.fallbacks},
               {"fp8_weight_quantisations", k.fp8.weight_quantisations}};
}

ojson meta_json(const RunMeta& m) {
  ojson env = ojson::object();
  for (const auto& [key, value] : m.environment) env[key] = value;
  ojson meta{{"tool_version", m.tool_version},
             {"git_sha", m.git_sha},
             {"git_dirty", m.git_dirty},
             {"argv", m.argv},
             {"start_time", m.start_time},
             {"hosts", m.hosts},
             {"mpi_library", m.mpi_library},
             {"backend", m.backend},
             {"comm", m.comm},
             {"blas", m.blas},
             {"build_type", m.build_type},
             {"compiler", m.compiler},
             {"environment", env}};
  if (!m.comm_ordering.empty()) meta["comm_ordering"] = m.comm_ordering;
  if (!m.blas_core.name.empty()) meta["blas_core"] = blas_core_json(m.blas_core);
  if (!m.gemm_path.empty()) {
    meta["kernels"] = {{"gemm", m.gemm_path},
                       {"grouped_gemm", m.grouped_gemm_path},
                       {"attention", m.attention_path}};
    if (m.kernel_calls) meta["kernels"]["calls"] = kernel_calls_json(*m.kernel_calls);
  }
  if (!m.loaded_libraries.empty()) meta["loaded_libraries"] = m.loaded_libraries;
  if (!m.devices.empty()) {
    ojson devices = ojson::array();
    for (const DeviceRecord& d : m.devices) devices.push_back(to_json(d));
    meta["devices"] = std::move(devices);
  }
  return meta;
}

ojson config_json(const RunConfig& c) {
  ojson j;
  j["model"] = ojson(to_json(c.model));
  j["workload"] = ojson(to_json(c.workload, c.layout));
  j["seed"] = c.seed;
  j["warmup"] = c.warmup;
  j["steps"] = c.steps;
  j["grad_reduce"] = to_string(c.grad_reduce);
  j["optimizer"] = to_string(c.optimizer);
  j["optimizer_state_dtype"] = to_string(c.optimizer_state_dtype);
  j["adamw"] = ojson{{"lr", c.adamw.lr},
                     {"beta1", c.adamw.beta1},
                     {"beta2", c.adamw.beta2},
                     {"eps", c.adamw.eps},
                     {"weight_decay", c.adamw.weight_decay}};
  j["precision"] = to_string(c.precision);
  j["grouped_gemm"] = to_string(c.grouped_gemm);
  j["attention_impl"] = to_string(c.attention_impl);
  if (c.precision == Precision::fp8) {
    // As run: the memory check resolves auto (kept unless only per-gemm fits).
    const char* copies = c.fp8_weight_copies == Fp8WeightCopies::per_gemm ? "per-gemm" : "kept";
    // What fp8 changes and what it keeps: the linear layers' GEMM inputs, not the storage.
    j["fp8"] = ojson{{"format", "e4m3"},
                     {"recipe", to_string(c.fp8_recipe)},
                     {"scaling", describe(c.fp8_recipe)},
                     {"gemms",
                      "linear layers (attention projections, dense and shared MLPs, "
                      "routed experts); attention's core, norms and the router unchanged"},
                     {"storage", to_string(native_precision(c.backend))},
                     {"weight_copies", copies},
                     {"saved_inputs", c.fp8_saved_inputs ? "fp8" : "storage"},
                     {"emulated", c.fp8_emulated()}};
  }
  j["verify"] = c.verify;
  j["blas_threads"] = c.blas_threads;
  j["comm_barrier"] = c.comm_barrier;
  j["overlap"] = c.overlap;
  j["grad_bucket_bytes"] = c.grad_bucket_bytes;
  if (c.inject) j["inject"] = to_string(*c.inject);
  return j;
}

// The recipe the run's workload came from, the flags that overrode it, and every difference
// between the run and the published row.
ojson recipe_json(const RunRecord& r) {
  const RunConfig& c = r.config;
  const Recipe& rec = recipe(*c.recipe);
  const std::string device = r.meta.devices.empty() ? "" : r.meta.devices.front().info.name;
  const std::vector<std::string> differences = recipe_differences(rec, c, device);
  return ojson{{"name", rec.name},
               {"published", ojson(to_json(rec))},
               {"overrides", c.recipe_overrides},
               {"comparable", differences.empty()},
               {"differences", differences}};
}

// The pipeline: its layout, schedule and bubble, measured beside Megatron's theoretical value.
ojson pipeline_json(const RunRecord& r) {
  const RunConfig& c = r.config;
  const PipelineShape shape = pipeline_shape(c);
  const PipelineLayout layout = pipeline_layout(c);
  ojson stages = ojson::array();
  for (std::size_t s = 0; s < layout.stages.size(); ++s) {
    const PipelineStage& st = layout.stages[s];
    stages.push_back(ojson{{"stage", s},
                           {"pp_rank", static_cast<int>(s) % shape.pp},
                           {"chunk", static_cast<int>(s) / shape.pp},
                           {"first_layer", st.first_layer},
                           {"layers", st.layers},
                           {"embedding", st.embedding},
                           {"mtp", st.mtp},
                           {"loss", st.loss}});
  }
  ojson warmup = ojson::array();
  for (int rank = 0; rank < shape.pp; ++rank) warmup.push_back(warmup_forwards(shape, rank));
  ojson j{{"pp", shape.pp},
          {"vp", shape.vp},
          {"schedule", shape.pp == 1   ? "none"
                       : shape.vp == 1 ? "1f1b"
                                       : "interleaved 1f1b"},
          {"layout", layout.text},
          {"microbatches_per_step", shape.microbatches},
          {"warmup_forwards", warmup},
          {"theoretical_bubble", theoretical_bubble(shape)},
          {"stages", stages}};
  const std::optional<double> bubble = measured_bubble(r.results);
  j["measured_bubble"] = bubble ? ojson(*bubble) : ojson(nullptr);
  return j;
}

ojson domains_json(const DomainRecord& d) {
  return ojson{{"source", d.source},
               {"count", d.count()},
               {"of_rank", d.of_rank},
               {"warnings", d.warnings},
               {"alltoall_bytes_per_step", ojson{{"in_domain", d.in_domain_bytes},
                                                 {"cross_domain", d.cross_domain_bytes},
                                                 {"cross_domain_share", d.cross_domain_share()}}}};
}

ojson parallel_json(const RunRecord& r) {
  const ParallelLayout& l = r.config.layout;
  ojson j{{"world", l.world},
          {"ep", l.ep},
          {"dp", l.dp()},
          {"edp", l.edp()},
          {"nodes", r.topology.nodes},
          {"ranks_per_node", r.topology.ranks_per_node},
          {"emulated_nodes", l.ranks_per_node > 0},
          {"grid", ojson(to_json(l.grid()))},
          {"pipeline", pipeline_json(r)}};
  if (!r.domains.of_rank.empty()) j["nvlink_domains"] = domains_json(r.domains);  // a run's
  return j;
}

// What the full model has that this run does not run: its FLOPs are in full_model, not in
// instantiated, so the run's TFLOP/s is not a published row's until the list is empty.
ojson not_run_json(const RunConfig& c) {
  ojson out = ojson::array();
  if (c.workload.layers < c.model.num_hidden_layers) {
    out.push_back("decoder layers " + std::to_string(c.workload.layers) + " to " +
                  std::to_string(c.model.num_hidden_layers - 1));
  }
  if (!c.workload.attention) out.push_back("attention");
  if (!c.workload.head) {
    out.push_back("embedding");
    out.push_back("output head");
    out.push_back("loss");
  }
  const std::int64_t mtp = c.workload.mtp, model_mtp = c.model.num_nextn_predict_layers;
  if (mtp + 1 == model_mtp) out.push_back("mtp layer " + std::to_string(mtp));
  if (mtp + 1 < model_mtp) {
    out.push_back("mtp layers " + std::to_string(mtp) + " to " + std::to_string(model_mtp - 1));
  }
  return out;
}

ojson accounting_json(const RunRecord& r) {
  return ojson{{"full_model", ojson(to_json(r.full_model))},
               {"instantiated", ojson(to_json(r.instantiated))},
               {"not_run", not_run_json(r.config)},
               {"collective_bytes", ojson(to_json(r.collective_bytes))},
               {"memory_estimate", ojson(to_json(r.memory))}};
}

ojson phase_json(const PhaseResult& p) {
  ojson j{{"kind", std::string(phase_kind_name(p.phase))},
          {"time_s", ojson(to_json(p.time_s))},
          {"flops", p.flops},
          {"bytes", p.bytes},
          {"flop_rate", p.flop_rate},
          {"algbw", p.algbw},
          {"busbw", p.busbw},
          {"group_size", p.group_size}};
  if (is_communication(p.phase)) j["busy_s"] = ojson(to_json(p.busy_s));
  return j;
}

ojson results_json(const RunResults& res) {
  ojson phases = ojson::object();
  for (const PhaseResult& p : res.phases) phases[std::string(phase_name(p.phase))] = phase_json(p);
  ojson per_rank = ojson::array();
  for (const RankResult& rr : res.per_rank) {
    ojson times = ojson::object();
    for (std::size_t i = 0; i < kPhaseCount; ++i) {
      times[std::string(kPhaseNames[i])] = rr.phase_time_s[i];
    }
    per_rank.push_back(ojson{{"rank", rr.rank},
                             {"host", rr.host},
                             {"node", rr.node},
                             {"local_rank", rr.local_rank},
                             {"stage", rr.stage},
                             {"step_time_s", rr.step_time_s},
                             {"phase_time_s", times}});
  }
  ojson out{{"step_time_s", ojson(to_json(res.step_time_s))},
            {"step_times_s", res.step_times_s},
            {"tflops_per_gpu", res.tflops_per_gpu},
            {"tokens_per_s_per_gpu", res.tokens_per_s_per_gpu},
            {"compute_time_s", res.compute_time_s},
            {"communication_time_s", res.communication_time_s},
            {"exposed_communication_s", res.exposed_communication_s},
            {"communication_overlap", ojson{{"busy_s", res.overlap.busy_s},
                                            {"exposed_s", res.overlap.exposed_s},
                                            {"hidden_s", res.overlap.hidden_s},
                                            {"overlap_fraction", res.overlap.fraction}}},
            {"grad_buckets",
             ojson{{"dense", res.grad_buckets_dense}, {"expert", res.grad_buckets_expert}}},
            {"phases", phases},
            {"per_rank", per_rank},
            {"bandwidth_convention",
             "nccl-tests: algbw = send bytes / busy time (the collectives' own duration); busbw "
             "= algbw * (n-1)/n (all-to-all, "
             "reduce-scatter, all-gather), * 2(n-1)/n (all-reduce)"}};
  const StepBreakdown& b = res.breakdown;
  if (b.rank >= 0) {
    ojson times = ojson::object();
    for (std::size_t i = 0; i < kPhaseCount; ++i) {
      times[std::string(kPhaseNames[i])] = b.phase_time_s[i];
    }
    out["step_breakdown"] = ojson{{"rank", b.rank},
                                  {"host", b.host},
                                  {"stage", b.stage},
                                  {"step", b.step},
                                  {"step_time_s", b.step_time_s},
                                  {"phase_time_s", times},
                                  {"other_s", b.other_s}};
  }
  return out;
}

ojson verification_json(const VerificationResult& v) {
  ojson tensors = ojson::array();
  for (const TensorCheck& t : v.tensors) {
    tensors.push_back(ojson{{"name", t.name},
                            {"compared", t.compared},
                            {"mismatches", t.mismatches},
                            {"max_abs_error", t.max_abs_error},
                            {"max_rel_error", t.max_rel_error},
                            {"nonfinite", t.nonfinite}});
  }
  return ojson{{"enabled", v.enabled},
               {"passed", v.passed},
               {"reference", v.reference},
               {"rtol", v.rtol},
               {"atol", v.atol},
               {"tolerance_reason", v.tolerance_reason},
               {"compared", v.compared},
               {"mismatches", v.mismatches},
               {"max_abs_error", v.max_abs_error},
               {"max_rel_error", v.max_rel_error},
               {"nonfinite", v.nonfinite},
               {"tensors", tensors}};
}

ojson range_json(const std::optional<Range<double>>& r) {
  if (!r) return ojson();
  return ojson{{"min", r->min}, {"max", r->max}, {"mean", r->mean}};
}

ojson telemetry_json(const RunRecord& r) {
  ojson gpus = ojson::array();
  for (const GpuTelemetrySummary& s : r.telemetry) {
    gpus.push_back(ojson{{"rank", s.rank},
                         {"samples", s.samples},
                         {"sm_clock_mhz", range_json(s.sm_clock_mhz)},
                         {"memory_clock_mhz", range_json(s.memory_clock_mhz)},
                         {"power_w", range_json(s.power_w)},
                         {"power_limit_w", s.power_limit_w ? ojson(*s.power_limit_w) : ojson()},
                         {"temperature_c", range_json(s.temperature_c)},
                         {"thermal_throttled_share", s.thermal_throttled_share},
                         {"power_throttled_share", s.power_throttled_share},
                         {"new_ecc_corrected", s.new_ecc_corrected},
                         {"new_ecc_uncorrected", s.new_ecc_uncorrected},
                         {"remapped_rows_pending", s.remapped_rows_pending},
                         {"nvlinks_inactive", s.nvlinks_inactive},
                         {"new_nvlink_errors", s.new_nvlink_errors},
                         {"new_pcie_replays", s.new_pcie_replays}});
  }
  return ojson{{"available", !r.telemetry.empty()},
               {"note", r.telemetry_note.empty() ? ojson() : ojson(r.telemetry_note)},
               {"interval_s", r.telemetry_interval_s},
               {"gpus", gpus}};
}

ojson health_json(const RunRecord& r) {
  const HealthResult& h = r.health;
  ojson suspects = ojson::array();
  for (const Suspect& s : h.suspects) {
    const RankIdentity who = identify_rank(r, s.rank);
    suspects.push_back(
        ojson{{"rank", who.rank},
              {"host", who.host},
              {"node", who.node},
              {"local_rank", who.local_rank},
              {"gpu_index", who.gpu_index >= 0 ? ojson(who.gpu_index) : ojson()},
              {"uuid", who.uuid.empty() ? ojson() : ojson(who.uuid)},
              {"pci_bus_id", who.pci_bus_id.empty() ? ojson() : ojson(who.pci_bus_id)},
              {"metric", s.metric},
              {"value", s.value},
              {"median", s.median},
              {"slowdown", s.slowdown},
              {"reason", s.reason}});
  }
  ojson nodes = ojson::array();
  for (const NodeSuspects& n : h.nodes) {
    nodes.push_back(ojson{{"node", n.node}, {"host", n.host}, {"ranks", n.ranks}});
  }
  return ojson{{"method",
                "each rank's compute time per step (the compute phases' sum, median over timed "
                "steps) against the median rank of its pipeline stage, per FLOP where every rank "
                "counted FLOPs: a suspect is more than mad_k robust standard deviations "
                "(1.4826 x MAD) and more than min_slowdown slower; its compute phases that are so "
                "are listed too (harness/measure/health.hpp)"},
               {"mad_k", h.thresholds.mad_k},
               {"min_slowdown", h.thresholds.min_slowdown},
               {"ranks_compared", h.ranks_compared},
               {"note", h.note.empty() ? ojson() : ojson(h.note)},
               {"suspects", suspects},
               {"nodes", nodes},
               {"telemetry", telemetry_json(r)}};
}

// The step's memory: the model's estimate per pipeline rank beside the measured peak.
ojson memory_json(const RunRecord& r) {
  const MemoryRecord& m = r.measured_memory;
  ojson per = ojson::array();
  double estimate = 0, measured = 0, ratio = 0;
  for (std::size_t i = 0; i < m.estimate_bytes.size(); ++i) {
    const double e = m.estimate_bytes[i];
    const double got = i < m.measured_peak_bytes.size() ? m.measured_peak_bytes[i] : 0.0;
    estimate = std::max(estimate, e);
    measured = std::max(measured, got);
    if (e > 0) ratio = std::max(ratio, got / e);
    per.push_back(ojson{{"pp_rank", static_cast<int>(i)},
                        {"estimate_bytes", e},
                        {"measured_peak_bytes", m.measured ? ojson(got) : ojson(nullptr)}});
  }
  const auto when = [&](double v) { return m.measured ? ojson(v) : ojson(nullptr); };
  return ojson{
      {"scope",
       "the step's tensors: weights, main gradients, optimizer state, kept activations, the "
       "layers' shared scratch and the step's buffers (not the backend's own workspaces)"},
      {"recompute", m.recompute},
      {"estimate_bytes", estimate},
      {"measured_peak_bytes", when(measured)},
      {"measured_over_estimate", when(ratio)},
      {"resident_baseline_bytes", when(m.resident_baseline_bytes)},
      {"resident_peak_bytes", when(m.resident_peak_bytes)},
      {"device_baseline_bytes", m.measured && m.device_baseline_bytes >= 0
                                    ? ojson(m.device_baseline_bytes)
                                    : ojson(nullptr)},
      {"activation_bytes", m.activation_bytes},
      {"activation_bytes_saved", m.activation_bytes_without_recompute - m.activation_bytes},
      {"recompute_flops", r.instantiated.recompute_flops_per_step},
      {"per_pipeline_rank", per}};
}

ojson expected_json(const ExpectedRecord& e) {
  ojson phases = ojson::array();
  for (const ExpectedPhase& p : e.phases) {
    phases.push_back(ojson{{"phase", p.name},
                           {"kind", p.communication ? "communication" : "compute"},
                           {"expected_s", p.expected_s},
                           {"measured_s", p.measured_s},
                           {"ratio", p.expected_s > 0 ? ojson(p.ratio) : ojson(nullptr)},
                           {"slow", p.slow}});
  }
  return ojson{{"system", e.system},
               {"calibration", e.calibration.empty() ? ojson(nullptr) : ojson(e.calibration)},
               {"pp_rank", e.pp_rank},
               {"threshold", e.threshold},
               {"expected_step_s", e.expected_step_s},
               {"measured_step_s", e.measured_step_s},
               {"ratio", e.expected_step_s > 0 ? ojson(e.measured_step_s / e.expected_step_s)
                                               : ojson(nullptr)},
               {"phases", phases}};
}

}  // namespace

nlohmann::ordered_json blas_core_json(const BlasCore& b) {
  return {{"name", b.name}, {"chosen_by", b.chosen_by}, {"reason", b.reason}};
}

nlohmann::ordered_json make_run_report(const RunRecord& r) {
  ojson j;
  j["schema_version"] = kRunSchemaVersion;
  j["kind"] = kRunReportKind;
  j["status"] = ojson{{"state", r.state},
                      {"signal", r.signal.empty() ? ojson(nullptr) : ojson(r.signal)},
                      {"error", r.error.empty() ? ojson(nullptr) : ojson(r.error)},
                      {"steps_completed", r.steps_completed},
                      {"steps_requested", r.config.steps},
                      {"ranks_reporting", r.ranks_reporting}};
  j["meta"] = meta_json(r.meta);
  // Who was measured (moebench report reads it from meta the same way).
  const SystemName system =
      system_name(r.meta.devices, r.meta.backend, r.meta.mpi_library, r.meta.blas);
  j["meta"]["system"] =
      ojson{{"accelerator", system.accelerator},
            {"gpus", system.gpu ? r.config.layout.world : 0},
            {"ranks", r.config.layout.world},
            {"nodes", r.topology.nodes},
            {"software", system.software},
            {"description", describe_system(system, r.config.layout.world, r.topology.nodes)}};
  j["config"] = config_json(r.config);
  if (r.config.recipe) j["config"]["recipe"] = recipe_json(r);
  j["parallel"] = parallel_json(r);
  j["accounting"] = accounting_json(r);
  j["memory"] = memory_json(r);
  j["results"] = results_json(r.results);
  j["verification"] = verification_json(r.verification);
  j["health"] = health_json(r);
  if (r.expected.present()) j["expected"] = expected_json(r.expected);
  return j;
}

}  // namespace moebench
