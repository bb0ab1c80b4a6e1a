// A compute backend that runs every operation of the one it wraps and then owes (factor - 1)
// times as long as the operation took, so that the whole of a rank's compute takes `factor`
// times as long: a slow GPU, for `moebench run --inject slow:rank=R,factor=F`, with no test hook
// in the training step. On the host backend the time owed is CPU time, spent spinning, so that
// the slowed rank stays slower than its peers when ranks share cores (slow_compute.cpp says why);
// on a device backend each operation is synchronised to be timed, which slows it further, and
// the time owed is slept.
#pragma once

#include <memory>

#include "harness/backends/fault/fault_communicator.hpp"
#include "harness/compute/compute.hpp"

namespace moebench {

// `inner` wrapped; factor > 1. With `work` other than all, only that kind of operation is slowed.
std::unique_ptr<Compute> make_slow_compute(std::unique_ptr<Compute> inner, double factor,
                                           SlowWork work = SlowWork::all);

// `inner` wrapped so that every `every`-th GEMM's output has one bit flipped (--inject sdc): a
// GPU that computes wrong without failing. every >= 1.
std::unique_ptr<Compute> make_sdc_compute(std::unique_ptr<Compute> inner, int every);

}  // namespace moebench
