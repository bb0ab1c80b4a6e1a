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

// The reference's values for the elements [first, first + count) of this rank's expert buffer.
std::vector<float> expected_expert_range(const RunConfig& config, const Topology& topo,
                                         const std::vector<float>& ref_grads, std::int64_t first,
                                         std::int64_t count) {
  const ParamLayout local = make_param_layout(config, topo);
  const ParamLayout ref =
      make_param_layout(single_process_reference(config), single_process_topology());
  std::map<std::tuple<int, int, int>, std::int64_t> ref_offset;
  for (const ParamInfo& p : ref.infos) {
    if (p.group == ParamGroup::expert) {
      ref_offset[{p.layer, static_cast<int>(p.kind), p.expert}] = p.offset;
    }
  }
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(count));
  for (const ParamInfo& p : local.infos) {
    if (p.group != ParamGroup::expert) continue;
    const std::int64_t lo = std::max(first, p.offset);
    const std::int64_t hi = std::min(first + count, p.offset + p.numel());
    const std::int64_t base = ref_offset.at({p.layer, static_cast<int>(p.kind), p.expert});
    for (std::int64_t i = lo; i < hi; ++i) {
      out.push_back(ref_grads[static_cast<std::size_t>(base + (i - p.offset))]);
    }
  }
  return out;
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
  for (std::vector<float>* v :
       {&ref.output, &ref.input_grad, &ref.dense_grads, &ref.expert_grads}) {
    runtime.broadcast(*v, 0);
  }

  VerificationResult result;
  result.enabled = true;
  result.reference = "single process on rank 0 (world 1, ep 1, all " +
                     std::to_string(config.model.n_routed_experts) +
                     " experts, the global batch of " +
                     std::to_string(config.layout.dp() * config.workload.micro_batch) +
                     " sequences), same compute backend";
  const VerifyTolerance tol =
      verify_tolerance(compute.activation_dtype(), compute.linear_precision());
  result.rtol = tol.rtol;
  result.atol = tol.atol_of_max;
  result.tolerance_reason = tol.reason;

  const std::int64_t n = step.tokens() * config.model.hidden_size;
  // This rank's sequences in the global batch: its data-parallel rank's.
  const std::size_t first_row = static_cast<std::size_t>(topo.group(Group::data).rank * n);
  auto slice = [&](const std::vector<float>& v, std::size_t first, std::size_t count) {
    return std::span<const float>(v).subspan(first, count);
  };
  std::vector<TensorCheck> local;
  local.push_back(compare("output", download(compute, step.output()),
                          slice(ref.output, first_row, static_cast<std::size_t>(n)),
                          tol.atol_of_max * max_abs(ref.output), tol.rtol));
  local.push_back(compare("input_grad", download(compute, step.input_grad()),
                          slice(ref.input_grad, first_row, static_cast<std::size_t>(n)),
                          tol.atol_of_max * max_abs(ref.input_grad), tol.rtol));
  {
    const std::int64_t first = step.reduced_grads_offset(ParamGroup::dense);
    const std::int64_t count = std::max<std::int64_t>(
        0, std::min(step.reduced_grads(ParamGroup::dense).rows,
                    static_cast<std::int64_t>(ref.dense_grads.size()) - first));
    std::vector<float> got = download(compute, step.reduced_grads(ParamGroup::dense));
    got.resize(static_cast<std::size_t>(count));
    local.push_back(compare(
        "dense_grads", got,
        slice(ref.dense_grads, static_cast<std::size_t>(first), static_cast<std::size_t>(count)),
        tol.atol_of_max * max_abs(ref.dense_grads), tol.rtol));
  }
  {
    const std::int64_t first = step.reduced_grads_offset(ParamGroup::expert);
    const std::int64_t count =
        std::max<std::int64_t>(0, std::min(step.reduced_grads(ParamGroup::expert).rows,
                                           step.params().numel(ParamGroup::expert) - first));
    std::vector<float> got = download(compute, step.reduced_grads(ParamGroup::expert));
    got.resize(static_cast<std::size_t>(count));
    const std::vector<float> want =
        expected_expert_range(config, topo, ref.expert_grads, first, count);
    local.push_back(
        compare("expert_grads", got, want, tol.atol_of_max * max_abs(ref.expert_grads), tol.rtol));
  }

  for (const TensorCheck& c : local) {
    TensorCheck total;
    total.name = c.name;
    total.compared = runtime.allreduce_sum(c.compared);
    total.mismatches = runtime.allreduce_sum(c.mismatches);
    total.max_abs_error = runtime.allreduce_max(c.max_abs_error);
    total.max_rel_error = runtime.allreduce_max(c.max_rel_error);
    result.tensors.push_back(total);
  }
  TensorCheck sum;
  for (const TensorCheck& t : result.tensors) accumulate(sum, t);
  result.compared = sum.compared;
  result.mismatches = sum.mismatches;
  result.max_abs_error = sum.max_abs_error;
  result.max_rel_error = sum.max_rel_error;
  result.passed = result.mismatches == 0 && result.compared > 0;
  return result;
}

}  // namespace moebench
