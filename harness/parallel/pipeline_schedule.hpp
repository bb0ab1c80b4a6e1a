// The pipeline schedule: the forward and backward passes one pipeline rank runs in one step, in
// order, as Megatron-Core's schedules run them (megatron/core/pipeline_parallel/schedules.py):
// 1F1B for one model chunk per rank (forward_backward_pipelining_without_interleaving), the
// interleaved 1F1B for V > 1 (forward_backward_pipelining_with_interleaving, micro-batches taken in
// groups of P per chunk). Pure functions: the step executes the list, the tests check it.
#pragma once

#include <string>
#include <vector>

namespace moebench {

struct PipelineOp {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;
  bool operator==(const PipelineOp&) const = default;
};

struct PipelineShape {
  int pp = 1;            // pipeline ranks
  int vp = 1;            // model chunks per rank
  int microbatches = 1;  // per step
};

// UsageError when Megatron's schedules cannot run the shape: V > 1 needs pp >= 2 and
// micro-batches a multiple of pp.
void validate(const PipelineShape& s);

// The warm-up forwards before the first backward on `pp_rank` (the rest are 1F1B, then the
// cool-down backwards).
int warmup_forwards(const PipelineShape& s, int pp_rank);
// All 2 x V x microbatches passes of `pp_rank`, in the order they run.
std::vector<PipelineOp> pipeline_schedule(const PipelineShape& s, int pp_rank);

// The bubble's share of an ideal step, (P - 1) / (V x m): the time a stage idles while the
// pipeline fills and drains, over the time of its own passes.
double theoretical_bubble(const PipelineShape& s);

// One point-to-point transfer between neighbouring stages: an activation (forward) or its
// gradient (backward) of one micro-batch, from virtual stage `from` to `to` (stage s is chunk
// s / pp of pipeline rank s % pp).
struct PipelineTransfer {
  bool activation = true;
  int microbatch = 0;
  int from = 0;
  int to = 0;
  bool operator==(const PipelineTransfer&) const = default;
};

// The transfers a pass receives before it runs and sends after it: nothing into the first stage's
// forward or the last stage's backward.
struct PassTransfers {
  std::vector<PipelineTransfer> recv;
  std::vector<PipelineTransfer> send;
};
PassTransfers pass_transfers(const PipelineShape& s, int pp_rank, const PipelineOp& op);

// The exchanges `pp_rank` runs, paired as Megatron's schedules pair them
// (send_forward_recv_backward, send_backward_recv_forward, and in the interleaved steady state
// send_forward_backward_recv_forward_backward): the passes form blocks, every pass its own in
// 1F1B, and in the interleaved schedule each warm-up forward and cool-down backward its own and
// each steady-state forward with the backward after it (pairing 1F1B's that way would make every
// block wait a round trip, pairing the interleaved one's pass by pass deadlocks); the batch
// before a block sends what the previous block produced and receives what this block needs, all
// at once (one batch_isend_irecv: NCCL and MPI progress its sends and receives together), and
// completes before the block runs. The last batch sends the last block's output.
struct P2PBatch {
  std::size_t first_pass = 0;  // the block it precedes: passes [first_pass, first_pass + passes)
  std::size_t passes = 0;
  std::vector<PipelineTransfer> send;
  std::vector<PipelineTransfer> recv;
};
std::vector<P2PBatch> p2p_batches(const PipelineShape& s, int pp_rank);

// Runs every rank's batches under rendezvous semantics (a batch completes once every peer has
// posted the matching transfers: a send waits for its receive as much as the reverse) and checks
// that transfers between each pair of ranks are posted in the same order on both sides (NCCL and
// MPI match them in order): "" when the whole step completes, else what stalled or mismatched. For
// the tests and for validation.
std::string check_p2p_batches(const PipelineShape& s);
// The same check of any batches, one list per pipeline rank (the tests feed it wrong ones).
std::string check_p2p_batches(const PipelineShape& s,
                              const std::vector<std::vector<P2PBatch>>& per_rank);

}  // namespace moebench
