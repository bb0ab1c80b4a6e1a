// A thread that calls `poll` every `period` until stop() (or `poll` returns false): rank 0's
// watchers beside run's steps and accept's stages.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace moebench {

class PollingThread {
 public:
  void start(std::chrono::milliseconds period, std::function<bool()> poll) {
    thread_ = std::thread([this, period, poll = std::move(poll)] {
      while (!done_.load() && poll()) std::this_thread::sleep_for(period);
    });
  }
  ~PollingThread() { stop(); }
  void stop() {
    done_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace moebench
