#include "harness/cli/plot.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <vector>

#include "harness/core/error.hpp"
#include "harness/output/schema.hpp"

namespace moebench {

namespace fs = std::filesystem;

namespace {

constexpr int kPlotMissingMatplotlib = 3;  // the plot scripts' exit status for that case

// The system's python3 first: that is where the distribution's matplotlib is installed.
std::string python_executable() {
  if (const char* p = std::getenv("MOEBENCH_PYTHON"); p && *p) return p;
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

int spawn_and_wait(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return 127;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

bool draw_plot(const std::string& script_name, const std::string& json_path, const std::string& png,
               bool json_is_temporary) {
  std::string script;
  try {
    script = find_schema(script_name);  // looks up any file of reports/, not only schemas
  } catch (const Error& e) {
    std::cerr << "moebench: --plot " << png << " not drawn: " << e.what() << "\n";
    return false;
  }
  const std::string python = python_executable();
  const int rc = spawn_and_wait({python, script, json_path, png});
  const std::string later =
      json_is_temporary ? ""
                        : "; draw it later with: python3 " + script + " " + json_path + " " + png;
  if (rc == kPlotMissingMatplotlib || rc == 127) {
    std::cerr << "moebench: --plot " << png << " not drawn: " << python
              << (rc == 127 ? " could not be started" : " cannot import matplotlib")
              << " (install it: apt-get install python3-matplotlib" << later
              << "); the other outputs were written\n";
    return false;
  }
  std::error_code ec;
  if (rc != 0 || !fs::exists(png, ec) || fs::file_size(png, ec) == 0) {
    std::cerr << "moebench: --plot " << png << " not drawn: " << script << " exited with status "
              << rc << "; the other outputs were written\n";
    return false;
  }
  return true;
}

}  // namespace moebench
