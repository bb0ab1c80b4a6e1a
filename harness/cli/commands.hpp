// The subcommands. Each returns the process exit code; errors are thrown (see error.hpp).
#pragma once

#include "harness/cli/options.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {

int run_command(const CliOptions& o, MpiRuntime& runtime);
int plan_command(const CliOptions& o);
int presets_command();
int validate_command(const CliOptions& o);

}  // namespace moebench
