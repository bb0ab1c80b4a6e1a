#include "harness/cli/accept_watch.hpp"

#include <iostream>

#include "harness/core/stop_request.hpp"

namespace moebench {

AcceptWatch::AcceptWatch(bool active, Write write) : write_(std::move(write)) {
  if (active) thread_.start(kPoll, [this] { return poll(); });
}

void AcceptWatch::publish(const AcceptResult& finished, const nlohmann::ordered_json& meta,
                          const std::string& stage, Clock::time_point start) {
  std::lock_guard<std::mutex> lock(mutex_);
  result_ = finished;
  meta_ = meta;
  stage_ = stage;
  start_ = start;
}

void AcceptWatch::stop() {
  thread_.stop();
}

bool AcceptWatch::poll() {
  const int sig = stop_signal();
  if (sig == 0) return true;
  AcceptResult finished;
  nlohmann::ordered_json meta;
  std::string stage;
  double stage_s = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_.ranks.empty()) return true;  // no rank known yet: nothing to name
    finished = result_;
    meta = meta_;
    stage = stage_;
    stage_s = seconds_since(start_);
  }
  const std::string last = finished.stages.empty() ? "inventory" : finished.stages.back().name;
  std::lock_guard<std::mutex> lock(files_);
  try {
    write_(finished, meta, stage, stage_s,
           interrupted_check(sig, stage, last,
                             "the files keep the finished stages, and are replaced when every "
                             "rank has stopped or the job still ends"));
  } catch (const std::exception& e) {
    std::cerr << "moebench: accept: the stop's files could not be written at once: " << e.what()
              << "\n";
  }
  return false;
}

AcceptCheck interrupted_check(int sig, const std::string& stage, const std::string& last_finished,
                              const std::string& detail) {
  const std::string where = stage.empty() ? "after stage " + last_finished : "in stage " + stage;
  return cluster_check("interrupted", stage.empty() ? last_finished : stage, "fail",
                       signal_name(sig) + " arrived " + where + ": " + detail);
}

}  // namespace moebench
