// Reading and streaming only regular files: a FIFO (with no writer, or no reader) and a device
// are refused at once, never waited on; a link is followed for reading and refused for writing.
#include "harness/core/regular_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <doctest/doctest.h>

#include "harness/core/error.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace moebench;
using moebench::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("read_regular_file: a file's whole content, through a link too") {
  TempDir dir;
  const fs::path file = dir.path / "r.json";
  std::string big(200000, 'x');  // more than one read
  std::ofstream(file) << big;
  CHECK(read_regular_file(file.string(), "hint") == big);
  fs::create_symlink(file, dir.path / "link.json");
  CHECK(read_regular_file((dir.path / "link.json").string(), "hint") == big);
}

TEST_CASE("read_regular_file: a FIFO, a device, a directory or nothing is refused at once") {
  TempDir dir;
  const fs::path fifo = dir.path / "fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer: an open without O_NONBLOCK would wait for one forever.
  CHECK(refusal([&] { read_regular_file(fifo.string(), "give run reports"); }) ==
        fifo.string() + ": is a FIFO, not a regular file; give run reports");
  CHECK(refusal([&] { read_regular_file("/dev/zero", "h"); }) ==
        "/dev/zero: is a device, not a regular file; h");
  CHECK(refusal([&] { read_regular_file(dir.path.string(), "h"); }) ==
        dir.path.string() + ": is a directory, not a regular file; h");
  CHECK(refusal([&] { read_regular_file((dir.path / "none").string(), "h"); }) ==
        (dir.path / "none").string() + ": does not exist; h");
}

TEST_CASE("read_regular_file: a file larger than its bound is refused without being read") {
  TempDir dir;
  const std::string path = (dir.path / "big").string();
  {
    std::ofstream f(path);
    f << std::string(2000, 'x');
  }
  CHECK(read_regular_file(path, "hint", 2000).size() == 2000);
  CHECK_THROWS_WITH_AS(read_regular_file(path, "hint", 1999),
                       doctest::Contains("holds 2000 bytes, more than the 1999"), UsageError);
}

TEST_CASE("open_regular_for_writing: creates or truncates a file, refuses links and FIFOs") {
  TempDir dir;
  const fs::path file = dir.path / "steps.jsonl";
  std::ofstream(file) << "an older, longer content";
  std::FILE* f = open_regular_for_writing(file.string(), "--step-log");
  REQUIRE(f != nullptr);
  std::fputs("new\n", f);
  std::fclose(f);
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  CHECK(line == "new");
  CHECK(fs::file_size(file) == 4);

  const fs::path target = dir.path / "victim";
  std::ofstream(target) << "keep";
  const fs::path link = dir.path / "link.jsonl";
  fs::create_symlink(target, link);
  CHECK(refusal([&] { open_regular_for_writing(link.string(), "--step-log"); }) ==
        "--step-log " + link.string() + ": is a symbolic link; moebench writes only regular files");
  CHECK(fs::file_size(target) == 4);  // not truncated through the link
  const fs::path fifo = dir.path / "fifo.jsonl";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(refusal([&] { open_regular_for_writing(fifo.string(), "--step-log"); }) ==
        "--step-log " + fifo.string() + ": is a FIFO; moebench writes only regular files");
  CHECK(refusal([&] { open_regular_for_writing("/dev/null", "--step-log"); }) ==
        "--step-log /dev/null: is a device; moebench writes only regular files");
}
