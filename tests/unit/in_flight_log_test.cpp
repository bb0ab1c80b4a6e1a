// The nccl backend's bookkeeping, with fake events: integers whose completion the test decides.
#include "harness/backends/in_flight/in_flight_log.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <set>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

InFlightLog::Event ev(std::uintptr_t i) {
  return reinterpret_cast<InFlightLog::Event>(i);
}

struct FakeDevice {
  std::set<InFlightLog::Event> done;
  InFlightLog::IsDone is_done() {
    return [this](InFlightLog::Event e) { return done.count(e) > 0; };
  }
};

constexpr int kCritical = 0;
constexpr int kBackground = 1;

}  // namespace

TEST_CASE("in-flight log: lanes and names") {
  CHECK(InFlightLog::lane_index(CommLane::critical) == kCritical);
  CHECK(InFlightLog::lane_index(CommLane::background) == kBackground);
  CHECK(InFlightLog::lane_index(CommLane::pipeline) == 2);
  CHECK(std::string(InFlightLog::lane_name(kBackground)) == "background");
  CHECK(std::string(InFlightLog::lane_name(2)) == "pipeline");
}

TEST_CASE("in-flight log: requests are numbered from 0, blocking calls get none") {
  InFlightLog log;
  CHECK(log.add(kCritical, "alltoallv in the expert group", nullptr, ev(1), false) == -1);
  CHECK(log.add(kBackground, "allreduce_sum in the world group", ev(2), ev(3), true) == 0);
  CHECK(log.add(kCritical, "allgather in the world group", ev(4), ev(5), true) == 1);
  CHECK(log.start_event(1, "t") == ev(4));
  CHECK(log.end_event(0, "t") == ev(3));
  CHECK(log.description(0, "t") == "allreduce_sum in the world group");
  CHECK_THROWS_AS(log.end_event(2, "wait"), RuntimeError);
  CHECK_THROWS_AS(log.end_event(-1, "wait"), RuntimeError);
  CHECK_THROWS_AS(log.add(InFlightLog::kLanes, "x", nullptr, ev(6), false), RuntimeError);
}

TEST_CASE("in-flight log: the oldest running collective over both lanes is blamed") {
  InFlightLog log;
  FakeDevice dev;
  log.add(kCritical, "A", nullptr, ev(1), false);
  log.add(kBackground, "B", ev(2), ev(3), true);
  log.add(kCritical, "C", nullptr, ev(4), false);
  CHECK(log.oldest_running(dev.is_done()) == "A");
  dev.done.insert(ev(1));
  CHECK(log.oldest_running(dev.is_done()) == "B");  // issued before C
  dev.done.insert(ev(3));
  CHECK(log.oldest_running(dev.is_done()) == "C");
  // A lane's later entry counts only behind its first running one: were D reported done
  // before C, C would still be the one to blame.
  log.add(kCritical, "D", nullptr, ev(5), false);
  dev.done.insert(ev(5));
  CHECK(log.oldest_running(dev.is_done()) == "C");
  dev.done.insert(ev(4));
  CHECK(log.oldest_running(dev.is_done()).empty());
}

TEST_CASE("in-flight log: pruning stops at the first running entry and frees blocking events") {
  InFlightLog log;
  FakeDevice dev;
  log.add(kCritical, "A", nullptr, ev(1), false);
  log.add(kCritical, "B", nullptr, ev(2), false);
  CHECK(log.take_free() == nullptr);
  dev.done.insert(ev(2));  // B reports done, A does not: nothing is dropped
  log.prune(kCritical, dev.is_done());
  CHECK(!log.idle());
  CHECK(log.take_free() == nullptr);
  dev.done.insert(ev(1));
  log.prune(kCritical, dev.is_done());
  CHECK(log.idle());
  std::set<InFlightLog::Event> freed = {log.take_free(), log.take_free()};
  CHECK(freed == std::set<InFlightLog::Event>{ev(1), ev(2)});  // no null start of a blocking one
  CHECK(log.take_free() == nullptr);
}

TEST_CASE("in-flight log: clear_requests refuses un-waited requests and recycles the rest") {
  InFlightLog log;
  FakeDevice dev;
  const CommRequest a = log.add(kBackground, "bucket 0", ev(1), ev(2), true);
  const CommRequest b = log.add(kCritical, "dispatch", ev(3), ev(4), true);
  CHECK(log.mark_waited(b));
  CHECK_FALSE(log.mark_waited(b));  // a second wait enqueues nothing
  CHECK_THROWS_AS(log.clear_requests(), RuntimeError);
  CHECK(log.end_event(a, "t") == ev(2));  // refused: nothing forgotten
  CHECK(log.mark_waited(a));

  // b has completed; a still runs: clearing frees b's events now, a's when its entry completes.
  dev.done.insert(ev(4));
  log.prune(kCritical, dev.is_done());
  log.prune(kBackground, dev.is_done());
  log.clear_requests();
  CHECK_THROWS_AS(log.end_event(0, "busy_time_s"), RuntimeError);
  std::set<InFlightLog::Event> freed = {log.take_free(), log.take_free()};
  CHECK(freed == std::set<InFlightLog::Event>{ev(3), ev(4)});
  CHECK(log.take_free() == nullptr);
  CHECK(log.oldest_running(dev.is_done()) == "bucket 0");
  dev.done.insert(ev(2));
  log.prune(kBackground, dev.is_done());
  freed = {log.take_free(), log.take_free()};
  CHECK(freed == std::set<InFlightLog::Event>{ev(1), ev(2)});
  CHECK(log.add(kCritical, "next step", ev(1), ev(2), true) == 0);
  log.reset();
  CHECK(log.idle());
  CHECK(log.take_free() == nullptr);
}

}  // namespace moebench
