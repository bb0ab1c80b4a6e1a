// accept's stop watch: nothing is written while no rank is known or no signal is pending; once
// both, the last published state is written once, within polls, with an `interrupted` check
// naming the signal and the stage in flight (or the stage it came after), with the meta published
// beside the result; an inactive watch (a rank other than 0) never writes; a write that throws
// ends nothing.
#include "harness/cli/accept_watch.hpp"

#include <atomic>
#include <csignal>
#include <stdexcept>
#include <thread>

#include <doctest/doctest.h>

#include "harness/core/stop_request.hpp"

namespace moebench {
namespace {

struct Written {
  std::mutex mutex;
  int calls = 0;
  std::string stage;
  std::size_t stages = 0;
  std::string system;
  AcceptCheck why;
  bool throws = false;
};

AcceptWatch::Write recorder(Written& w) {
  return [&w](const AcceptResult& r, const nlohmann::ordered_json& meta, const std::string& stage,
              double, const AcceptCheck& why) {
    std::lock_guard<std::mutex> lock(w.mutex);
    ++w.calls;
    w.stage = stage;
    w.stages = r.stages.size();
    w.system = meta.is_object() ? meta.value("system", "") : "";
    w.why = why;
    if (w.throws) throw std::runtime_error("disk full");
  };
}

int calls(Written& w) {
  std::lock_guard<std::mutex> lock(w.mutex);
  return w.calls;
}

// Waits up to 5 s (a loaded machine's scheduler) for a first write.
bool wait_for_write(Written& w) {
  const auto start = Clock::now();
  while (calls(w) == 0 && seconds_since(start) < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return calls(w) > 0;
}

AcceptResult known(int stages_done) {
  AcceptResult r;
  r.ranks.push_back({0, 0, "h", "cpu", "s"});
  r.node_names = {"h-n0"};
  for (int i = 0; i < stages_done; ++i) r.stages.push_back({i == 0 ? "inventory" : "gpu", 1.0});
  return r;
}

TEST_CASE("accept watch: the published state is written once, on a signal, once ranks are known") {
  clear_stop_signal();
  install_stop_handlers();
  Written w;
  {
    AcceptWatch watch(true, recorder(w));
    watch.publish(AcceptResult{}, {}, "inventory", Clock::now());
    std::raise(SIGUSR1);
    // No rank known: nothing to name, nothing written (20 polls).
    std::this_thread::sleep_for(20 * AcceptWatch::kPoll);
    CHECK(calls(w) == 0);
    watch.publish(known(2), {{"system", "cpu"}}, "links", Clock::now());
    REQUIRE(wait_for_write(w));
    std::this_thread::sleep_for(20 * AcceptWatch::kPoll);
    CHECK(calls(w) == 1);
  }
  CHECK(w.stage == "links");
  CHECK(w.stages == 2);
  CHECK(w.system == "cpu");  // the meta published with the result
  CHECK(w.why.name == "interrupted");
  CHECK(w.why.status == "fail");
  CHECK(w.why.stage == "links");
  CHECK(w.why.reason.find("SIGUSR1 arrived in stage links") == 0);
  clear_stop_signal();
  for (const int sig : kStopSignals) std::signal(sig, SIG_DFL);
}

TEST_CASE("accept watch: between stages the check names the stage it came after; rank > 0 never") {
  const AcceptCheck after = interrupted_check(SIGTERM, "", "sdc", "why");
  CHECK(after.stage == "sdc");
  CHECK(after.reason == "SIGTERM arrived after stage sdc: why");
  CHECK(after.rank == -1);
  CHECK(after.node == -1);
  clear_stop_signal();
  install_stop_handlers();
  Written w;
  {
    AcceptWatch watch(false, recorder(w));
    watch.publish(known(1), {}, "gpu", Clock::now());
    std::raise(SIGTERM);
    std::this_thread::sleep_for(20 * AcceptWatch::kPoll);
  }
  CHECK(calls(w) == 0);
  clear_stop_signal();
  for (const int sig : kStopSignals) std::signal(sig, SIG_DFL);
}

TEST_CASE("accept watch: a write that throws is one line, not the end of the process") {
  clear_stop_signal();
  install_stop_handlers();
  Written w;
  w.throws = true;
  {
    AcceptWatch watch(true, recorder(w));
    watch.publish(known(1), {}, "", Clock::now());
    std::raise(SIGTERM);
    REQUIRE(wait_for_write(w));
  }
  CHECK(calls(w) == 1);
  CAPTURE(w.why.reason);
  CHECK(w.why.reason.find("SIGTERM arrived after stage inventory") == 0);
  clear_stop_signal();
  for (const int sig : kStopSignals) std::signal(sig, SIG_DFL);
}

}  // namespace
}  // namespace moebench
