// Rank 0's watch for a stop signal while `moebench accept`'s stages run. The ranks agree on a
// signal only after a stage or a burn-in round, and a launcher signalled itself (mpirun) kills
// its ranks about a second after forwarding SIGTERM, whatever the stage's length: so the files
// of the finished stages are written within a poll of the signal, from what the main thread
// last published (at each stage's start and end), with a failing `interrupted` check. They are
// replaced when the ranks agree on the stop, or by the whole result if the job still ends.
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/cli/accept_checks.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/polling_thread.hpp"

namespace moebench {

class AcceptWatch {
 public:
  // Writes a stop's files: the finished stages' result, the report's meta as it was then, the
  // stage in flight ("" between stages) and how long it has run, and the check that says why.
  using Write =
      std::function<void(const AcceptResult& finished, const nlohmann::ordered_json& meta,
                         const std::string& stage, double stage_s, const AcceptCheck& why)>;
  static constexpr std::chrono::milliseconds kPoll{10};

  // Polls (where `active`: rank 0) for a stop signal and, the first time one is pending once the
  // ranks are known, calls `write` with the last published state, once; what it throws is one
  // line on stderr (the main thread's own write still comes).
  AcceptWatch(bool active, Write write);
  ~AcceptWatch() { stop(); }
  AcceptWatch(const AcceptWatch&) = delete;
  AcceptWatch& operator=(const AcceptWatch&) = delete;

  // What the finished stages found, the report's meta, and the stage now in flight ("" between
  // stages). Only copies cross to the thread.
  void publish(const AcceptResult& finished, const nlohmann::ordered_json& meta,
               const std::string& stage, Clock::time_point start);
  void stop();  // joins the thread
  // Held by whichever thread writes the four files, so that one writer runs at a time.
  std::mutex& files() { return files_; }

 private:
  bool poll();
  Write write_;
  std::mutex mutex_;  // guards the published state
  AcceptResult result_;
  nlohmann::ordered_json meta_;
  std::string stage_;
  Clock::time_point start_ = Clock::now();
  std::mutex files_;
  PollingThread thread_;
};

// The failing check a stop's files carry: `sig` arrived in `stage` (in flight, or "" between
// stages, after `last_finished`).
AcceptCheck interrupted_check(int sig, const std::string& stage, const std::string& last_finished,
                              const std::string& detail);

}  // namespace moebench
