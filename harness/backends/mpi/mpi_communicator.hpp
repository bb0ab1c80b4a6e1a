// The mpi communication backend: MPI collectives on host buffers, one MPI communicator per group
// of the parallel grid.
#pragma once

#include <memory>

#include <mpi.h>

#include "harness/comm/communicator.hpp"
#include "harness/parallel/topology.hpp"

namespace moebench {

// The mpi communicator over `world`, split into the groups of `topo`. Collective over `world`.
// Use MPI_COMM_SELF with a 1-rank topology for the single-process reference.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm world, const Topology& topo);

}  // namespace moebench
