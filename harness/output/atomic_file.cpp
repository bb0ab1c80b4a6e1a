#include "harness/output/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

std::string parent_directory(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& path, const std::string& tmp, const char* step, int err) {
  if (!tmp.empty()) ::unlink(tmp.c_str());
  throw RuntimeError("cannot write " + path + ": " + step + " failed: " + std::strerror(err));
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "", "open of the temporary file", errno);
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(path, tmp, "write", err);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, tmp, "fsync", err);
  }
  if (::close(fd) != 0) fail(path, tmp, "close", errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, tmp, "rename", errno);
}

void ensure_writable_destination(const std::string& path, const std::string& flag) {
  const std::string where = flag + " " + path + ": ";
  if (path.empty() || path.back() == '/') {
    throw UsageError(where + "expected a file name, not a directory");
  }
  const std::string dir = parent_directory(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw UsageError(where + "directory " + dir + " does not exist");
  }
  if (!S_ISDIR(st.st_mode)) throw UsageError(where + dir + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw UsageError(where + "directory " + dir + " is not writable");
  }
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError(where + "is a directory; give a file name");
  }
}

}  // namespace moebench
