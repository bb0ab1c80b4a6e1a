#include "harness/output/atomic_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

#include "harness/core/error.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace moebench;
using moebench::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

TEST_CASE("atomic file: writes and replaces the whole content, leaving no temporary") {
  TempDir dir;
  const std::string path = (dir.path / "r.json").string();
  write_file_atomically(path, "first, longer content\n");
  write_file_atomically(path, "{}\n");
  CHECK(slurp(path) == "{}\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("atomic file: a missing directory is a runtime error naming the path") {
  try {
    write_file_atomically("/nonexistent-moebench-dir/r.json", "x");
    FAIL("expected an error");
  } catch (const RuntimeError& e) {
    CHECK(std::string(e.what()).find("/nonexistent-moebench-dir/r.json") != std::string::npos);
    CHECK(std::string(e.what()).find("No such file or directory") != std::string::npos);
  }
}

TEST_CASE("atomic file: a failed rename removes the temporary file") {
  TempDir dir;
  const fs::path target = dir.path / "occupied";
  fs::create_directory(target);
  fs::create_directory(target / "child");  // rename(2) cannot replace a non-empty directory
  CHECK_THROWS_AS(write_file_atomically(target.string(), "x"), RuntimeError);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("atomic file: destinations are checked before a run") {
  TempDir dir;
  CHECK_NOTHROW(ensure_writable_destination((dir.path / "r.json").string()));
  CHECK_NOTHROW(ensure_writable_destination("relative-report.json"));
  try {
    ensure_writable_destination("/nonexistent/r.json");
    FAIL("expected an error");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) ==
          "--out /nonexistent/r.json: directory /nonexistent does not exist");
  }
  CHECK_THROWS_AS(ensure_writable_destination(dir.path.string()), UsageError);
  CHECK_THROWS_AS(ensure_writable_destination(dir.path.string() + "/"), UsageError);
  const fs::path file = dir.path / "plain";
  write_file_atomically(file.string(), "x");
  CHECK_THROWS_AS(ensure_writable_destination((file / "r.json").string(), "--json"), UsageError);
}

TEST_CASE("atomic file: only regular files are replaced; symlinks and devices are refused") {
  TempDir dir;
  const fs::path target = dir.path / "real.json";
  write_file_atomically(target.string(), "x");
  const fs::path link = dir.path / "link.json";
  fs::create_symlink(target, link);
  const auto message = [](const std::string& p) {
    try {
      ensure_writable_destination(p);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message(link.string()).find("is a symbolic link") != std::string::npos);
  CHECK(message("/dev/null").find("not a regular file") != std::string::npos);
  const fs::path fifo = dir.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(message(fifo.string()).find("not a regular file") != std::string::npos);
  CHECK(message(target.string()).empty());  // an existing regular file is replaced
  CHECK(slurp(target) == "x");              // checking leaves it as it was
}

TEST_CASE("atomic file: a dead writer's temporary file is removed, a live one's kept") {
  TempDir dir;
  const std::string path = (dir.path / "r.json").string();
  // The prefix write_file_atomically uses on this host.
  const std::string host = [] {
    char buf[256] = {};
    ::gethostname(buf, sizeof(buf) - 1);
    return std::string(buf);
  }();
  // A pid that is not running: beyond pid_max. Names as write_file_atomically makes them (six
  // random characters after the pid), and the older form without them.
  const std::string dead = path + ".tmp." + host + ".2147483646.a1B2c3";
  const std::string dead_old = path + ".tmp." + host + ".2147483646";
  const std::string live = path + ".tmp." + host + "." + std::to_string(::getpid()) + ".zZ9yY8";
  const std::string other_host = path + ".tmp.some-other-host.2147483646.a1B2c3";
  const std::string not_ours = path + ".tmp." + host + ".2147483646.toolong";
  for (const std::string& f : {dead, dead_old, live, other_host, not_ours}) {
    std::ofstream(f) << "partial";
  }
  CHECK(ensure_writable_destination(path) == 2);
  CHECK_FALSE(fs::exists(dead));
  CHECK_FALSE(fs::exists(dead_old));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other_host));  // another host's writer may be alive: left alone
  CHECK(fs::exists(not_ours));
}

TEST_CASE(
    "atomic file: a link or FIFO planted at the final name is replaced, not written through") {
  TempDir dir;
  const fs::path victim = dir.path / "victim.json";
  std::ofstream(victim) << "another user's file";
  const fs::path out = dir.path / "r.json";
  fs::create_symlink(victim, out);
  write_file_atomically(out.string(), "{}\n");
  CHECK(slurp(victim) == "another user's file");
  CHECK_FALSE(fs::is_symlink(out));
  CHECK(slurp(out) == "{}\n");
  const fs::path fifo = dir.path / "fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  write_file_atomically(fifo.string(), "{}\n");  // returns: nothing opens the FIFO
  CHECK(fs::is_regular_file(fifo));
  // The temporary names are new each time and private until renamed: a link planted at the old
  // predictable name is never opened.
  const std::string host = [] {
    char buf[256] = {};
    ::gethostname(buf, sizeof(buf) - 1);
    return std::string(buf);
  }();
  const fs::path planted = out.string() + ".tmp." + host + "." + std::to_string(::getpid());
  fs::create_symlink(victim, planted);
  write_file_atomically(out.string(), "[]\n");
  CHECK(slurp(victim) == "another user's file");
  CHECK(slurp(out) == "[]\n");
  // Readable by others as before (0644 less the umask).
  struct stat st {};
  REQUIRE(::stat(out.c_str(), &st) == 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == (0644 & ~mask));
}

TEST_CASE("atomic file: a temporary copy for a helper is private, beside its target") {
  TempDir dir;
  const std::string near = (dir.path / "plot.png").string();
  const std::string a = write_temporary_file(near, "x"), b = write_temporary_file(near, "y");
  CHECK(a != b);
  CHECK(a.rfind(near + ".", 0) == 0);
  CHECK(slurp(a) == "x");
  CHECK(slurp(b) == "y");
}
