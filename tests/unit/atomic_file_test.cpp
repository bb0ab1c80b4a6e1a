#include "harness/output/atomic_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

using namespace moebench;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "moebench-atomic-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
};

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
