// The watchdog of every MPI operation: a non-blocking call completed by polling MPI_Testall
// against a deadline, so a peer that stopped, hung or died ends the wait with a TimeoutError
// (exit 6) naming what was waited for, instead of a hang. Blocking MPI calls are not used on the
// step's path or the runtime's.
#pragma once

#include <functional>
#include <span>
#include <string>

#include <mpi.h>

#include "harness/backends/mpi/mpi_check.hpp"

namespace moebench {

// Completes `requests`, polling MPI_Testall (and yielding the core between polls after the first
// millisecond, so oversubscribed ranks still progress) until `timeout_s` seconds have passed;
// then TimeoutError: "<what()> did not complete within T s (--timeout): ...". An MPI error is a
// RuntimeError naming `call`.
void wait_within(std::span<MPI_Request> requests, double timeout_s, const char* call,
                 const std::function<std::string()>& what);

// A blocking MPI call, bounded: starts the non-blocking form (`start` gets the request to fill
// and returns MPI's code) and completes it with wait_within.
template <typename F>
void start_and_wait(const char* call, F&& start, double timeout_s,
                    const std::function<std::string()>& what) {
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(start(&r), call);
  wait_within(std::span<MPI_Request>(&r, 1), timeout_s, call, what);
}

// The world ranks of a communicator's members, as "0-3" or "0,2,4,6" (at most about 60
// characters, then "..."), for the messages.
std::string world_ranks_of(MPI_Comm comm);

}  // namespace moebench
