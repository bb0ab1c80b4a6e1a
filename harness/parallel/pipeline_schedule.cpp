#include "harness/parallel/pipeline_schedule.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "harness/core/error.hpp"

namespace moebench {

void validate(const PipelineShape& s) {
  const auto str = [](int v) { return std::to_string(v); };
  if (s.pp < 1) throw UsageError("--pp must be >= 1, got " + str(s.pp));
  if (s.vp < 1) throw UsageError("--vp must be >= 1, got " + str(s.vp));
  if (s.microbatches < 1) {
    throw UsageError("a step needs at least one micro-batch, got " + str(s.microbatches));
  }
  if (s.vp > 1 && s.pp < 2) {
    throw UsageError("--vp " + str(s.vp) +
                     " needs --pp >= 2: the interleaved schedule spreads model chunks over "
                     "pipeline ranks");
  }
  if (s.vp > 1 && s.microbatches % s.pp != 0) {
    throw UsageError("the interleaved schedule (--vp " + str(s.vp) +
                     ") needs micro-batches per "
                     "step a multiple of --pp " +
                     str(s.pp) + ", got " + str(s.microbatches) +
                     " (global batch / (micro-batch x dp)); use a global batch of " + str(s.pp) +
                     " x micro-batch x dp x k sequences");
  }
}

namespace {
// Megatron's schedule table of the interleaved schedule: micro-batches in groups of pp, each
// group through chunk 0, then chunk 1, ...
std::vector<PipelineOp> interleaved_table(const PipelineShape& s) {
  std::vector<PipelineOp> table;
  for (int first = 0; first < s.microbatches; first += s.pp) {
    const int last = std::min(first + s.pp, s.microbatches);
    for (int c = 0; c < s.vp; ++c) {
      for (int mb = first; mb < last; ++mb) table.push_back({true, mb, c});
    }
  }
  return table;
}
}  // namespace

int warmup_forwards(const PipelineShape& s, int pp_rank) {
  if (s.vp == 1) return std::min(s.pp - pp_rank - 1, s.microbatches);
  const int total = s.microbatches * s.vp;
  return std::min((s.pp - pp_rank - 1) * 2 + (s.vp - 1) * s.pp, total);
}

std::vector<PipelineOp> pipeline_schedule(const PipelineShape& s, int pp_rank) {
  validate(s);
  std::vector<PipelineOp> fwd, bwd;
  if (s.vp == 1) {
    for (int mb = 0; mb < s.microbatches; ++mb) {
      fwd.push_back({true, mb, 0});
      bwd.push_back({false, mb, 0});
    }
  } else {
    for (const PipelineOp& op : interleaved_table(s)) {
      fwd.push_back(op);
      bwd.push_back({false, op.microbatch, s.vp - 1 - op.chunk});
    }
  }
  const int total = static_cast<int>(fwd.size());
  const int warmup = warmup_forwards(s, pp_rank);
  std::vector<PipelineOp> out;
  for (int k = 0; k < warmup; ++k) out.push_back(fwd[k]);
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(fwd[warmup + k]);
    out.push_back(bwd[k]);
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(bwd[k]);
  return out;
}

double theoretical_bubble(const PipelineShape& s) {
  return static_cast<double>(s.pp - 1) / (static_cast<double>(s.vp) * s.microbatches);
}

PassTransfers pass_transfers(const PipelineShape& s, int pp_rank, const PipelineOp& op) {
  const int stage = op.chunk * s.pp + pp_rank;
  const int last = s.pp * s.vp - 1;
  PassTransfers t;
  if (op.forward) {
    if (stage > 0) t.recv.push_back({true, op.microbatch, stage - 1, stage});
    if (stage < last) t.send.push_back({true, op.microbatch, stage, stage + 1});
  } else {
    if (stage < last) t.recv.push_back({false, op.microbatch, stage + 1, stage});
    if (stage > 0) t.send.push_back({false, op.microbatch, stage, stage - 1});
  }
  return t;
}

std::vector<P2PBatch> p2p_batches(const PipelineShape& s, int pp_rank) {
  const std::vector<PipelineOp> ops = pipeline_schedule(s, pp_rank);
  const std::size_t total = ops.size() / 2;  // forwards (= backwards)
  const std::size_t warmup = static_cast<std::size_t>(warmup_forwards(s, pp_rank));
  // Blocks: warm-up forwards alone, steady-state (forward, backward) pairs, cool-down backwards.
  std::vector<std::pair<std::size_t, std::size_t>> blocks;
  std::size_t k = 0;
  for (std::size_t i = 0; i < warmup; ++i, ++k) blocks.emplace_back(k, 1);
  // 1F1B exchanges after every pass (Megatron's send_forward_recv_backward, then
  // send_backward_recv_forward); the interleaved schedule after every (forward, backward) pair.
  const std::size_t pair = s.vp == 1 ? 1 : 2;
  for (std::size_t i = 0; i < total - warmup; ++i) {
    for (std::size_t j = 0; j < 2; j += pair, k += pair) blocks.emplace_back(k, pair);
  }
  for (; k < ops.size(); ++k) blocks.emplace_back(k, 1);
  std::vector<P2PBatch> batches(blocks.size() + 1);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    batches[b].first_pass = blocks[b].first;
    batches[b].passes = blocks[b].second;
    for (std::size_t p = blocks[b].first; p < blocks[b].first + blocks[b].second; ++p) {
      const PassTransfers t = pass_transfers(s, pp_rank, ops[p]);
      batches[b].recv.insert(batches[b].recv.end(), t.recv.begin(), t.recv.end());
      batches[b + 1].send.insert(batches[b + 1].send.end(), t.send.begin(), t.send.end());
    }
  }
  batches.back().first_pass = ops.size();
  return batches;
}

std::string check_p2p_batches(const PipelineShape& s) {
  std::vector<std::vector<P2PBatch>> all;
  for (int r = 0; r < s.pp; ++r) all.push_back(p2p_batches(s, r));
  return check_p2p_batches(s, all);
}

std::string check_p2p_batches(const PipelineShape& s,
                              const std::vector<std::vector<P2PBatch>>& all) {
  const int P = s.pp;
  const auto rank_of = [&](int stage) { return stage % P; };
  // Matching order: the sends from a to b, in a's order, equal the receives b posts from a.
  std::map<std::pair<int, int>, std::vector<PipelineTransfer>> sends, recvs;
  for (int r = 0; r < P; ++r) {
    for (const P2PBatch& b : all[r]) {
      for (const PipelineTransfer& t : b.send) sends[{r, rank_of(t.to)}].push_back(t);
      for (const PipelineTransfer& t : b.recv) recvs[{rank_of(t.from), r}].push_back(t);
    }
  }
  if (sends != recvs) {
    for (const auto& [pair, list] : sends) {
      if (recvs[pair] != list) {
        return "transfers from pipeline rank " + std::to_string(pair.first) + " to " +
               std::to_string(pair.second) + " are received in a different order than sent";
      }
    }
    return "a transfer is received that no rank sends";
  }
  // Rendezvous: each rank waits at its current batch until every transfer in it is posted by the
  // peer (in the peer's current batch, or an earlier one it has completed).
  // A transfer's identity on both sides: (is the send, (micro-batch and direction, from stage)).
  using Key = std::pair<bool, std::pair<int, int>>;
  const auto key = [](bool send, const PipelineTransfer& t) {
    return Key{send, {t.microbatch * 2 + (t.activation ? 0 : 1), t.from}};
  };
  std::vector<std::map<Key, int>> posted_at(P);
  for (int r = 0; r < P; ++r) {
    for (std::size_t k = 0; k < all[r].size(); ++k) {
      for (const PipelineTransfer& t : all[r][k].send) {
        posted_at[r][key(true, t)] = static_cast<int>(k);
      }
      for (const PipelineTransfer& t : all[r][k].recv) {
        posted_at[r][key(false, t)] = static_cast<int>(k);
      }
    }
  }
  std::vector<int> at(P, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      if (at[r] >= static_cast<int>(all[r].size())) continue;
      const P2PBatch& b = all[r][static_cast<std::size_t>(at[r])];
      bool ready = true;
      for (const PipelineTransfer& t : b.send) {
        const int peer = rank_of(t.to);
        ready = ready && posted_at[peer].at(key(false, t)) <= at[peer];
      }
      for (const PipelineTransfer& t : b.recv) {
        const int peer = rank_of(t.from);
        ready = ready && posted_at[peer].at(key(true, t)) <= at[peer];
      }
      if (ready) {
        ++at[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < P; ++r) {
    if (at[r] < static_cast<int>(all[r].size())) {
      std::ostringstream os;
      os << "pipeline rank " << r << " stalls at exchange " << at[r] << " of " << all[r].size();
      return os.str();
    }
  }
  return "";
}

}  // namespace moebench
