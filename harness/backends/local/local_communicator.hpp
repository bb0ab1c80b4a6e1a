// A communicator for a job of one rank that needs no MPI: every group is this rank alone, so an
// all-to-all is a copy of the rows this rank sends itself and the reductions are copies or
// nothing. The performance probe runs the training step on one device with it, on any backend
// (the copies go through the compute backend, so device buffers stay on the device).
#pragma once

#include <memory>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"

namespace moebench {

std::unique_ptr<Communicator> make_local_communicator(Compute& compute);

}  // namespace moebench
