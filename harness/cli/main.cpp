// moebench's entry point: parse, dispatch to a command, and turn every failure into one clear
// line and a distinct exit code on every rank (error.hpp lists the codes).
#include <cstdlib>
#include <iostream>

#include "harness/cli/commands.hpp"
#include "harness/core/error.hpp"
#include "harness/core/version.hpp"

namespace {

// Before MPI starts, the launcher's environment says which rank this is: only the first prints
// a usage error, every rank exits with it.
bool first_rank_by_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v) == 0;
  }
  return true;
}

int run_with_mpi(const moebench::CliOptions& options, int* argc, char*** argv) {
  using namespace moebench;
  MpiRuntime runtime(argc, argv);
  try {
    return run_command(options, runtime);
  } catch (const Error& e) {
    if (e.code() == ExitCode::usage) {
      // Every rank agreed on this before any collective work, so all return together.
      if (*e.what() != '\0') std::cerr << "moebench: " << e.what() << "\n";
      return static_cast<int>(ExitCode::usage);
    }
    std::cerr << "moebench: error on rank " << runtime.rank() << " (host " << runtime.host()
              << "): " << e.what() << "\n";
    runtime.abort(static_cast<int>(e.code()));
  } catch (const std::exception& e) {
    std::cerr << "moebench: error on rank " << runtime.rank() << " (host " << runtime.host()
              << "): " << e.what() << "\n";
    runtime.abort(static_cast<int>(ExitCode::runtime));
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace moebench;
  CliOptions options;
  try {
    options = parse_command_line(argc, argv);
    switch (options.command) {
      case Command::help:
        if (first_rank_by_environment()) std::cout << options.help_text;
        return 0;
      case Command::version:
        std::cout << "moebench " << MOEBENCH_VERSION << " (" << git_sha()
                  << (git_dirty() ? ", dirty" : "") << ")\n";
        return 0;
      case Command::presets:
        return presets_command();
      case Command::plan:
        return plan_command(options);
      case Command::validate:
        return validate_command(options);
      case Command::report:
        return report_command(options);
      case Command::bench:
        return bench_command(options);
      case Command::run:
        break;
    }
  } catch (const Error& e) {
    if (first_rank_by_environment() || e.code() != ExitCode::usage) {
      std::cerr << "moebench: " << e.what() << "\n";
    }
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "moebench: " << e.what() << "\n";
    return static_cast<int>(ExitCode::runtime);
  }
  return run_with_mpi(options, &argc, &argv);
}
