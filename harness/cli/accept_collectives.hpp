// `moebench accept`'s collectives: all-reduce, reduce-scatter, all-gather and all-to-all over
// every rank at a few sizes, timed as nccl-tests times them (the slowest rank's mean over the
// iterations), with nccl-tests' bus bandwidth: the algorithm bandwidth (bytes / time) times
// 2(n-1)/n for an all-reduce and (n-1)/n for the others, the figure that compares with the
// bandwidth of the links a collective crosses, whatever n.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/cli/accept_checks.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {

// nccl-tests' factor from algorithm to bus bandwidth among n ranks.
double bus_factor(const std::string& op, int n);

// Every op at every size (bytes, rounded down to whole rows of every rank), `iters` timed
// iterations after one untimed; collective over the world. Every rank returns the same rows.
std::vector<CollectiveRow> measure_collectives(Communicator& comm, Compute& compute,
                                               const MpiRuntime& rt,
                                               const std::vector<std::int64_t>& sizes, int iters);

// The table for people, nccl-tests' columns (size, time, algbw, busbw), one line a row.
std::vector<std::string> collectives_table(const std::vector<CollectiveRow>& rows);

// One check an op, the cluster's (every rank takes part): its bus bandwidth at the largest size
// against `spec`'s expected figure (floor x it, unless nominal); stated where none applies.
std::vector<AcceptCheck> judge_collectives(const std::vector<CollectiveRow>& rows,
                                           const RateSpec& spec);

}  // namespace moebench
