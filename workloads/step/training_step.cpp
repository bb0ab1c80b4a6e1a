#include "workloads/step/training_step.hpp"

#include <algorithm>

#include "harness/core/clock.hpp"
#include "harness/measure/stats.hpp"
#include "workloads/ops/random.hpp"

namespace moebench {

namespace {
// Streams of the synthetic data, apart from every weight's stream (workloads/ops/random.hpp).
std::uint64_t input_stream(std::uint64_t sequence) {
  return mix64((1ULL << 62) + 2 * sequence);
}
std::uint64_t output_grad_stream(std::uint64_t sequence) {
  return mix64((1ULL << 62) + 2 * sequence + 1);
}

Group reduce_group(ParamGroup g) {
  return g == ParamGroup::dense ? Group::data : Group::expert_data;
}
}  // namespace

TrainingStep::TrainingStep(const RunConfig& config, const Topology& topo, Compute& compute,
                           Communicator& comm)
    : config_(config),
      topo_(topo),
      compute_(compute),
      comm_(comm),
      tokens_(config.workload.tokens_per_rank()),
      params_(compute, config, topo),
      timer_(compute) {
  const std::int64_t h = config.model.hidden_size;
  for (int l = 0; l < config.workload.layers; ++l) layers_.emplace_back(l);
  for (int l = 0; l <= config.workload.layers; ++l) acts_.push_back(compute.alloc(tokens_, h));
  const std::int64_t padded[2] = {params_.padded_numel(ParamGroup::dense),
                                  params_.padded_numel(ParamGroup::expert)};
  const bool zero1 = config.grad_reduce == GradReduce::reduce_scatter;
  buckets_ = make_grad_buckets(params_.infos(), padded, config.grad_bucket_bytes,
                               dtype_size(params_.flat_grads(ParamGroup::dense).dtype),
                               zero1 || !config.overlap);
  if (!config.overlap) {
    // Without overlap the groups are reduced after the backward, dense first.
    std::stable_sort(buckets_.begin(), buckets_.end(),
                     [](const GradBucket& a, const GradBucket& b) {
                       return a.group == ParamGroup::dense && b.group != ParamGroup::dense;
                     });
  }
  dout_ = compute.alloc(tokens_, h);
  grad_a_ = compute.alloc(tokens_, h);
  grad_b_ = compute.alloc(tokens_, h);
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    const int i = static_cast<int>(g);
    const std::int64_t size = comm.info(reduce_group(g)).size;
    const std::int64_t n = config.grad_reduce == GradReduce::reduce_scatter
                               ? params_.padded_numel(g) / size
                               : params_.padded_numel(g);
    if (config.grad_reduce == GradReduce::reduce_scatter) {
      shard_grads_[i] = compute.alloc(n, 1);
      shard_params_[i] = compute.alloc(n, 1);
    }
    if (config.optimizer == Optimizer::adamw) {
      adam_m_[i] = compute.alloc(n, 1, DType::f32);
      adam_v_[i] = compute.alloc(n, 1, DType::f32);
      // Lower-precision storage (BF16): the optimiser keeps FP32 master weights, as mixed-
      // precision trainers do (Megatron-LM's main params), of the range this rank updates.
      if (params_.flat_params(g).dtype != DType::f32) master_[i] = compute.alloc(n, 1, DType::f32);
    }
  }
}

void TrainingStep::initialize() {
  params_.initialize(config_.seed);
  const std::int64_t seq = config_.workload.seq_len;
  // Sequence s of the global batch: data-parallel rank d holds sequences [d * mb, (d + 1) * mb).
  const std::int64_t first_seq =
      static_cast<std::int64_t>(topo_.group(Group::data).rank) * config_.workload.micro_batch;
  for (std::int64_t b = 0; b < config_.workload.micro_batch; ++b) {
    const auto s = static_cast<std::uint64_t>(first_seq + b);
    compute_.fill_random(acts_[0].view().row_slice(b * seq, seq), config_.seed, input_stream(s),
                         1.0f);
    compute_.fill_random(dout_.view().row_slice(b * seq, seq), config_.seed, output_grad_stream(s),
                         1.0f);
  }
  for (Tensor* t : {&adam_m_[0], &adam_m_[1], &adam_v_[0], &adam_v_[1]}) {
    if (!t->empty()) compute_.zero(*t);
  }
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    Tensor& master = master_[static_cast<int>(g)];
    if (master.empty()) continue;
    compute_.copy(params_.flat_params(g).row_slice(reduced_grads_offset(g), master.rows()), master);
  }
  optimizer_steps_ = 0;
}

// Host synchronisations inside the timed step, the only ones:
//  - MoeBlock::forward downloads the router's choices to build the all-to-all counts (after
//    Communicator::synchronize(), which has nothing in flight there), then exchanges the counts
//    with a blocking host collective (alltoall_counts);
//  - with --comm-barrier on, the barrier before a collective (LayerContext::wait_for_group; not
//    before gradient buckets with --overlap on, where it would serialise them with the backward);
//  - the end of the step: Communicator::synchronize(), then Compute::synchronize().
// Everything else is ordered on the streams; phase times come from compute marks read after the
// step (harness/measure/phase_timer.hpp). On host backends every call returns when its work is
// done, so the host clock is the marks' clock.
StepSample TrainingStep::run() {
  StepSample sample;
  compute_.synchronize();
  comm_.synchronize();
  comm_.clear_requests();
  timer_.reset();
  bucket_requests_.clear();
  LayerContext ctx{compute_, comm_, timer_, sample, config_, topo_, params_};
  ctx.tokens = tokens_;
  ctx.first_token = static_cast<std::int64_t>(topo_.group(Group::data).rank) * tokens_;

  const Clock::time_point start = Clock::now();
  {
    auto scope = timer_.scope(Phase::optimizer);  // the optimiser's zero_grad
    params_.zero_grads();
  }
  for (std::size_t l = 0; l < layers_.size(); ++l) layers_[l].forward(ctx, acts_[l], acts_[l + 1]);
  Mat dout = dout_;
  Tensor* bufs[2] = {&grad_a_, &grad_b_};
  for (std::size_t i = layers_.size(); i-- > 0;) {
    Mat dx = *bufs[i % 2];
    layers_[i].backward(ctx, dout, dx);
    if (config_.overlap) start_buckets(ctx, static_cast<int>(i));
    dout = dx;
  }
  input_grad_ = dout;
  reduce_gradients(ctx);
  if (config_.optimizer == Optimizer::adamw) optimizer_step(ctx);
  comm_.synchronize();
  compute_.synchronize();
  sample.step_time_s = seconds_since(start);
  sample.time_s = timer_.times();
  for (const auto& [phase, r] : ctx.requests) {
    sample.busy_s[static_cast<std::size_t>(phase)] += comm_.busy_time_s(r);
  }
  return sample;
}

CommRequest TrainingStep::start_bucket(LayerContext& ctx, const GradBucket& b) {
  auto scope = timer_.scope(Phase::grad_reduce);
  const Group group = reduce_group(b.group);
  const int n = comm_.info(group).size;
  const Mat grads = params_.flat_grads(b.group).row_slice(b.offset, b.numel);
  const double bytes = static_cast<double>(grads.rows) * dtype_size(grads.dtype);
  if (config_.grad_reduce == GradReduce::allreduce) {
    ctx.add_bytes(Phase::grad_reduce, bytes, bus_bandwidth_factor(CollectiveKind::allreduce, n), n);
    return ctx.track(Phase::grad_reduce,
                     comm_.start_allreduce_sum(group, grads, CommLane::background));
  }
  ctx.add_bytes(Phase::grad_reduce, bytes, bus_bandwidth_factor(CollectiveKind::reduce_scatter, n),
                n);
  return ctx.track(Phase::grad_reduce, comm_.start_reduce_scatter_sum(
                                           group, grads, shard_grads_[static_cast<int>(b.group)],
                                           CommLane::background));
}

void TrainingStep::start_buckets(LayerContext& ctx, int layer) {
  for (const GradBucket& b : buckets_) {
    if (b.ready_layer == layer) bucket_requests_.push_back(start_bucket(ctx, b));
  }
}

void TrainingStep::reduce_gradients(LayerContext& ctx) {
  if (config_.overlap) {
    // Started during the backward, on the background lane; what is left is exposed here.
    for (CommRequest r : bucket_requests_) ctx.wait(Phase::grad_reduce, r);
    return;
  }
  for (const GradBucket& b : buckets_) {
    ctx.wait_for_group(reduce_group(b.group));
    ctx.wait(Phase::grad_reduce, start_bucket(ctx, b));
  }
}

void TrainingStep::optimizer_step(LayerContext& ctx) {
  ++optimizer_steps_;
  AdamWStep s;
  s.lr = static_cast<float>(config_.adamw.lr);
  s.beta1 = static_cast<float>(config_.adamw.beta1);
  s.beta2 = static_cast<float>(config_.adamw.beta2);
  s.eps = static_cast<float>(config_.adamw.eps);
  s.weight_decay = static_cast<float>(config_.adamw.weight_decay);
  // The mean over the global batch: the data-parallel replicas' sum, divided by their number.
  s.grad_scale = 1.0f / static_cast<float>(topo_.group(Group::data).size);
  s.step = optimizer_steps_;
  const bool zero1 = config_.grad_reduce == GradReduce::reduce_scatter;
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    const int i = static_cast<int>(g);
    const Mat params = params_.flat_params(g);
    if (!zero1) {
      auto scope = timer_.scope(Phase::optimizer);
      compute_.adamw(s, params, params_.flat_grads(g), adam_m_[i], adam_v_[i], master_[i]);
      continue;
    }
    const Group group = reduce_group(g);
    const Mat shard = shard_params_[i];
    {
      auto scope = timer_.scope(Phase::optimizer);
      // With a master copy the update writes the whole shard; without, it starts from it.
      if (master_[i].empty()) {
        compute_.copy(params.row_slice(reduced_grads_offset(g), shard.rows), shard);
      }
      compute_.adamw(s, shard, shard_grads_[i], adam_m_[i], adam_v_[i], master_[i]);
    }
    ctx.wait_for_group(group);
    CommRequest r;
    {
      auto scope = timer_.scope(Phase::grad_reduce);
      r = ctx.track(Phase::grad_reduce,
                    comm_.start_allgather(group, shard, params, CommLane::background));
    }
    ctx.wait(Phase::grad_reduce, r);
    const int n = comm_.info(group).size;
    ctx.add_bytes(Phase::grad_reduce, static_cast<double>(params.rows) * dtype_size(params.dtype),
                  bus_bandwidth_factor(CollectiveKind::allgather, n), n);
  }
}

Mat TrainingStep::output() const {
  return acts_.back();
}
Mat TrainingStep::input_grad() const {
  return input_grad_;
}

Mat TrainingStep::reduced_grads(ParamGroup g) const {
  if (config_.grad_reduce == GradReduce::reduce_scatter) return shard_grads_[static_cast<int>(g)];
  return params_.flat_grads(g);
}

std::int64_t TrainingStep::reduced_grads_offset(ParamGroup g) const {
  if (config_.grad_reduce != GradReduce::reduce_scatter) return 0;
  return static_cast<std::int64_t>(comm_.info(reduce_group(g)).rank) *
         shard_grads_[static_cast<int>(g)].rows();
}

}  // namespace moebench
