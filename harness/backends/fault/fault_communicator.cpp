#include "harness/backends/fault/fault_communicator.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

constexpr const char* kForms =
    "valid: corrupt:rank=R[,phase=dispatch|combine|grad_reduce|pp][,step=S], "
    "delay:rank=R,seconds=T[,phase=P][,step=S], hang:rank=R[,phase=P][,step=S] or "
    "die:rank=R[,phase=P][,step=S], slow:rank=R|all,factor=F[,work=gemm|grouped_gemm|attention], "
    "slowlink:a=R1,b=R2|all,factor=F, sdc:rank=R[,every=K] or version:rank=R, with R "
    "and S >= 0, T > 0 and F in (1, 1000]";
constexpr double kMaxFactor = 1000;
constexpr float kCorruptValue = 1000.0f;

int parse_count(const std::string& text, std::string_view key, std::string_view value) {
  int v = -1;
  const auto res = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || res.ec != std::errc() || res.ptr != value.data() + value.size() || v < 0) {
    throw UsageError("--inject " + text + ": " + std::string(key) +
                     " must be a whole number >= 0, got '" + std::string(value) + "'; " + kForms);
  }
  return v;
}

class FaultCommunicator final : public Communicator {
 public:
  FaultCommunicator(std::unique_ptr<Communicator> inner, Compute& compute, const FaultSpec& spec)
      : Communicator(checked(inner).topology()),
        inner_(std::move(inner)),
        compute_(compute),
        spec_(spec),
        armed_(topology().rank == spec.rank && spec.kind != FaultSpec::Kind::slow &&
               spec.kind != FaultSpec::Kind::slowlink && spec.kind != FaultSpec::Kind::sdc &&
               spec.kind != FaultSpec::Kind::version),
        link_peer_(spec.kind == FaultSpec::Kind::slowlink && topology().rank == spec.rank
                       ? spec.peer
                       : kNoPeer),
        link_clock_(spec.factor) {}

  std::string name() const override { return inner_->name(); }
  std::string lane_ordering() const override { return inner_->lane_ordering(); }

 protected:
  std::vector<std::int64_t> do_alltoall_counts(Group g,
                                               std::span<const std::int64_t> send) override {
    if (g == Group::expert) counts_seen_ = true;
    return inner_->alltoall_counts(g, send);
  }

  void do_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                    std::span<const std::int64_t> send_offsets, Mat recv,
                    std::span<const std::int64_t> recv_rows,
                    std::span<const std::int64_t> recv_offsets) override {
    const bool hit = matches(alltoall_point(g));
    inner_->alltoallv(g, send, send_rows, send_offsets, recv, recv_rows, recv_offsets);
    if (hit) corrupt(recv);
  }

  void do_allreduce_sum(Group g, Mat buf) override {
    const bool hit = matches(reduction_point(g));
    inner_->allreduce_sum(g, buf);
    if (hit) corrupt(buf);
  }

  void do_reduce_scatter_sum(Group g, Mat buf, Mat shard) override {
    const bool hit = matches(reduction_point(g));
    inner_->reduce_scatter_sum(g, buf, shard);
    if (hit) corrupt(shard);
  }

  void do_allgather(Group g, Mat shard, Mat buf) override { inner_->allgather(g, shard, buf); }
  void do_batch_p2p(Group g, std::span<const P2POp> ops) override {
    const Mat* recv = first_recv(g, ops);
    const bool hit = recv != nullptr && matches(Seen::pp);
    const std::optional<LinkTransfer> link = slow_link_transfer(g, ops);
    if (link) wait_s(link_clock_.before(link->send, link->bytes));
    const auto start = std::chrono::steady_clock::now();
    inner_->batch_p2p(g, ops);
    if (link) {
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      wait_s(link_clock_.after(link->send, link->bytes, took.count()));
    }
    if (hit) corrupt(*recv);
  }
  void do_barrier(Group g) override { inner_->barrier(g); }
  void do_synchronize() override { inner_->synchronize(); }

  CommRequest do_start_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                                 std::span<const std::int64_t> send_offsets, Mat recv,
                                 std::span<const std::int64_t> recv_rows,
                                 std::span<const std::int64_t> recv_offsets,
                                 CommLane lane) override {
    const bool hit = matches(alltoall_point(g));
    const CommRequest r = inner_->start_alltoallv(g, send, send_rows, send_offsets, recv, recv_rows,
                                                  recv_offsets, lane);
    if (hit) pending_[r] = recv;
    return r;
  }

  CommRequest do_start_allreduce_sum(Group g, Mat buf, CommLane lane) override {
    const bool hit = matches(reduction_point(g));
    const CommRequest r = inner_->start_allreduce_sum(g, buf, lane);
    if (hit) pending_[r] = buf;
    return r;
  }

  CommRequest do_start_reduce_scatter_sum(Group g, Mat buf, Mat shard, CommLane lane) override {
    const bool hit = matches(reduction_point(g));
    const CommRequest r = inner_->start_reduce_scatter_sum(g, buf, shard, lane);
    if (hit) pending_[r] = shard;
    return r;
  }

  CommRequest do_start_allgather(Group g, Mat shard, Mat buf, CommLane lane) override {
    return inner_->start_allgather(g, shard, buf, lane);
  }
  CommRequest do_start_batch_p2p(Group g, std::span<const P2POp> ops, CommLane lane) override {
    const Mat* recv = first_recv(g, ops);
    const bool hit = recv != nullptr && matches(Seen::pp);
    const CommRequest r = inner_->start_batch_p2p(g, ops, lane);
    if (hit) pending_[r] = *recv;
    return r;
  }

  // The damage lands once the payload has: after the wait, ordered after it on the compute stream.
  void do_wait(CommRequest r) override {
    inner_->wait(r);
    const auto it = pending_.find(r);
    if (it == pending_.end()) return;
    corrupt(it->second);
    pending_.erase(it);
  }
  double do_busy_time_s(CommRequest r) override { return inner_->busy_time_s(r); }

  // The step boundary.
  void do_clear_requests() override {
    inner_->clear_requests();
    pending_.clear();
    ++step_;
    counts_seen_ = false;
    dispatch_seen_ = false;
    matches(Seen::step_start);
  }

 private:
  enum class Seen { other, dispatch, combine, grad_reduce, pp, step_start };

  // The first buffer a pipeline exchange receives into, or none.
  static const Mat* first_recv(Group g, std::span<const P2POp> ops) {
    if (g != Group::pipeline) return nullptr;
    for (const P2POp& op : ops) {
      if (op.kind == P2POp::Kind::recv) return &op.buf;
    }
    return nullptr;
  }

  static const Communicator& checked(const std::unique_ptr<Communicator>& inner) {
    MB_CHECK(inner != nullptr, "fault communicator without a communicator to wrap");
    return *inner;
  }

  // Which point an all-to-all is, from what came before it in its group.
  Seen alltoall_point(Group g) {
    if (g != Group::expert) return Seen::other;
    if (counts_seen_) {
      counts_seen_ = false;
      dispatch_seen_ = true;
      return Seen::dispatch;
    }
    if (dispatch_seen_) {
      dispatch_seen_ = false;
      return Seen::combine;
    }
    return Seen::other;
  }

  // The slowed link's part of a world exchange at its waiting end: what it receives from the
  // other end, else what it sends there; none when the exchange does not use the link.
  struct LinkTransfer {
    bool send;
    std::int64_t bytes;
  };
  std::optional<LinkTransfer> slow_link_transfer(Group g, std::span<const P2POp> ops) const {
    if (link_peer_ == kNoPeer || g != Group::world) return std::nullopt;
    std::optional<LinkTransfer> found;
    for (const P2POp& op : ops) {
      if (op.peer != link_peer_ && link_peer_ != FaultSpec::kEveryPeer) continue;
      const LinkTransfer t{op.kind == P2POp::Kind::send,
                           op.buf.numel() * static_cast<std::int64_t>(dtype_size(op.buf.dtype))};
      if (!t.send) return t;  // a receive from the other end decides
      found = t;
    }
    return found;
  }

  static void wait_s(double seconds) {
    if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }

  static Seen reduction_point(Group g) {
    return g == Group::data || g == Group::expert_data ? Seen::grad_reduce : Seen::other;
  }

  // Whether the operation about to run is the fault's point in its step. A delay, hang or death
  // happens here, before the operation; a corruption is done by the caller once the payload
  // has landed.
  bool matches(Seen seen) {
    if (!armed_ || step_ != spec_.step) return false;
    if (!at_point(seen)) return false;
    if (spec_.kind == FaultSpec::Kind::corrupt) return true;
    act();
    return false;
  }

  bool at_point(Seen seen) const {
    switch (spec_.point) {
      case FaultSpec::Point::dispatch:
        return seen == Seen::dispatch;
      case FaultSpec::Point::combine:
        return seen == Seen::combine;
      case FaultSpec::Point::grad_reduce:
        return seen == Seen::grad_reduce;
      case FaultSpec::Point::pp:
        return seen == Seen::pp;
      case FaultSpec::Point::step:
        return seen == Seen::step_start;
    }
    return false;
  }

  void act() {
    armed_ = false;
    std::fflush(stdout);
    std::fflush(stderr);
    switch (spec_.kind) {
      case FaultSpec::Kind::delay:
        std::this_thread::sleep_for(std::chrono::duration<double>(spec_.seconds));
        return;
      case FaultSpec::Kind::hang:
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      case FaultSpec::Kind::die:
        std::raise(SIGKILL);
        std::_Exit(137);
      case FaultSpec::Kind::corrupt:
      case FaultSpec::Kind::slow:
      case FaultSpec::Kind::slowlink:
      case FaultSpec::Kind::sdc:
      case FaultSpec::Kind::version:
        return;
    }
  }

  // An empty payload (a rank that received nothing) leaves the fault armed for the next match.
  void corrupt(const Mat& payload) {
    if (!armed_ || payload.rows == 0 || payload.cols == 0) return;
    compute_.fill(payload.row_slice(0, 1).col_slice(0, 1), kCorruptValue);
    armed_ = false;
  }

  std::unique_ptr<Communicator> inner_;
  Compute& compute_;
  FaultSpec spec_;
  bool armed_;
  // slowlink, on its waiting end: the world rank at the other end, FaultSpec::kEveryPeer, or
  // kNoPeer.
  static constexpr int kNoPeer = -1;
  int link_peer_;
  SlowLinkClock link_clock_;
  int step_ = -1;  // the first clear_requests() starts step 0
  bool counts_seen_ = false;
  bool dispatch_seen_ = false;
  std::map<CommRequest, Mat> pending_;  // started operations whose payload is to be damaged
};

}  // namespace

double SlowLinkClock::before(bool send, std::int64_t bytes) const {
  if (!send) return 0;
  const auto it = fastest_.find({send, bytes});
  return it == fastest_.end() ? 0 : (factor_ - 1.0) * it->second;
}

double SlowLinkClock::after(bool send, std::int64_t bytes, double seconds) {
  const auto [it, fresh] = fastest_.try_emplace({send, bytes}, seconds);
  if (!fresh) it->second = std::min(it->second, seconds);
  return send ? 0 : (factor_ - 1.0) * it->second;
}

// The names of FaultSpec::Kind, in its order, and every Point: what --inject parses and
// to_string writes.
constexpr const char* kKindNames[] = {"corrupt", "delay",    "hang", "die",
                                      "slow",    "slowlink", "sdc",  "version"};
constexpr FaultSpec::Point kPoints[] = {FaultSpec::Point::dispatch, FaultSpec::Point::combine,
                                        FaultSpec::Point::grad_reduce, FaultSpec::Point::pp,
                                        FaultSpec::Point::step};

constexpr SlowWork kWorks[] = {SlowWork::all, SlowWork::gemm, SlowWork::grouped_gemm,
                               SlowWork::attention};

const char* slow_work_name(SlowWork w) {
  switch (w) {
    case SlowWork::all:
      return "all";
    case SlowWork::gemm:
      return "gemm";
    case SlowWork::grouped_gemm:
      return "grouped_gemm";
    case SlowWork::attention:
      return "attention";
  }
  return "?";
}

const char* point_name(FaultSpec::Point p) {
  switch (p) {
    case FaultSpec::Point::dispatch:
      return "dispatch";
    case FaultSpec::Point::combine:
      return "combine";
    case FaultSpec::Point::grad_reduce:
      return "grad_reduce";
    case FaultSpec::Point::pp:
      return "pp";
    case FaultSpec::Point::step:
      return "step";
  }
  return "?";
}

FaultSpec parse_fault_spec(const std::string& text) {
  FaultSpec f;
  const std::size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const auto k = std::find(std::begin(kKindNames), std::end(kKindNames), kind);
  if (k == std::end(kKindNames))
    throw UsageError("--inject " + text + ": unknown fault; " + kForms);
  f.kind = static_cast<FaultSpec::Kind>(k - std::begin(kKindNames));
  if (f.kind != FaultSpec::Kind::corrupt) f.point = FaultSpec::Point::step;
  const bool sdc = f.kind == FaultSpec::Kind::sdc;
  const bool version = f.kind == FaultSpec::Kind::version;
  const bool slow = f.kind == FaultSpec::Kind::slow || f.kind == FaultSpec::Kind::slowlink || sdc ||
                    version;  // no step
  const bool link = f.kind == FaultSpec::Kind::slowlink;
  bool have_rank = false, have_seconds = false, have_factor = false, have_peer = false;
  std::string_view rest =
      colon == std::string::npos ? std::string_view() : std::string_view(text).substr(colon + 1);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    if (key == "rank" && f.kind == FaultSpec::Kind::slow && value == "all") {
      f.every_rank = true;
      have_rank = true;
    } else if (key == (link ? "a" : "rank")) {
      f.rank = parse_count(text, key, value);
      have_rank = true;
    } else if (key == "work" && f.kind == FaultSpec::Kind::slow) {
      const auto w = std::find_if(std::begin(kWorks), std::end(kWorks),
                                  [&](SlowWork x) { return value == slow_work_name(x); });
      if (w == std::end(kWorks)) {
        throw UsageError("--inject " + text + ": work '" + std::string(value) +
                         "' is not all, gemm, grouped_gemm or attention; " + kForms);
      }
      f.work = *w;
    } else if (key == "b" && link) {
      f.peer = value == "all" ? FaultSpec::kEveryPeer : parse_count(text, key, value);
      have_peer = true;
    } else if (key == "every" && sdc) {
      f.every = parse_count(text, key, value);
      if (f.every < 1) {
        throw UsageError("--inject " + text + ": every must be a whole number >= 1; " + kForms);
      }
    } else if (key == "factor" && slow && !sdc && !version) {
      char* end = nullptr;
      const std::string v(value);
      f.factor = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(f.factor > 1) ||
          !(f.factor <= kMaxFactor)) {
        throw UsageError("--inject " + text + ": factor must be a number in (1, 1000], got '" + v +
                         "'; " + kForms);
      }
      have_factor = true;
    } else if (key == "step" && !slow) {
      f.step = parse_count(text, key, value);
    } else if (key == "seconds" && f.kind == FaultSpec::Kind::delay) {
      char* end = nullptr;
      const std::string v(value);
      f.seconds = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(f.seconds > 0) || !(f.seconds <= 1e6)) {
        throw UsageError("--inject " + text + ": seconds must be a number in (0, 1e6], got '" + v +
                         "'; " + kForms);
      }
      have_seconds = true;
    } else if (key == "phase" && !slow) {
      const auto p = std::find_if(std::begin(kPoints), std::end(kPoints),
                                  [&](FaultSpec::Point q) { return value == point_name(q); });
      if (p == std::end(kPoints) ||
          (*p == FaultSpec::Point::step && f.kind == FaultSpec::Kind::corrupt)) {
        throw UsageError("--inject " + text + ": phase '" + std::string(value) +
                         "' cannot be corrupted; " + kForms);
      }
      f.point = *p;
    } else {
      throw UsageError("--inject " + text + ": unknown field '" + std::string(item) + "'; " +
                       kForms);
    }
  }
  if (!have_rank) {
    throw UsageError("--inject " + text + ": " + (link ? "a=R1" : "rank=R") + " is required; " +
                     kForms);
  }
  if (link && !have_peer) throw UsageError("--inject " + text + ": b=R2 is required; " + kForms);
  if (link && f.peer == f.rank) {
    throw UsageError("--inject " + text + ": a and b must be two different ranks; " + kForms);
  }
  if (slow && !sdc && !version && !have_factor) {
    throw UsageError("--inject " + text + ": factor=F is required; " + kForms);
  }
  if (f.kind == FaultSpec::Kind::delay && !have_seconds) {
    throw UsageError("--inject " + text + ": seconds=T is required; " + kForms);
  }
  return f;
}

namespace {
bool sdc_kind(const FaultSpec& f) {
  return f.kind == FaultSpec::Kind::sdc;
}
}  // namespace

std::string to_string(const FaultSpec& f) {
  char factor[32];
  std::snprintf(factor, sizeof(factor), "%g", f.factor);
  if (f.kind == FaultSpec::Kind::slow) {
    return "slow:rank=" + (f.every_rank ? std::string("all") : std::to_string(f.rank)) +
           ",factor=" + factor +
           (f.work == SlowWork::all ? std::string()
                                    : std::string(",work=") + slow_work_name(f.work));
  }
  if (sdc_kind(f))
    return "sdc:rank=" + std::to_string(f.rank) + ",every=" + std::to_string(f.every);
  if (f.kind == FaultSpec::Kind::version) return "version:rank=" + std::to_string(f.rank);
  if (f.kind == FaultSpec::Kind::slowlink) {
    return "slowlink:a=" + std::to_string(f.rank) +
           ",b=" + (f.peer == FaultSpec::kEveryPeer ? std::string("all") : std::to_string(f.peer)) +
           ",factor=" + factor;
  }
  std::string out =
      std::string(kKindNames[static_cast<int>(f.kind)]) + ":rank=" + std::to_string(f.rank);
  if (f.kind == FaultSpec::Kind::delay) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", f.seconds);
    out += std::string(",seconds=") + buf;
  }
  return out + ",phase=" + point_name(f.point) + ",step=" + std::to_string(f.step);
}

std::unique_ptr<Communicator> make_fault_communicator(std::unique_ptr<Communicator> inner,
                                                      Compute& compute, const FaultSpec& spec) {
  return std::make_unique<FaultCommunicator>(std::move(inner), compute, spec);
}

}  // namespace moebench
