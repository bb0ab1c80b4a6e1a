#include "harness/core/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string read_regular_file(const std::string& path, const std::string& hint,
                              long long max_bytes) {
  const auto refuse = [&](const std::string& why) -> UsageError {
    return UsageError(path + ": " + why + "; " + hint);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw refuse(errno == ENOENT ? "does not exist"
                                 : std::string("cannot be read: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const mode_t mode = st.st_mode;
    ::close(fd);
    throw refuse(std::string("is ") + kind_of(mode) + ", not a regular file");
  }
  const auto too_large = [&](long long size) {
    ::close(fd);
    return refuse("holds " + std::to_string(size) + " bytes, more than the " +
                  std::to_string(max_bytes) + " such a file can need");
  };
  if (st.st_size > max_bytes) throw too_large(st.st_size);
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw refuse(std::string("cannot be read: ") + std::strerror(err));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
    // A file that grows while read (or a /proc file whose size says 0) is bounded too.
    if (static_cast<long long>(bytes.size()) > max_bytes) {
      throw too_large(static_cast<long long>(bytes.size()));
    }
  }
  ::close(fd);
  return bytes;
}

std::FILE* open_regular_for_writing(const std::string& path, const std::string& flag) {
  const std::string where = flag + " " + path + ": ";
  // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of waiting for one; a
  // link is refused (ELOOP), not followed.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ELOOP) {
      throw UsageError(where + "is a symbolic link; moebench writes only regular files");
    }
    if (errno == ENXIO) throw UsageError(where + "is a FIFO; moebench writes only regular files");
    throw UsageError(where + "cannot be written: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const mode_t mode = st.st_mode;
    ::close(fd);
    throw UsageError(where + "is " + kind_of(mode) + "; moebench writes only regular files");
  }
  // Truncated only once known to be a regular file; writes then block as a file's do.
  if (::ftruncate(fd, 0) != 0 || ::fcntl(fd, F_SETFL, 0) != 0) {
    const int err = errno;
    ::close(fd);
    throw UsageError(where + "cannot be written: " + std::strerror(err));
  }
  std::FILE* f = ::fdopen(fd, "w");
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    throw UsageError(where + "cannot be written: " + std::strerror(err));
  }
  return f;
}

}  // namespace moebench
