// The stop request: the handlers store the signal, and a blocked wait runs the hook once, only
// after the signal has been pending for kStoppedWaitGrace.
#include "harness/core/stop_request.hpp"

#include <csignal>
#include <thread>

#include <doctest/doctest.h>

#include "harness/core/clock.hpp"

namespace moebench {
namespace {

TEST_CASE("stop request: a signal is stored, and named") {
  clear_stop_signal();
  install_stop_handlers();
  CHECK(stop_signal() == 0);
  std::raise(SIGTERM);
  CHECK(stop_signal() == SIGTERM);
  std::raise(SIGINT);
  CHECK(stop_signal() == SIGINT);
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGINT) == "SIGINT");
  // What a batch system or a shell sends stops a run as TERM does.
  for (const int sig : {SIGHUP, SIGPIPE, SIGUSR1, SIGUSR2}) {
    std::raise(sig);
    CHECK(stop_signal() == sig);
  }
  CHECK(signal_name(SIGHUP) == "SIGHUP");
  CHECK(signal_name(SIGPIPE) == "SIGPIPE");
  CHECK(signal_name(SIGUSR1) == "SIGUSR1");
  CHECK(signal_name(SIGUSR2) == "SIGUSR2");
  CHECK(signal_name(SIGWINCH) == "signal " + std::to_string(SIGWINCH));
  clear_stop_signal();
  CHECK(stop_signal() == 0);
  for (const int sig : kStopSignals) std::signal(sig, SIG_DFL);
}

TEST_CASE("stop request: a blocked wait runs the hook once, after the grace") {
  clear_stop_signal();
  install_stop_handlers();
  int runs = 0;
  std::string seen;
  set_stopped_wait_hook([&](const std::string& w) {
    ++runs;
    seen = w;
  });
  int described = 0;
  const auto what = [&] {
    ++described;
    return std::string("MPI_Wait on the expert group");
  };
  // No signal: nothing happens, and the description is not even built.
  for (int i = 0; i < 3; ++i) notice_stop_while_waiting(what);
  CHECK(runs == 0);
  CHECK(described == 0);

  std::raise(SIGTERM);
  const Clock::time_point start = Clock::now();
  notice_stop_while_waiting(what);  // first seen: the grace starts
  CHECK(runs == 0);
  while (runs == 0 && seconds_since(start) < 5) {
    notice_stop_while_waiting(what);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(runs == 1);
  CHECK(seconds_since(start) >= kStoppedWaitGrace);
  CHECK(seen == "MPI_Wait on the expert group");
  for (int i = 0; i < 3; ++i) notice_stop_while_waiting(what);
  CHECK(runs == 1);  // once

  set_stopped_wait_hook(nullptr);
  clear_stop_signal();
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace
}  // namespace moebench
