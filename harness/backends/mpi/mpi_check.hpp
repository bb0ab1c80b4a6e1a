// Turns an MPI return code into a RuntimeError naming the call, MPI's error string, the world
// rank and the host. Only meaningful on communicators whose error handler is MPI_ERRORS_RETURN
// (the runtime and the mpi communicator set it); otherwise MPI aborts before returning.
#pragma once

namespace moebench {

void check_mpi(int rc, const char* call);

}  // namespace moebench
