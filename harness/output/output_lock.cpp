#include "harness/output/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "harness/core/error.hpp"
#include "harness/core/host.hpp"

namespace moebench {

std::string OutputLock::lock_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + name + ".lock";
}

OutputLock::OutputLock(const std::string& path, const std::string& flag) : lock_(lock_path(path)) {
  const std::string where = flag + " " + path + ": ";
  fd_ = ::open(lock_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw UsageError(where + "cannot create its lock file " + lock_ + ": " + std::strerror(errno));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[128] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
      while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
      throw UsageError(where + "another moebench run" + (who.empty() ? "" : " (" + who + ")") +
                       " is writing it; give each run its own --out");
    }
    throw UsageError(where + "cannot lock " + lock_ + ": " + std::strerror(err));
  }
  const std::string me = "host " + host_name() + ", pid " + std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, me.data(), me.size(), 0);
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  ::unlink(lock_.c_str());  // while held: a run waiting for it finds it gone and makes its own
  ::close(fd_);
}

}  // namespace moebench
