#include "harness/backends/in_flight/in_flight_log.hpp"

#include "harness/core/error.hpp"

namespace moebench {

CommRequest InFlightLog::add(int lane, const std::string& what, Event start, Event end, bool keep) {
  MB_CHECK(lane >= 0 && lane < kLanes, "communication lane " << lane);
  Entry e{what, next_seq_++, -1, start, end};
  CommRequest r = -1;
  if (keep) {
    r = static_cast<CommRequest>(requests_.size());
    requests_.push_back(Request{what, start, end, false, false});
    e.request = r;
  }
  lanes_[lane].push_back(std::move(e));
  return r;
}

bool InFlightLog::idle() const {
  for (const std::deque<Entry>& list : lanes_) {
    if (!list.empty()) return false;
  }
  return true;
}

void InFlightLog::prune(int lane, const IsDone& is_done) {
  std::deque<Entry>& list = lanes_[lane];
  while (!list.empty() && is_done(list.front().end)) {
    const Entry& e = list.front();
    if (e.request >= 0) {
      requests_[static_cast<std::size_t>(e.request)].done = true;
    } else {
      give_back(e.start);
      give_back(e.end);
    }
    list.pop_front();
  }
}

std::string InFlightLog::oldest_running(const IsDone& is_done) const {
  const Entry* oldest = nullptr;
  for (const std::deque<Entry>& list : lanes_) {
    for (const Entry& e : list) {
      if (is_done(e.end)) continue;
      if (oldest == nullptr || e.seq < oldest->seq) oldest = &e;
      break;
    }
  }
  return oldest != nullptr ? oldest->what : std::string();
}

const InFlightLog::Request& InFlightLog::at(CommRequest r, const char* what) const {
  MB_CHECK(r >= 0 && r < static_cast<CommRequest>(requests_.size()),
           what << " of unknown communication request " << r << " (" << requests_.size()
                << " since clear_requests)");
  return requests_[static_cast<std::size_t>(r)];
}

bool InFlightLog::mark_waited(CommRequest r) {
  at(r, "wait");
  Request& q = requests_[static_cast<std::size_t>(r)];
  const bool first = !q.waited;
  q.waited = true;
  return first;
}

void InFlightLog::clear_requests() {
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    MB_CHECK(requests_[i].waited, "clear_requests with communication request "
                                      << i << " (" << requests_[i].what
                                      << ") not waited for: its buffers are still in use");
  }
  for (std::deque<Entry>& list : lanes_) {
    for (Entry& e : list) e.request = -1;  // still running: the entry returns the events
  }
  for (const Request& q : requests_) {
    if (!q.done) continue;
    give_back(q.start);
    give_back(q.end);
  }
  requests_.clear();
}

InFlightLog::Event InFlightLog::take_free() {
  if (free_.empty()) return nullptr;
  Event e = free_.back();
  free_.pop_back();
  return e;
}

void InFlightLog::reset() {
  for (std::deque<Entry>& list : lanes_) list.clear();
  requests_.clear();
  free_.clear();
}

}  // namespace moebench
