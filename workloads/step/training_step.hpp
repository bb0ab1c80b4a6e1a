// One training step on this rank: the global batch in micro-batches, each forward through this
// rank's pipeline stages and backward from a seeded output gradient, in the order of the pipeline
// schedule (harness/parallel/pipeline_schedule.hpp: 1F1B, interleaved with --vp > 1), the stages
// exchanging activations and their gradients point to point. Weight gradients accumulate over the
// micro-batches in FP32 (Megatron's main grads); then, once per step, the data-parallel
// reduction (dense parameters over the data group, experts over their expert-data group;
// all-reduce, or ZeRO-1 reduce-scatter + all-gather; with --overlap on in buckets during the last
// micro-batch's backward) and AdamW. The input and the output gradient of every sequence are pure
// functions of (seed, global sequence index), so a single process holding all sequences and
// layers (the --verify reference) computes the same step.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "harness/measure/phase_timer.hpp"
#include "workloads/layers/model_ends.hpp"
#include "workloads/layers/transformer_layer.hpp"
#include "workloads/params/parameters.hpp"
#include "workloads/step/grad_buckets.hpp"

namespace moebench {

class TrainingStep {
 public:
  TrainingStep(const RunConfig& config, const Topology& topo, Compute& compute, Communicator& comm);

  // Weights, optimiser state, the inputs and the output gradients, from the seed.
  void initialize();
  // Runs one full step and returns what this rank measured.
  StepSample run();

  const ParamStore& params() const { return params_; }
  // With config.verify: the last stage's output of every micro-batch (micro-batches x tokens rows:
  // with --head on each token's loss per head, else its hidden state), and (--head off) d loss /
  // d input at the first stage; empty where this rank holds neither.
  Mat output() const { return head_ ? losses_.view() : outputs_.view(); }
  Mat input_grad() const { return input_grads_; }
  bool holds_first_stage() const { return first_stage_; }
  bool holds_last_stage() const { return last_stage_; }
  // The reduced gradient this rank holds after the step: the whole group buffer (all-reduce) or
  // its ZeRO-1 shard, and the first flat element it covers.
  Mat reduced_grads(ParamGroup g) const;
  std::int64_t reduced_grads_offset(ParamGroup g) const;
  std::int64_t tokens() const { return tokens_; }  // rows of one micro-batch
  int microbatches() const { return shape_.microbatches; }
  // Global index of the first sequence of micro-batch `mb` on this rank.
  std::int64_t first_sequence(int mb) const;
  // The gradient buckets, in the order they are reduced: with --overlap on, runs of whole layers
  // of at least --grad-bucket-mb (ZeRO-1: one per group), started as the last micro-batch's
  // backward completes them; off, one per group after the backward.
  const std::vector<GradBucket>& grad_buckets() const { return buckets_; }

  // Where this rank is in its pipeline schedule, readable from another thread while run() runs
  // (rank 0's progress lines): the passes done (a forward or backward of one micro-batch through
  // one chunk), and the pass under way (none once `done == passes`: reducing and the optimizer).
  struct Position {
    int done = 0;
    int passes = 0;
    PipelineOp current;
  };
  Position position() const;
  const PipelineShape& shape() const { return shape_; }
  // Called on run()'s thread after each pass (its index in the schedule, and the seconds since
  // the step started); none by default.
  void set_pass_observer(std::function<void(int pass, double since_start_s)> f) {
    pass_observer_ = std::move(f);
  }

 private:
  // One micro-batch's activations through one chunk: its layers (each keeps what its backward
  // needs) and the tensors between them. Made when the micro-batch's input arrives (or its
  // forward starts) and freed when its backward is done, so that a rank holds at once only the
  // micro-batch chunks in flight (Megatron's peak), whichever chunks they are; a device
  // backend's stream-ordered pool gives the memory straight back.
  struct Slot {
    std::vector<TransformerLayer> layers;
    std::vector<Tensor> acts;         // acts[i]: the input of layer i; acts[n]: the chunk's output
    std::unique_ptr<ModelHead> head;  // the last stage's, with --head on
  };
  struct Chunk {
    int stage = 0;
    std::vector<int> layers;                         // global indices
    std::map<int, std::unique_ptr<Slot>> in_flight;  // micro-batch -> slot
  };

  Slot& acquire(Chunk& chunk, int mb);
  void forward(LayerContext& ctx, int mb, Chunk& chunk);
  void backward(LayerContext& ctx, int mb, Chunk& chunk);
  // Runs exchange b (the previous block's sends and block b's receives, into the buffers its
  // passes read) and waits for it (pp_bubble).
  void exchange(LayerContext& ctx, std::size_t b);
  int rank_of_stage(int stage) const { return stage % shape_.pp; }
  Chunk& chunk_of_stage(int stage) { return chunks_[static_cast<std::size_t>(stage / shape_.pp)]; }

  // Starts the reduction of every bucket that layer `layer`'s backward completed (--overlap on).
  void start_buckets(LayerContext& ctx, int layer);
  CommRequest start_bucket(LayerContext& ctx, const GradBucket& b);
  // With MTP on more than one stage: the embedding's gradient summed over its two copies (the
  // first and the last stage), before the data-parallel reduction.
  void sync_embedding(LayerContext& ctx);
  void reduce_gradients(LayerContext& ctx);
  Mat token_ids(int mb) const { return token_ids_.view().row_slice(mb * tokens_, tokens_); }
  void optimizer_step(LayerContext& ctx);

  const RunConfig& config_;
  const Topology& topo_;
  Compute& compute_;
  Communicator& comm_;
  PipelineShape shape_;
  int pp_rank_ = 0;
  int last_stage_index_ = 0;
  bool first_stage_ = false, last_stage_ = false;
  std::int64_t tokens_ = 0;
  ParamStore params_;
  PhaseTimer timer_;
  Scratch scratch_;  // shared by every layer of every chunk and micro-batch
  std::vector<Chunk> chunks_;
  std::vector<PipelineOp> schedule_;
  std::atomic<int> passes_done_{0};
  std::function<void(int, double)> pass_observer_;
  std::vector<P2PBatch> batches_;
  bool head_ = false;            // --head on
  float loss_scale_ = 1.0f;      // d (step loss) / d (a token's loss): 1 / the loss's tokens
  bool embedding_sync_ = false;  // this rank holds a copy of the embedding kept equal to another
  Tensor inputs_;  // --head off, first stage: every micro-batch's input (micro-batches x tokens)
  Tensor douts_;   // --head off, last stage: every micro-batch's output gradient
  // --head on, first or last stage: every micro-batch's token ids (workloads/layers/model_ends)
  Tensor token_ids_;
  Tensor losses_;                 // --head on, last stage: every micro-batch's per-token losses
  Tensor head_grad_;              // d loss / d (the last decoder layer's output)
  Tensor outputs_, input_grads_;  // with config.verify, on the last and first stage
  Tensor grad_recv_;              // a gradient received from the next stage
  // A gradient for the previous stage: filled by a backward, sent in the next exchange, which
  // completes before the next block of passes.
  Tensor grad_send_;
  Tensor grad_a_, grad_b_;
  Tensor shard_grads_[2], shard_params_[2];
  Tensor adam_m_[2], adam_v_[2];
  Tensor master_[2];  // FP32 master weights of BF16 parameters (empty with FP32 storage)
  int optimizer_steps_ = 0;
  std::vector<GradBucket> buckets_;
  std::vector<CommRequest> bucket_requests_;  // of the buckets started in this step
};

}  // namespace moebench
