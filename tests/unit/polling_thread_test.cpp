// The polling thread: it polls until the poll says stop, or until stop(), which joins it; a
// thread never started stops at once.
#include "harness/core/polling_thread.hpp"

#include <atomic>

#include <doctest/doctest.h>

#include "harness/core/clock.hpp"

namespace moebench {
namespace {

TEST_CASE("polling thread: polls until the poll says stop, or until stop()") {
  std::atomic<int> polls{0};
  {
    PollingThread t;
    t.start(std::chrono::milliseconds(1), [&] { return ++polls < 3; });
    const auto start = Clock::now();
    while (polls.load() < 3 && seconds_since(start) < 5) std::this_thread::yield();
    t.stop();
  }
  CHECK(polls.load() == 3);  // the third poll said stop: no fourth
  std::atomic<int> forever{0};
  PollingThread t;
  t.start(std::chrono::milliseconds(1), [&] {
    ++forever;
    return true;
  });
  const auto start = Clock::now();
  while (forever.load() < 2 && seconds_since(start) < 5) std::this_thread::yield();
  t.stop();
  const int after = forever.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(after >= 2);
  CHECK(forever.load() == after);  // joined: no poll after stop()
  PollingThread never;
  never.stop();
}

}  // namespace
}  // namespace moebench
