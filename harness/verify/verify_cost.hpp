// What --verify costs before it runs: the single-process reference on rank 0 (its step on the
// compute backend, its results in host memory while the ranks compare) and what each rank
// receives of it (its own slices only: reference_check.cpp). `plan --verify` prints it; `run
// --verify` refuses before the reference runs where rank 0's host cannot hold the results.
#pragma once

#include <cstddef>

#include "workloads/config/run_config.hpp"

namespace moebench {

struct VerifyCost {
  double reference_step_bytes = 0;     // the reference's step (estimate_reference_memory)
  double reference_results_bytes = 0;  // its outputs, input gradients and gradients, FP32, host
  double max_rank_received_bytes = 0;  // the most any rank receives (an upper bound)
  double sent_bytes = 0;               // what rank 0 sends in all (an upper bound)
};

// bytes_per_element: the compute backend's activation dtype (2 on a GPU, 4 on the cpu backend).
VerifyCost estimate_verify_cost(const RunConfig& c, std::size_t bytes_per_element);

}  // namespace moebench
