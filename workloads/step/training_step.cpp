#include "workloads/step/training_step.hpp"

#include <algorithm>

#include "harness/core/clock.hpp"
#include "harness/math/random.hpp"
#include "harness/measure/stats.hpp"
#include "workloads/step/token_ids.hpp"

namespace moebench {

namespace {
// Streams of the synthetic data, apart from every weight's stream (harness/math/random.hpp).
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
      shape_(pipeline_shape(config)),
      pp_rank_(topo.group(Group::pipeline).rank),
      tokens_(config.workload.tokens_per_rank()),
      params_(compute, config, topo),
      timer_(compute),
      scratch_(compute) {
  const std::int64_t h = config.model.hidden_size;
  const PipelineLayout layout = pipeline_layout(config);
  last_stage_index_ = shape_.pp * shape_.vp - 1;
  for (int c = 0; c < shape_.vp; ++c) {
    Chunk chunk;
    chunk.stage = layout.stage_index(pp_rank_, c);
    const PipelineStage& st = layout.stage(pp_rank_, c);
    for (int l = 0; l < st.layers; ++l) chunk.layers.push_back(st.first_layer + l);
    chunks_.push_back(std::move(chunk));
  }
  first_stage_ = chunks_.front().stage == 0;
  last_stage_ = chunks_.back().stage == last_stage_index_;
  head_ = config.workload.head;
  const std::int64_t loss_batch =
      config.loss_micro_batch > 0 ? config.loss_micro_batch : config.workload.micro_batch;
  loss_scale_ = 1.0f / static_cast<float>(loss_batch * config.workload.seq_len);
  embedding_sync_ = head_ && config.workload.mtp > 0 && shape_.pp > 1 &&
                    params_.has(kEmbeddingLayer, ParamKind::embedding);
  schedule_ = pipeline_schedule(shape_, pp_rank_);
  batches_ = p2p_batches(shape_, pp_rank_);
  const std::int64_t rows = tokens_ * shape_.microbatches;
  if (head_) {
    if (first_stage_ || last_stage_) {
      token_ids_ = compute.alloc(rows, config.workload.mtp + 2, DType::i32);
    }
    if (last_stage_) {
      losses_ = compute.alloc(rows, config.workload.mtp + 1, DType::f32);
      head_grad_ = compute.alloc(tokens_, h);
    }
  } else {
    if (first_stage_) inputs_ = compute.alloc(rows, h);
    if (last_stage_) douts_ = compute.alloc(rows, h);
    if (config.verify && last_stage_) outputs_ = compute.alloc(rows, h);
    if (config.verify && first_stage_) input_grads_ = compute.alloc(rows, h);
  }
  if (shape_.pp > 1) {
    grad_recv_ = compute.alloc(tokens_, h);
    grad_send_ = compute.alloc(tokens_, h);
  }

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
  grad_a_ = compute.alloc(tokens_, h);
  grad_b_ = compute.alloc(tokens_, h);
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    const int i = static_cast<int>(g);
    const std::int64_t size = comm.info(reduce_group(g)).size;
    const std::int64_t n = config.grad_reduce == GradReduce::reduce_scatter
                               ? params_.padded_numel(g) / size
                               : params_.padded_numel(g);
    if (config.grad_reduce == GradReduce::reduce_scatter) {
      shard_grads_[i] = compute.alloc(n, 1, params_.flat_grads(g).dtype);
      shard_params_[i] = compute.alloc(n, 1);
    }
    if (config.optimizer == Optimizer::adamw) {
      // --optimizer-state-dtype bf16: the moments in the storage type (BF16 on cuda).
      const DType moments = config.optimizer_state_dtype == OptimizerStateDtype::bf16
                                ? compute.activation_dtype()
                                : DType::f32;
      adam_m_[i] = compute.alloc(n, 1, moments);
      adam_v_[i] = compute.alloc(n, 1, moments);
      // Lower-precision storage (BF16): the optimiser keeps FP32 master weights, as mixed-
      // precision trainers do (Megatron-LM's main params), of the range this rank updates.
      if (params_.flat_params(g).dtype != DType::f32) master_[i] = compute.alloc(n, 1, DType::f32);
    }
  }
}

std::int64_t TrainingStep::first_sequence(int mb) const {
  // Micro-batch j of data-parallel rank d holds sequences [(j dp + d) M, (j dp + d + 1) M).
  const std::int64_t dp = topo_.group(Group::data).size, d = topo_.group(Group::data).rank;
  return (static_cast<std::int64_t>(mb) * dp + d) * config_.workload.micro_batch;
}

void TrainingStep::initialize() {
  params_.initialize(config_.seed);
  const std::int64_t seq = config_.workload.seq_len;
  for (int mb = 0; !token_ids_.empty() && mb < shape_.microbatches; ++mb) {
    const std::vector<std::int32_t> ids =
        token_id_rows(config_.seed, first_sequence(mb), config_.workload.micro_batch, seq,
                      static_cast<int>(token_ids_.cols()), config_.model.vocab_size);
    compute_.upload_i32(ids.data(), token_ids(mb));
  }
  for (int mb = 0; !head_ && mb < shape_.microbatches; ++mb) {
    for (std::int64_t b = 0; b < config_.workload.micro_batch; ++b) {
      const auto s = static_cast<std::uint64_t>(first_sequence(mb) + b);
      const std::int64_t row = mb * tokens_ + b * seq;
      if (first_stage_) {
        compute_.fill_random(inputs_.view().row_slice(row, seq), config_.seed, input_stream(s),
                             1.0f);
      }
      if (last_stage_) {
        compute_.fill_random(douts_.view().row_slice(row, seq), config_.seed, output_grad_stream(s),
                             1.0f);
      }
    }
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

TrainingStep::Slot& TrainingStep::acquire(Chunk& chunk, int mb) {
  std::unique_ptr<Slot>& slot = chunk.in_flight[mb];
  if (slot) return *slot;
  slot = std::make_unique<Slot>();
  for (int l : chunk.layers) slot->layers.emplace_back(l);
  for (std::size_t i = 0; i <= chunk.layers.size(); ++i) {
    slot->acts.push_back(compute_.alloc(tokens_, config_.model.hidden_size));
  }
  if (head_ && chunk.stage == last_stage_index_) {
    slot->head = std::make_unique<ModelHead>(config_.workload);
  }
  return *slot;
}

void TrainingStep::exchange(LayerContext& ctx, std::size_t b) {
  const P2PBatch& batch = batches_[b];
  if (batch.send.empty() && batch.recv.empty()) return;
  // The sends of what the previous block produced (its outputs, its input gradients), then the
  // receives this block reads, in one batch: the order both sides agree on
  // (harness/parallel/pipeline_schedule.hpp checks it).
  std::vector<P2POp> ops;
  for (const PipelineTransfer& t : batch.send) {
    Chunk& chunk = chunk_of_stage(t.from);
    const Mat buf =
        t.activation ? chunk.in_flight.at(t.microbatch)->acts.back().view() : grad_send_.view();
    ops.push_back({P2POp::Kind::send, rank_of_stage(t.to), buf});
    ctx.add_bytes(Phase::pp_bubble, static_cast<double>(buf.numel()) * dtype_size(buf.dtype), 1.0,
                  2);
  }
  for (const PipelineTransfer& t : batch.recv) {
    Chunk& chunk = chunk_of_stage(t.to);
    const Mat buf =
        t.activation ? acquire(chunk, t.microbatch).acts.front().view() : grad_recv_.view();
    ops.push_back({P2POp::Kind::recv, rank_of_stage(t.from), buf});
  }
  CommRequest r;
  {
    auto scope = timer_.scope(Phase::pp_bubble);
    r = ctx.track(Phase::pp_bubble,
                  comm_.start_batch_p2p(Group::pipeline, ops, CommLane::pipeline));
  }
  ctx.wait(Phase::pp_bubble, r);
}

void TrainingStep::forward(LayerContext& ctx, int mb, Chunk& chunk) {
  Slot& slot = acquire(chunk, mb);
  ctx.first_token = first_sequence(mb) * config_.workload.seq_len;
  const std::size_t n = chunk.layers.size();
  Mat x = slot.acts.front().view();
  if (chunk.stage == 0 && head_) {
    embedding_forward(ctx, token_ids(mb).col_slice(0, 1), x);
  } else if (chunk.stage == 0) {
    x = inputs_.view().row_slice(mb * tokens_, tokens_);
    if (n == 0) compute_.copy(x, slot.acts.back());  // an empty first stage
  }
  for (std::size_t i = 0; i < n; ++i) {
    Mat out = slot.acts[i + 1];
    slot.layers[i].forward(ctx, x, out);
    x = out;
  }
  if (chunk.stage != last_stage_index_) return;
  if (head_) {
    slot.head->forward(ctx, slot.acts.back(), token_ids(mb), loss_scale_,
                       losses_.view().row_slice(mb * tokens_, tokens_));
  } else if (!outputs_.empty()) {
    compute_.copy(slot.acts.back(), outputs_.view().row_slice(mb * tokens_, tokens_));
  }
}

void TrainingStep::backward(LayerContext& ctx, int mb, Chunk& chunk) {
  Slot& slot = *chunk.in_flight.at(mb);
  ctx.first_token = first_sequence(mb) * config_.workload.seq_len;
  const bool last_microbatch = mb == shape_.microbatches - 1;
  const auto done = [&](int layer) {
    if (config_.overlap && last_microbatch) start_buckets(ctx, layer);
  };
  Mat dout = grad_recv_.view();
  if (chunk.stage == last_stage_index_ && head_) {
    slot.head->backward(ctx, token_ids(mb), head_grad_, done);
    dout = head_grad_;
  } else if (chunk.stage == last_stage_index_) {
    dout = douts_.view().row_slice(mb * tokens_, tokens_);
  }
  // Where the chunk's input gradient goes: the previous stage's send buffer, or (first stage)
  // the kept input gradients.
  Mat target;
  if (chunk.stage > 0) {
    target = grad_send_;
  } else if (!input_grads_.empty()) {
    target = input_grads_.view().row_slice(mb * tokens_, tokens_);
  } else {
    target = grad_a_;  // nobody reads it
  }
  const std::size_t n = chunk.layers.size();
  const bool embeds = chunk.stage == 0 && head_;
  if (n == 0 && !embeds) compute_.copy(dout, target);
  Tensor* bufs[2] = {&grad_a_, &grad_b_};
  for (std::size_t i = n; i-- > 0;) {
    Mat dx = i == 0 ? target : Mat(*bufs[i % 2]);
    if (dx.data == dout.data) dx = *bufs[(i + 1) % 2];
    slot.layers[i].backward(ctx, dout, dx);
    done(chunk.layers[i]);
    dout = dx;
  }
  if (embeds) {
    embedding_backward(ctx, token_ids(mb).col_slice(0, 1), dout);
    // A copy kept equal to the last stage's starts its buckets once the two are summed.
    if (!embedding_sync_) done(kEmbeddingLayer);
  }
  // Done with the slot: its output was sent in the batch after its forward.
  chunk.in_flight.erase(mb);
}

// Host synchronisations inside the timed step, the only ones:
//  - MoeBlock::forward downloads the router's choices to build the all-to-all counts (after
//    Communicator::synchronize(), which has nothing in flight there), then exchanges the counts
//    with a blocking host collective (alltoall_counts);
//  - with --comm-barrier on, the barrier before a collective (LayerContext::wait_for_group; not
//    before gradient buckets with --overlap on, where it would serialise them with the backward);
//  - the end of the step: Communicator::synchronize(), then Compute::synchronize().
// Each pipeline exchange is waited for on the compute stream (nccl) or the host (mpi) before the
// block of passes that reads it, as pp_bubble. Everything else is ordered on the streams; phase
// times come from compute marks read after the step (harness/measure/phase_timer.hpp). On host
// backends every call returns when its work is done, so the host clock is the marks' clock.
StepSample TrainingStep::run() {
  StepSample sample;
  compute_.begin_step();  // the optimiser changed the weights: fp8 quantises them afresh
  compute_.synchronize();
  comm_.synchronize();
  comm_.clear_requests();
  timer_.reset();
  bucket_requests_.clear();
  LayerContext ctx{compute_, comm_, timer_, sample, config_, topo_, params_, scratch_};
  ctx.tokens = tokens_;

  const Clock::time_point start = Clock::now();
  passes_done_.store(0, std::memory_order_relaxed);
  {
    auto scope = timer_.scope(Phase::optimizer);  // the optimiser's zero_grad
    params_.zero_grads();
  }
  for (std::size_t b = 0; b < batches_.size(); ++b) {
    exchange(ctx, b);
    const P2PBatch& block = batches_[b];
    for (std::size_t k = block.first_pass; k < block.first_pass + block.passes; ++k) {
      const PipelineOp& op = schedule_[k];
      Chunk& chunk = chunks_[static_cast<std::size_t>(op.chunk)];
      if (op.forward) {
        forward(ctx, op.microbatch, chunk);
      } else {
        backward(ctx, op.microbatch, chunk);
      }
      passes_done_.store(static_cast<int>(k) + 1, std::memory_order_relaxed);
      if (pass_observer_) pass_observer_(static_cast<int>(k), seconds_since(start));
    }
  }
  sync_embedding(ctx);
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

TrainingStep::Position TrainingStep::position() const {
  Position p;
  p.passes = static_cast<int>(schedule_.size());
  p.done = std::min(passes_done_.load(std::memory_order_relaxed), p.passes);
  if (p.done < p.passes) p.current = schedule_[static_cast<std::size_t>(p.done)];
  return p;
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

void TrainingStep::sync_embedding(LayerContext& ctx) {
  if (!embedding_sync_) return;
  // Megatron-Core's embedding group: the first and the last pipeline rank, whose copies of the
  // table receive the gradients of the input embedding and of the MTP layers' (the sum belongs to
  // both). Before the data-parallel reduction, so that either reduction mode sums the same.
  const Mat grad = params_.grad(kEmbeddingLayer, ParamKind::embedding);
  ctx.wait_for_group(Group::embedding);
  CommRequest r;
  {
    auto scope = timer_.scope(Phase::grad_reduce);
    r = ctx.track(Phase::grad_reduce,
                  comm_.start_allreduce_sum(Group::embedding, grad, CommLane::background));
  }
  ctx.wait(Phase::grad_reduce, r);
  ctx.add_bytes(Phase::grad_reduce, static_cast<double>(grad.numel()) * dtype_size(grad.dtype),
                bus_bandwidth_factor(CollectiveKind::allreduce, 2), 2);
  if (config_.overlap) start_buckets(ctx, kEmbeddingLayer);
}

void TrainingStep::reduce_gradients(LayerContext& ctx) {
  if (config_.overlap) {
    // Started during the last micro-batch's backward, on the background lane; what is left is
    // exposed here.
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
  // The mean over the global batch: the sum over the data-parallel replicas and the micro-batches,
  // divided by their number (each micro-batch's output gradient is that of its mean loss).
  s.grad_scale = 1.0f / static_cast<float>(topo_.group(Group::data).size * shape_.microbatches);
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
