// moebench's entry point: parse, dispatch to a command, and turn every failure into one clear
// line and a distinct exit code on every rank (error.hpp lists the codes).
#include <cstdlib>
#include <iostream>

#include "harness/backends/cpu/blas_core.hpp"
#include "harness/cli/commands.hpp"
#include "harness/core/error.hpp"
#include "harness/core/version.hpp"

namespace {

// Before MPI starts, the launcher's environment says which rank this is.
const char* launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name)) return v;
  }
  return nullptr;
}
bool first_rank_by_environment() {
  const char* r = launcher_rank();
  return r == nullptr || std::atoi(r) == 0;
}

// A usage error found before MPI started (bad flags: every rank finds the same one). Under a
// launcher, the first rank prints it and the others wait for that at a barrier: a rank that
// exited first would make the launcher kill the job before the line was written.
int usage_error_on_every_rank(const moebench::Error& e, int* argc, char*** argv) {
  using namespace moebench;
  if (launcher_rank() == nullptr) {
    std::cerr << "moebench: " << e.what() << "\n";
    return static_cast<int>(e.code());
  }
  MpiRuntime runtime(argc, argv);
  if (runtime.rank() == 0) std::cerr << "moebench: " << e.what() << std::endl;
  runtime.barrier();
  return static_cast<int>(e.code());
}

int run_with_mpi(const moebench::CliOptions& options, int* argc, char*** argv) {
  using namespace moebench;
  MpiRuntime runtime(argc, argv);
  try {
    switch (options.command) {
      case Command::linkcheck:
        return linkcheck_command(options, runtime);
      case Command::accept:
        return accept_command(options, runtime);
      default:
        return run_command(options, runtime);
    }
  } catch (const Error& e) {
    if (e.code() == ExitCode::usage) {
      // Every rank agreed on this before any collective work, so all return together.
      if (*e.what() != '\0') std::cerr << "moebench: " << e.what() << "\n";
      return static_cast<int>(ExitCode::usage);
    }
    if (*e.what() != '\0') {  // empty: the rank said it already
      std::cerr << "moebench: error on rank " << runtime.rank() << " (host " << runtime.host()
                << "): " << e.what() << "\n";
    }
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
  // First, before MPI or anything else: OpenBLAS's fast kernels where it fell back to generic
  // ones (may re-execute this process, blas_core.hpp).
  use_fast_blas_kernels(argv);
  CliOptions options;
  try {
    options = parse_command_line(argc, argv);
    // The docs' check (tests/e2e/test_readme.py): every documented command line parses.
    if (const char* only = std::getenv("MOEBENCH_PARSE_ONLY"); only != nullptr && *only == '1') {
      return 0;
    }
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
      case Command::recipes:
        return recipes_command(options);
      case Command::phases:
        return phases_command(options);
      case Command::systems:
        return systems_command(options);
      case Command::plan:
        return plan_command(options);
      case Command::predict:
        return predict_command(options);
      case Command::validate:
        return validate_command(options);
      case Command::report:
        return report_command(options);
      case Command::accept_merge:
        return accept_merge_command(options);
      case Command::bench:
        return bench_command(options);
      case Command::run:
      case Command::linkcheck:
      case Command::accept:
        break;
    }
  } catch (const Error& e) {
    if (e.code() == ExitCode::usage) return usage_error_on_every_rank(e, &argc, &argv);
    std::cerr << "moebench: " << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "moebench: " << e.what() << "\n";
    return static_cast<int>(ExitCode::runtime);
  }
  return run_with_mpi(options, &argc, &argv);
}
