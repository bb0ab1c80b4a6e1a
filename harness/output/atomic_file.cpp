#include "harness/output/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness/core/error.hpp"
#include "harness/core/host.hpp"

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

// "<path>.tmp.<host>.", the prefix of this host's temporary files of `path`.
std::string temporary_prefix(const std::string& path) {
  return path + ".tmp." + host_name() + ".";
}

// Removes this host's temporary files of `path` whose writer is no longer alive: names
// "<prefix><pid>.<6 characters>" (and "<prefix><pid>", the form before random suffixes).
int remove_stale_temporaries(const std::string& path) {
  const std::string dir = parent_directory(path);
  const std::string prefix = temporary_prefix(path);
  const std::string name_prefix = prefix.substr(prefix.find_last_of('/') + 1);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(name_prefix, 0) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + name_prefix.size(), &end, 10);
    if (pid <= 0 || (*end != '\0' && (*end != '.' || std::strlen(end) != 7))) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or unknown
    if (::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

// Creates `stem` + "XXXXXX" exclusively (the six characters random), readable by all as a
// report is (0644 less the umask), and checks that what was opened is a regular file; returns
// the descriptor and sets `tmp` to the name.
int create_exclusive(const std::string& path, const std::string& stem, std::string& tmp) {
  std::string name = stem + "XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) fail(path, "", "creation of the temporary file", errno);
  tmp = name;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno != 0 ? errno : EINVAL;
    ::close(fd);
    fail(path, tmp, "check of the temporary file (not a regular file)", err);
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0644 & ~mask) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, tmp, "chmod of the temporary file", err);
  }
  return fd;
}

void write_all(const std::string& path, const std::string& tmp, int fd,
               const std::string& content) {
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
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  std::string tmp;
  const int fd =
      create_exclusive(path, temporary_prefix(path) + std::to_string(::getpid()) + ".", tmp);
  write_all(path, tmp, fd, content);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, tmp, "rename", errno);
}

WrittenFile write_file_or_elsewhere(const std::string& path, const std::string& content,
                                    const std::vector<std::string>& fallback_dirs) {
  try {
    write_file_atomically(path, content);
    return {path, ""};
  } catch (const RuntimeError& e) {
    const std::string failure = e.what();
    std::string name = path.substr(path.find_last_of('/') + 1);
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
      name.resize(name.size() - 5);
    }
    name += "-rescued-" + std::to_string(::getpid()) + ".json";
    std::string tried;
    for (const std::string& dir : fallback_dirs) {
      if (dir.empty()) continue;
      const std::string there = (dir.back() == '/' ? dir : dir + "/") + name;
      try {
        write_file_atomically(there, content);
        return {there, failure};
      } catch (const RuntimeError& again) {
        tried += "; " + std::string(again.what());
      }
    }
    throw RuntimeError(failure + tried);
  }
}

std::string write_temporary_file(const std::string& near, const std::string& content) {
  std::string tmp;
  const int fd = create_exclusive(near, near + ".", tmp);
  write_all(near, tmp, fd, content);
  return tmp;
}

int ensure_writable_destination(const std::string& path, const std::string& flag, bool in_place) {
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
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw UsageError(where + "is a directory; give a file name");
    if (S_ISLNK(st.st_mode)) {
      throw UsageError(where +
                       "is a symbolic link; moebench replaces only regular files (give the "
                       "link's target or another path)");
    }
    if (!S_ISREG(st.st_mode)) {
      throw UsageError(where +
                       "exists and is not a regular file (a device, FIFO or socket); moebench "
                       "replaces only regular files");
    }
  }
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) == 0) {
    const long long free_bytes =
        static_cast<long long>(fs.f_bavail) * static_cast<long long>(fs.f_frsize);
    if (free_bytes < kMinFreeBytes) {
      throw UsageError(where + "the file system of " + dir + " has " + std::to_string(free_bytes) +
                       " bytes free, less than the " + std::to_string(kMinFreeBytes) +
                       " a report needs");
    }
  }
  const int removed = remove_stale_temporaries(path);
  // The temporary name is the destination's with ".tmp.HOST.PID.XXXXXX" after it, longer than the
  // name itself (by the host name's length): created and removed here, so that a name the file
  // system refuses (too long, a character it lacks) fails now, not after the steps.
  if (in_place) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(path.c_str());
    } else if (errno != EEXIST) {
      throw UsageError(where + "cannot be created (" + std::strerror(errno) + ")");
    }
    return removed;
  }
  std::string tmp = temporary_prefix(path) + std::to_string(::getpid()) + ".XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string name = tmp.substr(tmp.find_last_of('/') + 1);
    throw UsageError(where + "cannot create the temporary file the report is first written to (" +
                     std::strerror(err) +
                     "; its name is the file's and \".tmp.HOST.PID.XXXXXX\", " +
                     std::to_string(name.size()) + " characters); use a shorter name");
  }
  ::close(fd);
  ::unlink(tmp.c_str());
  return removed;
}

}  // namespace moebench
