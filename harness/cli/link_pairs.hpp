// The pairwise link measurement `moebench linkcheck` and `moebench accept` share: in rounds where
// every rank is busy, each pair exchanges a large message one way and then the other (the
// receiver times it: the link's bandwidth) and ping-pongs a small one (the initiator's half
// round trip: its latency). Collective over the world.
#pragma once

#include <vector>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/measure/links.hpp"
#include "harness/parallel/pair_schedule.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {

struct PairMeasurement {
  std::vector<LinkSample> samples;  // on rank 0: every pair and direction measured
  double wall_time_s = 0;
};

// `large` and `small` bytes a message, the best of `iterations` transfers (and 5x as many
// ping-pongs) counting.
PairMeasurement measure_pairs(Communicator& comm, Compute& compute, const MpiRuntime& rt,
                              const std::vector<PairRound>& rounds, std::int64_t large,
                              std::int64_t small, int iterations);

}  // namespace moebench
