// One training step of the instantiated stack on this rank: forward through every layer,
// backward from a seeded output gradient, data-parallel gradient reduction (dense parameters over
// the data group, experts over their expert-data group; all-reduce, or ZeRO-1
// reduce-scatter + all-gather; with --overlap on in buckets during the backward), then AdamW. The
// input and the output gradient of every sequence are pure functions of (seed, global sequence
// index), so a single process holding all sequences (the --verify reference) computes the same
// step.
#pragma once

#include <memory>
#include <vector>

#include "harness/measure/phase_timer.hpp"
#include "workloads/layers/transformer_layer.hpp"
#include "workloads/params/parameters.hpp"
#include "workloads/step/grad_buckets.hpp"

namespace moebench {

class TrainingStep {
 public:
  TrainingStep(const RunConfig& config, const Topology& topo, Compute& compute, Communicator& comm);

  // Weights, optimiser state, the input and the output gradient, from the seed.
  void initialize();
  // Runs one full step and returns what this rank measured.
  StepSample run();

  const ParamStore& params() const { return params_; }
  Mat output() const;      // the last layer's output (tokens x hidden)
  Mat input_grad() const;  // d loss / d input (tokens x hidden)
  // The reduced gradient this rank holds after the step: the whole group buffer (all-reduce) or
  // its ZeRO-1 shard, and the first flat element it covers.
  Mat reduced_grads(ParamGroup g) const;
  std::int64_t reduced_grads_offset(ParamGroup g) const;
  std::int64_t tokens() const { return tokens_; }
  // The gradient buckets, in the order they are reduced: with --overlap on, runs of whole layers
  // of at least --grad-bucket-mb (ZeRO-1: one per group), started as the backward completes them;
  // off, one per group after the backward.
  const std::vector<GradBucket>& grad_buckets() const { return buckets_; }

 private:
  // Starts the reduction of every bucket that layer `layer`'s backward completed (--overlap on).
  void start_buckets(LayerContext& ctx, int layer);
  CommRequest start_bucket(LayerContext& ctx, const GradBucket& b);
  void reduce_gradients(LayerContext& ctx);
  void optimizer_step(LayerContext& ctx);

  const RunConfig& config_;
  const Topology& topo_;
  Compute& compute_;
  Communicator& comm_;
  std::int64_t tokens_ = 0;
  ParamStore params_;
  PhaseTimer timer_;
  std::vector<TransformerLayer> layers_;
  std::vector<Tensor> acts_;  // acts_[l] is the input of layer l; acts_[L] the output
  Tensor dout_, grad_a_, grad_b_;
  Mat input_grad_;
  Tensor shard_grads_[2], shard_params_[2];
  Tensor adam_m_[2], adam_v_[2];
  Tensor master_[2];  // FP32 master weights of BF16 parameters (empty with FP32 storage)
  int optimizer_steps_ = 0;
  std::vector<GradBucket> buckets_;
  std::vector<CommRequest> bucket_requests_;  // of the buckets started in this step
};

}  // namespace moebench
