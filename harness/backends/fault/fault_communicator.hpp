// Fault injection as a decorator: a Communicator that forwards everything to the one it wraps and,
// on one chosen rank, damages what that rank receives at one chosen point of one chosen step. A
// testing aid (`moebench run --inject ...`): it proves that --verify catches a corrupted payload,
// with no test hook in the training step itself; and it delays, hangs or kills that rank at that
// point, which proves that the others' watchdogs end the job (--timeout).
//
// The decorator knows the step's collectives by their shape, not by the step's code:
//  - dispatch: the first all-to-all of the expert group after a counts exchange in that group
//    (the forward dispatch of an MoE layer);
//  - combine: the all-to-all of the expert group right after a dispatch (its forward combine);
//  - grad_reduce: an all-reduce or reduce-scatter in the data or expert-data group (a gradient
//    reduction);
//  - pp: a point-to-point exchange in the pipeline group that receives (an activation or its
//    gradient from the neighbouring stage).
// Steps are counted by clear_requests(), which the training step calls first in every step: the
// first step is step 0 (the --verify step when there is one, else the first warm-up step).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"

namespace moebench {

// What `slow` slows: every compute operation, or one kind of work (a slow GEMM library, say).
enum class SlowWork { all, gemm, grouped_gemm, attention };
const char* slow_work_name(SlowWork w);

struct FaultSpec {
  // corrupt: damage a received payload; delay: sleep `seconds`, once; hang: block forever (the
  // process stays alive, as a stopped or livelocked one does); die: end the process at once
  // (SIGKILL), as a crashed node does.
  // slow: every compute operation of the rank (of every rank with rank=all; only the GEMMs, the
  // grouped GEMMs or core attention with work=gemm|grouped_gemm|attention) takes `factor` times
  // as long (slow_compute.hpp);
  // slowlink: every transfer between world ranks `rank` and `peer` (every peer with b=all: a slow
  // port) takes `factor` times as long
  // (the point-to-point exchanges of `moebench linkcheck`); `rank` does the waiting
  // (SlowLinkClock).
  // sdc: silent data corruption: one bit of the output of every `every`-th GEMM on `rank`
  // flipped (slow_compute.hpp), which `moebench accept`'s repeated-GEMM check must name.
  // version: the rank reports software that differs from its peers' (`moebench accept`'s
  // inventory must name it).
  enum class Kind { corrupt, delay, hang, die, slow, slowlink, sdc, version };
  // step: the start of the step (the default of delay, hang and die).
  enum class Point { dispatch, combine, grad_reduce, pp, step };
  Kind kind = Kind::corrupt;
  int rank = 0;  // the world rank the fault happens on
  Point point = Point::dispatch;
  int step = 0;                          // 0-based, as counted above
  double seconds = 0;                    // delay only
  double factor = 1;                     // slow and slowlink
  static constexpr int kEveryPeer = -2;  // slowlink b=all: every link of `rank` (a slow port)
  int peer = 0;                   // slowlink: the other end of the link (`rank` is the first)
  bool every_rank = false;        // slow: rank=all
  SlowWork work = SlowWork::all;  // slow: which operations
  int every = 1;                  // sdc: every this many GEMMs
};

// "corrupt:rank=R[,phase=dispatch|combine|grad_reduce|pp][,step=S]",
// "delay:rank=R,seconds=T[,phase=...][,step=S]", "hang:rank=R[,phase=...][,step=S]",
// "die:rank=R[,phase=...][,step=S]" (delay, hang and die: at the start of the step unless a phase
// is given, then just before that point's operation), "sdc:rank=R[,every=K]",
// "slow:rank=R|all,factor=F[,work=W]" and
// "slowlink:a=R1,b=R2|all,factor=F" (F in (1, 1000]) and "version:rank=R"; UsageError saying what
// is wrong and what is valid otherwise. The ranks are checked against the world by the caller.
FaultSpec parse_fault_spec(const std::string& text);
std::string to_string(const FaultSpec& f);
const char* point_name(FaultSpec::Point p);

// The waits that make one end of a slow link F times as slow, kept per direction and message size:
// a send waits before it starts, a receive after it ends, (F - 1) times the fastest transfer of
// that direction and size seen so far. Only one end of the link waits, so no transfer it times
// includes a wait injected at the other end: with both ends waiting, each end's fastest receive in
// a ping-pong would hold the other's wait, and the slowdown would grow as F squared.
class SlowLinkClock {
 public:
  explicit SlowLinkClock(double factor) : factor_(factor) {}
  // Seconds to wait before a transfer starts: a send's, once a send of this size has been timed.
  double before(bool send, std::int64_t bytes) const;
  // Records a transfer's time; returns the seconds to wait after it (a receive's).
  double after(bool send, std::int64_t bytes, double seconds);

 private:
  double factor_;
  std::map<std::pair<bool, std::int64_t>, double> fastest_;
};

// `inner` wrapped; on rank spec.rank, the first element of the first payload received at the
// spec's point in its step is set to 1000 (through `compute`, ordered after the transfer: far
// outside any tolerance), once.
std::unique_ptr<Communicator> make_fault_communicator(std::unique_ptr<Communicator> inner,
                                                      Compute& compute, const FaultSpec& spec);

}  // namespace moebench
