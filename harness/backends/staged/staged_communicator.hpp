// `--comm mpi` for a compute backend whose tensors live on a device: every collective downloads
// its input to host memory (FP32, whatever the storage type), runs the host communicator there
// and uploads the result. This is what lets several ranks share one GPU (NCCL cannot), so the
// expert-parallel path is testable on a single-GPU machine; it is a correctness path, not a
// bandwidth measurement (the host copies are inside the communication phases' times).
#pragma once

#include <memory>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"

namespace moebench {

// `host` must move FP32 host buffers (the mpi backend); `compute` owns every buffer passed to
// the returned communicator and must outlive it. Each collective is complete on return, the
// start_* forms included (Communicator's defaults: the blocking call, whose busy_time_s is its
// host time, copies included; on the mpi backend underneath they would gain nothing, since the
// host copies are themselves blocking).
std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       Compute& compute);

}  // namespace moebench
