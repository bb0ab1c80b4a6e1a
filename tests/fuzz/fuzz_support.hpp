// What the fuzz targets share: a private empty working folder, stdout silenced, and the rule that
// bad input may only end in a usage error (exit 2). Any other exception escapes the target, so
// libFuzzer reports it as a crash, with the input that caused it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include "harness/core/error.hpp"

namespace moebench::fuzz {

inline std::ostringstream& sink() {
  static std::ostringstream s;
  return s;
}

// Once per process: work in a fresh empty folder (so a fuzzed relative path names nothing of
// ours), send std::cout to a buffer that is dropped after each input and stdio's stdout to
// /dev/null (plan and the tables print).
inline void setup_once() {
  static const bool done = [] {
    static std::string dir =
        (std::filesystem::temp_directory_path() / "moebench-fuzz-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr || chdir(dir.c_str()) != 0) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    });
    std::cout.rdbuf(sink().rdbuf());
    // The listing commands print with stdio too: to nowhere (libFuzzer reports on stderr).
    if (std::freopen("/dev/null", "w", stdout) == nullptr) std::abort();
    return true;
  }();
  (void)done;
  sink().str("");
}

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Bad input is a usage error (exit 2) and nothing else.
template <typename F>
void usage_errors_only(F&& body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.code() != ExitCode::usage) throw;
  }
}

}  // namespace moebench::fuzz
