#include "harness/comm/comm_backend.hpp"

#include "harness/core/error.hpp"

namespace moebench {

const char* to_string(CommBackend c) {
  switch (c) {
    case CommBackend::mpi:
      return "mpi";
    case CommBackend::nccl:
      return "nccl";
    case CommBackend::local:
      return "local";
  }
  return "?";
}

CommBackend parse_comm_backend(const std::string& text) {
  if (text == "mpi") return CommBackend::mpi;
  if (text == "nccl") return CommBackend::nccl;
  throw UsageError("--comm " + text + ": unknown communication backend '" + text +
                   "'; valid: mpi, nccl");
}

}  // namespace moebench
