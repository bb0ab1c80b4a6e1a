// The pipeline schedules against Megatron-Core's (megatron/core/pipeline_parallel/schedules.py):
// the expected warm-up counts and orders below are written out by hand from its rules
// (forward_backward_pipelining_without_interleaving / _with_interleaving, micro-batch groups of
// pp per chunk), not computed by the code under test.
#include "harness/parallel/pipeline_schedule.hpp"

#include <doctest/doctest.h>

#include <map>
#include <set>

#include "harness/core/error.hpp"

using namespace moebench;

namespace {

std::vector<PipelineOp> forwards(const std::vector<PipelineOp>& ops) {
  std::vector<PipelineOp> out;
  for (const PipelineOp& op : ops) {
    if (op.forward) out.push_back(op);
  }
  return out;
}
std::vector<PipelineOp> backwards(const std::vector<PipelineOp>& ops) {
  std::vector<PipelineOp> out;
  for (const PipelineOp& op : ops) {
    if (!op.forward) out.push_back(op);
  }
  return out;
}

// Runs every rank's list with unit-time passes, each pass starting once its inputs exist (the
// previous stage's forward, the next stage's backward, its own forward): true when every pass
// runs, i.e. the lists are a valid pipeline schedule together.
bool runs_to_completion(const PipelineShape& s) {
  const int stages = s.pp * s.vp;
  std::vector<std::vector<PipelineOp>> lists;
  for (int r = 0; r < s.pp; ++r) lists.push_back(pipeline_schedule(s, r));
  std::set<std::tuple<bool, int, int>> done;  // (forward, microbatch, stage)
  std::vector<std::size_t> at(s.pp, 0);
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<std::tuple<bool, int, int>> now;
    for (int r = 0; r < s.pp; ++r) {
      if (at[r] == lists[r].size()) continue;
      const PipelineOp& op = lists[r][at[r]];
      const int st = op.chunk * s.pp + r;
      bool ready;
      if (op.forward) {
        ready = st == 0 || done.count({true, op.microbatch, st - 1});
      } else {
        ready = done.count({true, op.microbatch, st}) &&
                (st == stages - 1 || done.count({false, op.microbatch, st + 1}));
      }
      if (ready) {
        now.emplace_back(op.forward, op.microbatch, st);
        ++at[r];
        progress = true;
      }
    }
    done.insert(now.begin(), now.end());
  }
  for (int r = 0; r < s.pp; ++r) {
    if (at[r] != lists[r].size()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("1F1B: warm-up P - rank - 1 forwards, then one forward one backward, then cool-down") {
  const PipelineShape s{4, 1, 8};
  CHECK(warmup_forwards(s, 0) == 3);
  CHECK(warmup_forwards(s, 3) == 0);
  const std::vector<PipelineOp> r0 = pipeline_schedule(s, 0);
  REQUIRE(r0.size() == 16);
  const std::vector<PipelineOp> want0 = {
      {true, 0, 0},  {true, 1, 0},  {true, 2, 0},  {true, 3, 0}, {false, 0, 0}, {true, 4, 0},
      {false, 1, 0}, {true, 5, 0},  {false, 2, 0}, {true, 6, 0}, {false, 3, 0}, {true, 7, 0},
      {false, 4, 0}, {false, 5, 0}, {false, 6, 0}, {false, 7, 0}};
  CHECK(r0 == want0);
  const std::vector<PipelineOp> r3 = pipeline_schedule(s, 3);
  for (int mb = 0; mb < 8; ++mb) {  // the last stage alternates from the start
    CHECK(r3[2 * mb] == PipelineOp{true, mb, 0});
    CHECK(r3[2 * mb + 1] == PipelineOp{false, mb, 0});
  }
  // Fewer micro-batches than stages: all forwards first.
  CHECK(warmup_forwards({4, 1, 2}, 0) == 2);
}

TEST_CASE("interleaved: Megatron's warm-up and the chunk order of micro-batch groups") {
  const PipelineShape s{4, 2, 8};
  // (P - rank - 1) * 2 + (V - 1) * P
  CHECK(warmup_forwards(s, 0) == 10);
  CHECK(warmup_forwards(s, 1) == 8);
  CHECK(warmup_forwards(s, 3) == 4);
  const std::vector<PipelineOp> r0 = pipeline_schedule(s, 0);
  REQUIRE(r0.size() == 32);
  // Forwards: micro-batches 0-3 through chunk 0, then chunk 1, then 4-7 likewise.
  std::vector<PipelineOp> want_f;
  for (int g : {0, 4}) {
    for (int c : {0, 1}) {
      for (int mb = g; mb < g + 4; ++mb) want_f.push_back({true, mb, c});
    }
  }
  CHECK(forwards(r0) == want_f);
  // Backwards: the same groups, the last chunk first.
  std::vector<PipelineOp> want_b;
  for (int g : {0, 4}) {
    for (int c : {1, 0}) {
      for (int mb = g; mb < g + 4; ++mb) want_b.push_back({false, mb, c});
    }
  }
  CHECK(backwards(r0) == want_b);
  // The first ten passes are forwards, then they alternate until the forwards run out.
  for (int k = 0; k < 10; ++k) CHECK(r0[k].forward);
  CHECK_FALSE(r0[11].forward);
  CHECK(r0[10].forward);
  // Everything in warm-up: micro-batches == pp with the warm-up larger than the total.
  CHECK(warmup_forwards({2, 4, 2}, 0) == 8);
}

TEST_CASE("every schedule is a valid pipeline and its exchanges complete in matching order") {
  for (int pp : {1, 2, 3, 4}) {
    for (int vp : {1, 2, 3}) {
      if (vp > 1 && pp < 2) continue;
      for (int m : {1, 2, 3, 4, 6, 8, 12}) {
        if (vp > 1 && m % pp != 0) continue;
        const PipelineShape s{pp, vp, m};
        CAPTURE(pp);
        CAPTURE(vp);
        CAPTURE(m);
        for (int r = 0; r < pp; ++r) {
          const std::vector<PipelineOp> ops = pipeline_schedule(s, r);
          CHECK(ops.size() == static_cast<std::size_t>(2 * vp * m));
          std::set<std::tuple<bool, int, int>> unique;
          for (const PipelineOp& op : ops) unique.insert({op.forward, op.microbatch, op.chunk});
          CHECK(unique.size() == ops.size());
        }
        CHECK(runs_to_completion(s));
        CHECK(check_p2p_batches(s) == "");
      }
    }
  }
}

TEST_CASE("the exchange check finds the deadlock of pairing each send with the next receive") {
  // Sending what pass k - 1 produced together with what pass k needs, pass by pass, deadlocks
  // the interleaved schedule under rendezvous (both neighbours send first): the checker says so.
  const PipelineShape s{2, 2, 4};
  std::vector<std::vector<P2PBatch>> naive;
  for (int r = 0; r < s.pp; ++r) {
    const std::vector<PipelineOp> ops = pipeline_schedule(s, r);
    std::vector<P2PBatch> b(ops.size() + 1);
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const PassTransfers t = pass_transfers(s, r, ops[k]);
      b[k].recv = t.recv;
      b[k + 1].send = t.send;
    }
    naive.push_back(b);
  }
  CHECK(doctest::String(check_p2p_batches(s, naive).c_str()) == doctest::Contains("stalls"));
  // Receiving in an order the sender does not send in is found too.
  std::vector<std::vector<P2PBatch>> swapped;
  for (int r = 0; r < s.pp; ++r) swapped.push_back(p2p_batches(s, r));
  for (P2PBatch& b : swapped[1]) {
    if (b.recv.size() == 2) {
      std::swap(b.recv[0], b.recv[1]);
      break;
    }
  }
  const std::string why = check_p2p_batches(s, swapped);
  CHECK_FALSE(why.empty());
  CHECK(check_p2p_batches(s) == "");
}

TEST_CASE("transfers: nothing into the first forward or the last backward") {
  const PipelineShape s{2, 2, 2};
  const PassTransfers first = pass_transfers(s, 0, {true, 0, 0});
  CHECK(first.recv.empty());
  REQUIRE(first.send.size() == 1);
  CHECK(first.send[0] == PipelineTransfer{true, 0, 0, 1});
  const PassTransfers last = pass_transfers(s, 1, {false, 1, 1});  // stage 3
  CHECK(last.recv.empty());
  REQUIRE(last.send.size() == 1);
  CHECK(last.send[0] == PipelineTransfer{false, 1, 3, 2});
  // Chunk 1 of rank 0 (stage 2) receives from rank 1's chunk 0 (stage 1).
  const PassTransfers mid = pass_transfers(s, 0, {true, 0, 1});
  REQUIRE(mid.recv.size() == 1);
  CHECK(mid.recv[0] == PipelineTransfer{true, 0, 1, 2});
}

TEST_CASE("Megatron's constraints are usage errors with the rule") {
  CHECK_THROWS_AS(validate(PipelineShape{1, 2, 4}), UsageError);
  CHECK_THROWS_WITH_AS(validate(PipelineShape{4, 2, 6}), doctest::Contains("a multiple of --pp 4"),
                       UsageError);
  CHECK_NOTHROW(validate(PipelineShape{4, 1, 6}));
  CHECK(theoretical_bubble({4, 2, 8}) == doctest::Approx(3.0 / 16.0));
  CHECK(theoretical_bubble({1, 1, 8}) == 0.0);
}
