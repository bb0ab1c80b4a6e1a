// --verify: rank 0 regenerates the whole global batch and every weight from the seeds, runs the
// same step in a single process (world 1, EP 1, all experts local, on the same compute backend),
// and every rank compares its outputs, input gradients and reduced gradients against it, as
// nccl-tests counts #wrong.
#pragma once

#include "harness/output/run_record.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench {

// Collective over all ranks; call after `step.run()` of the step to check.
VerificationResult verify_step(const RunConfig& config, const Topology& topo,
                               const MpiRuntime& runtime, Compute& compute,
                               const TrainingStep& step);

}  // namespace moebench
