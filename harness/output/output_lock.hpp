// One writer per output: a run holds an advisory lock (flock) on a hidden file beside its --out,
// ".<name>.lock", for as long as it runs, so that a second run given the same --out (the same
// file through any path or link) is refused before it starts rather than racing the first for
// the final name. The lock file holds the holder's host and pid, for the message; it is removed
// when the run ends, and a stale one (its holder gone, the lock released by the kernel) is simply
// taken. flock is per host on most network file systems: runs on two hosts are not caught there.
#pragma once

#include <string>

namespace moebench {

class OutputLock {
 public:
  // UsageError "<flag> <path>: another moebench run (host H, pid P) is writing it" when held.
  OutputLock(const std::string& path, const std::string& flag);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // The lock file's path (".<name>.lock" in the output's directory).
  static std::string lock_path(const std::string& path);

 private:
  std::string lock_;
  int fd_ = -1;
};

}  // namespace moebench
