// The subcommands. Each returns the process exit code; errors are thrown (see error.hpp).
#pragma once

#include "harness/cli/options.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {

int run_command(const CliOptions& o, MpiRuntime& runtime);
int plan_command(const CliOptions& o);
int predict_command(const CliOptions& o);
int presets_command();
int recipes_command(const CliOptions& o);
int phases_command(const CliOptions& o);
int systems_command(const CliOptions& o);
int validate_command(const CliOptions& o);
int report_command(const CliOptions& o);  // no MPI: a plain file tool
int bench_command(const CliOptions& o);   // one process on one device, no MPI
int linkcheck_command(const CliOptions& o, MpiRuntime& runtime);
int accept_command(const CliOptions& o, MpiRuntime& runtime);
int accept_merge_command(const CliOptions& o);

}  // namespace moebench
