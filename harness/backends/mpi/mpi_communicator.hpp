// The mpi communication backend: MPI collectives on host buffers, one MPI communicator per group
// of the parallel grid.
#pragma once

#include <memory>

#include <mpi.h>

#include "harness/comm/communicator.hpp"
#include "harness/parallel/topology.hpp"

namespace moebench {

// The mpi communicator over `world`, split into the groups of `topo`. Collective over `world`.
// Use MPI_COMM_SELF with a 1-rank topology for the single-process reference. Every operation,
// blocking or started, completes within `timeout_s` seconds or throws TimeoutError
// (harness/backends/mpi/mpi_wait.hpp) naming this rank, its host, the call and the group.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm world, const Topology& topo,
                                                    double timeout_s = 600.0);

}  // namespace moebench
