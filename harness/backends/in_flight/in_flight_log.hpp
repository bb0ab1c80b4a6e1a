// The bookkeeping of a communicator whose collectives run on device streams, one per CommLane
// (nccl): per lane, the operations in flight in issue order, for hang reports; the started
// ones' requests; and which event handles are free for the next collective. Events are opaque
// handles here and the caller says whether one has completed, so this is plain host code,
// tested without a GPU.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "harness/comm/communicator.hpp"

namespace moebench {

class InFlightLog {
 public:
  using Event = void*;
  // Whether the work before an event has completed; throws on a device error.
  using IsDone = std::function<bool(Event)>;
  static constexpr int kLanes = kCommLanes;
  static int lane_index(CommLane lane) { return static_cast<int>(lane); }
  static const char* lane_name(int lane) {
    return moebench::lane_name(static_cast<CommLane>(lane));
  }

  // A collective just enqueued on `lane` between `start` (null: not timed) and `end`. Returns
  // its CommRequest when `keep` (a start_* form), else -1 and its events come back to the free
  // list once it has completed.
  CommRequest add(int lane, const std::string& what, Event start, Event end, bool keep);

  // Drops the lane's completed collectives, oldest first, up to the first still running.
  void prune(int lane, const IsDone& is_done);
  bool idle() const;
  // What the oldest collective still running on either lane was, "" if none: every later one
  // on its lane waits behind it.
  std::string oldest_running(const IsDone& is_done) const;

  // RuntimeError naming `what` for a request not issued since clear_requests().
  Event start_event(CommRequest r, const char* what) const { return at(r, what).start; }
  Event end_event(CommRequest r, const char* what) const { return at(r, what).end; }
  const std::string& description(CommRequest r, const char* what) const { return at(r, what).what; }
  // False when r was waited for already.
  bool mark_waited(CommRequest r);
  // Forgets every request; RuntimeError, forgetting nothing, if one was never waited for. The
  // events of those still running stay with their lane entries until they complete.
  void clear_requests();

  // A free event, or null when the caller must create one.
  Event take_free();
  void give_back(Event e) {
    if (e != nullptr) free_.push_back(e);
  }
  // Forgets everything (the caller destroys the events).
  void reset();

 private:
  struct Entry {
    std::string what;
    std::uint64_t seq = 0;  // issue order over every lane
    int request = -1;       // -1: the entry owns its events
    Event start = nullptr;
    Event end = nullptr;
  };
  struct Request {
    std::string what;
    Event start = nullptr;
    Event end = nullptr;
    bool waited = false;
    bool done = false;  // its lane entry is gone
  };
  const Request& at(CommRequest r, const char* what) const;

  std::deque<Entry> lanes_[kLanes];
  std::vector<Request> requests_;
  std::vector<Event> free_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace moebench
