// The nccl communication backend, as host C++ sees it (no NCCL or CUDA header needed): the
// collectives and point-to-point transfers of the training step on the cuda backend's device
// buffers, on a stream of their own per lane (critical, background, pipeline) ordered after the
// compute stream's work. Only built with CUDA and NCCL (harness/layers.cmake).
#pragma once

#include <memory>
#include <string>

#include <mpi.h>

#include "harness/comm/communicator.hpp"
#include "harness/parallel/topology.hpp"

namespace moebench {

class CudaComputeApi;

// Collective over `world`. Checks first that no two ranks share a GPU (UsageError on every rank,
// printed by rank 0), then builds the world communicator from a unique id broadcast over MPI and
// splits the expert and expert-data groups from it, all non-blocking, polled against timeout_s.
// A collective that does not complete within timeout_s aborts every communicator and throws
// RuntimeError naming the rank, the host and the collective.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm world, const Topology& topo,
                                                     CudaComputeApi& compute, double timeout_s);

// The NCCL library this process runs with, "2.28.9".
std::string nccl_version();

}  // namespace moebench
