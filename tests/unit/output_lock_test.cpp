// One writer per output: a second lock on the same --out (by another spelling too) is refused
// while the first is held, and free again once it is released.
#include "harness/output/output_lock.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "harness/core/error.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace moebench;
using moebench::test::TempDir;

TEST_CASE("output lock: a hidden lock file beside the output") {
  CHECK(OutputLock::lock_path("dir/r.json") == "dir/.r.json.lock");
  CHECK(OutputLock::lock_path("r.json") == ".r.json.lock");
  CHECK(OutputLock::lock_path("/abs/dir/r.json") == "/abs/dir/.r.json.lock");
}

TEST_CASE("output lock: held once, named to the second writer, released at the end") {
  TempDir dir;
  const std::string out = (dir.path / "r.json").string();
  auto first = std::make_unique<OutputLock>(out, "--out");
  CHECK(std::filesystem::exists(OutputLock::lock_path(out)));
  // flock locks an open file description: a second one, as another process would have, is
  // refused, through another spelling of the same folder too.
  const std::string again = (dir.path / "." / "r.json").string();
  CHECK_THROWS_WITH_AS(OutputLock(again, "--out"), doctest::Contains("another moebench run (host "),
                       UsageError);
  first.reset();
  CHECK_FALSE(std::filesystem::exists(OutputLock::lock_path(out)));
  // A lock file left behind by a killed run holds no lock: taken over.
  std::ofstream(OutputLock::lock_path(out)) << "host gone, pid 1\n";
  OutputLock taken(out, "--out");
  CHECK(std::filesystem::exists(OutputLock::lock_path(out)));
}

TEST_CASE("output lock: a folder it cannot write is a usage error") {
  CHECK_THROWS_WITH_AS(OutputLock("/nonexistent-dir/r.json", "--out"),
                       doctest::Contains("cannot create its lock file"), UsageError);
}
