// The communication backends by name (--comm): parsed once where a user names one.
#pragma once

#include <string>

namespace moebench {

// `local` is the one-rank communicator of the performance probe, never named on the command line.
enum class CommBackend { mpi, nccl, local };
const char* to_string(CommBackend c);
// UsageError naming the valid values for anything but mpi or nccl.
CommBackend parse_comm_backend(const std::string& text);

}  // namespace moebench
