#include "harness/backends/mpi/mpi_check.hpp"

#include <mpi.h>

#include <string>

#include "harness/core/error.hpp"
#include "harness/core/host.hpp"

namespace moebench {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  int rank = -1;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw RuntimeError(std::string(call) + " failed: " + std::string(text, len) + " (rank " +
                     std::to_string(rank) + " on " + host_name() + ")");
}

}  // namespace moebench
