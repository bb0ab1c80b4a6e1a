#include "harness/core/stop_request.hpp"

#include <atomic>
#include <csignal>
#include <sstream>

#include "harness/core/clock.hpp"
#include "harness/core/error.hpp"

namespace moebench {

namespace {

// Set by the handler, read by the main thread and by rank 0's watchers (run's, accept's): an
// atomic, lock-free and so safe in a signal handler.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
}

StoppedWaitHook& hook() {
  static StoppedWaitHook h;
  return h;
}
bool g_hook_ran = false;
bool g_seen = false;  // the pending signal was seen by a blocked wait at g_seen_at
Clock::time_point g_seen_at;

}  // namespace

void install_stop_handlers() {
  for (const int sig : kStopSignals) std::signal(sig, on_stop_signal);
}

int stop_signal() {
  return g_signal.load();
}

void clear_stop_signal() {
  g_signal.store(0);
  g_hook_ran = false;
  g_seen = false;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    default:
      return "signal " + std::to_string(sig);
  }
}

void set_stopped_wait_hook(StoppedWaitHook h) {
  hook() = std::move(h);
}

void notice_stop_while_waiting(const std::function<std::string()>& what) {
  if (g_signal == 0) return;
  if (!g_seen) {
    g_seen = true;
    g_seen_at = Clock::now();
    return;
  }
  const double pending = seconds_since(g_seen_at);
  if (pending >= kStoppedWaitGrace && !g_hook_ran) {
    g_hook_ran = true;
    if (hook()) hook()(what());
  }
  if (pending >= kStoppedWaitGiveUp) {
    std::ostringstream os;
    os << what() << " was still waiting " << kStoppedWaitGiveUp << " s after "
       << signal_name(g_signal) << ": the job is ending (a peer died or hung)";
    throw Error(ExitCode::interrupted, os.str());
  }
}

}  // namespace moebench
