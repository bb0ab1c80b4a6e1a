#include "harness/verify/reference_check.hpp"

#include <map>
#include <tuple>

#include "harness/backends/registry/registry.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/verify/compare.hpp"

namespace moebench {

namespace {
std::vector<float> download(Compute& c, Mat m) {
  std::vector<float> v(static_cast<std::size_t>(m.numel()));
  if (!v.empty()) c.download(m, v.data());
  return v;
}

struct Reference {
  std::vector<float> output, input_grad, dense_grads, expert_grads;
};

Reference run_reference(const RunConfig& config, Compute& compute) {
  const RunConfig ref = single_process_reference(config);
  const Topology one = single_process_topology();
  // One process: every collective is local, so the mpi backend serves (staged on a device).
  auto comm =
      make_communicator(CommBackend::mpi, MPI_COMM_SELF, one, compute, kDefaultCommTimeoutS);
  TrainingStep step(ref, one, compute, *comm);
  step.initialize();
  step.run();
  Reference r;
  r.output = download(compute, step.output());
  r.input_grad = download(compute, step.input_grad());
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    Mat all = step.reduced_grads(g).row_slice(0, step.params().numel(g));
    (g == ParamGroup::dense ? r.dense_grads : r.expert_grads) = download(compute, all);
  }
  return r;
}

using Slice = MpiRuntime::Range;  // (moebench::Range is telemetry's)

// Where the reference holds the elements [first, first + count) of this rank's buffer of group
// `g`: each parameter found by (layer, kind, expert) in the reference's layout, which holds every
// layer and expert. Adjacent ranges are merged.
std::vector<Slice> param_ranges(const RunConfig& config, const Topology& topo, ParamGroup g,
                                std::int64_t first, std::int64_t count) {
  const ParamLayout local = make_param_layout(config, topo);
  const ParamLayout ref =
      make_param_layout(single_process_reference(config), single_process_topology());
  std::map<std::tuple<int, int, int>, std::int64_t> ref_offset;
  for (const ParamInfo& p : ref.infos) {
    if (p.group == g) ref_offset[{p.layer, static_cast<int>(p.kind), p.expert}] = p.offset;
  }
  std::vector<Slice> out;
  for (const ParamInfo& p : local.infos) {
    if (p.group != g) continue;
    const std::int64_t lo = std::max(first, p.offset);
    const std::int64_t hi = std::min(first + count, p.offset + p.numel());
    if (hi <= lo) continue;
    const std::int64_t base = ref_offset.at({p.layer, static_cast<int>(p.kind), p.expert});
    const Slice r{base + (lo - p.offset), hi - lo};
    if (!out.empty() && out.back().offset + out.back().count == r.offset) {
      out.back().count += r.count;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

// Where the reference holds this rank's rows of its micro-batches, in the order the rank keeps
// them: micro-batch mb holds the sequences from step.first_sequence(mb) on, which the reference
// holds in order.
std::vector<Slice> row_ranges(const RunConfig& config, const TrainingStep& step, Mat got) {
  const std::int64_t h = got.cols;  // hidden, or (--head on) the losses per head
  std::vector<Slice> out;
  for (int mb = 0; mb < step.microbatches(); ++mb) {
    out.push_back({step.first_sequence(mb) * config.workload.seq_len * h, step.tokens() * h});
  }
  return out;
}

double max_abs_on_root(const MpiRuntime& runtime, const std::vector<float>& v) {
  return runtime.allreduce_max(runtime.rank() == 0 ? max_abs(v) : 0.0);
}
}  // namespace

VerificationResult verify_step(const RunConfig& config, const Topology& topo,
                               const MpiRuntime& runtime, Compute& compute,
                               const TrainingStep& step) {
  Reference ref;
  std::string failure;
  if (runtime.rank() == 0) {
    try {
      ref = run_reference(config, compute);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  // Every rank learns whether the reference ran before waiting for its data.
  runtime.broadcast(failure, 0);
  if (!failure.empty()) {
    throw RuntimeError("--verify: the single-process reference on rank 0 failed: " + failure);
  }
  // Each rank receives only the slices it compares (MpiRuntime::scatter_ranges), never the whole
  // reference: its grads are O(model), more than an MPI count holds and than every rank's memory.
  VerificationResult result;
  result.enabled = true;
  result.reference =
      "single process on rank 0 (world 1, ep 1, pp 1, all " +
      std::to_string(config.workload.layers) + " layers" +
      (config.workload.head ? std::string(", the embedding, the head and loss") +
                                  (config.workload.mtp > 0 ? " and the MTP layers" : "")
                            : std::string()) +
      " and " + std::to_string(config.model.n_routed_experts) + " experts, the global batch of " +
      std::to_string(global_batch(config)) + " sequences in one micro-batch), same compute backend";
  const VerifyTolerance tol =
      verify_tolerance(compute.activation_dtype(), compute.linear_precision());
  result.rtol = tol.rtol;
  result.atol = tol.atol_of_max;
  result.tolerance_reason = tol.reason;

  std::vector<TensorCheck> local;
  // The last stage's outputs and the first stage's input gradients, of every micro-batch; other
  // ranks compare none (the counts are summed over ranks). Every rank takes part in every
  // scatter, with nothing to ask for where it compares nothing.
  const auto rows_check = [&](const char* name, bool holds, Mat got,
                              const std::vector<float>& all) {
    const bool compares = holds && got.numel() > 0;
    const std::vector<float> want = runtime.scatter_ranges(
        all, compares ? row_ranges(config, step, got) : std::vector<Slice>{});
    const double scale = max_abs_on_root(runtime, all);
    if (!compares) return TensorCheck{name, 0, 0, 0, 0};
    return compare(name, download(compute, got), want, tol.atol_of_max * scale, tol.rtol);
  };
  // With --head on the last stage's output is each token's loss per head, and the first stage's
  // input gradient is the embedding's, among the dense gradients.
  local.push_back(rows_check(config.workload.head ? "loss" : "output", step.holds_last_stage(),
                             step.output(), ref.output));
  if (!config.workload.head) {
    local.push_back(
        rows_check("input_grad", step.holds_first_stage(), step.input_grad(), ref.input_grad));
  }
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    const std::int64_t first = step.reduced_grads_offset(g);
    const std::int64_t count = std::max<std::int64_t>(
        0, std::min(step.reduced_grads(g).rows, step.params().numel(g) - first));
    std::vector<float> got = download(compute, step.reduced_grads(g));
    got.resize(static_cast<std::size_t>(count));
    const std::vector<float>& all = g == ParamGroup::dense ? ref.dense_grads : ref.expert_grads;
    const std::vector<float> want =
        runtime.scatter_ranges(all, param_ranges(config, topo, g, first, count));
    local.push_back(compare(g == ParamGroup::dense ? "dense_grads" : "expert_grads", got, want,
                            tol.atol_of_max * max_abs_on_root(runtime, all), tol.rtol));
  }

  for (const TensorCheck& c : local) {
    TensorCheck total;
    total.name = c.name;
    total.compared = runtime.allreduce_sum(c.compared);
    total.mismatches = runtime.allreduce_sum(c.mismatches);
    total.nonfinite = runtime.allreduce_sum(c.nonfinite);
    total.max_abs_error = runtime.allreduce_max(c.max_abs_error);
    total.max_rel_error = runtime.allreduce_max(c.max_rel_error);
    result.tensors.push_back(total);
  }
  TensorCheck sum;
  for (const TensorCheck& t : result.tensors) accumulate(sum, t);
  result.compared = sum.compared;
  result.mismatches = sum.mismatches;
  result.nonfinite = sum.nonfinite;
  result.max_abs_error = sum.max_abs_error;
  result.max_rel_error = sum.max_rel_error;
  result.passed = result.mismatches == 0 && result.compared > 0;
  return result;
}

}  // namespace moebench
