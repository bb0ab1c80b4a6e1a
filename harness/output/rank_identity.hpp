// Who a rank is, for the people who go and look at the hardware: its host, local rank and GPU
// (index, UUID, PCI bus id), joined from the per-rank results and the device records. Read by
// the report's health section and the console's health block alike.
#pragma once

#include <string>
#include <vector>

#include "harness/output/run_record.hpp"

namespace moebench {

struct RankIdentity {
  int rank = 0;
  std::string host;
  int node = 0;
  int local_rank = 0;
  int gpu_index = -1;  // the CUDA ordinal; -1 without a GPU (the cpu backend)
  std::string uuid;
  std::string pci_bus_id;
};

RankIdentity identify_rank(const RunRecord& r, int rank);

// "rank 3 (host node-7, local rank 3, GPU 3 GPU-8c3a... 0000:19:00.0)"; no GPU part without one.
std::string describe(const RankIdentity& who);

// One line per suspect rank of the run's health check, its worst entry first found: who it is
// and why ("rank 1 (host h, local rank 1): compute 4.1x ..."), for the console, --quiet too.
std::vector<std::string> suspect_lines(const RunRecord& r);

}  // namespace moebench
