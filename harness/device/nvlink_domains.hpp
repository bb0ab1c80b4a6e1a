// Every rank's NVLink domain, found the same way by `run` and `linkcheck`: emulated domains of K
// consecutive ranks (--nvlink-domain-size), else NVML's fabric cliques when every rank's GPU has
// one (NVL72 and other multi-node NVLink systems), else the rank's node (HGX: a node is a domain;
// emulated nodes count as nodes).
#pragma once

#include <string>
#include <vector>

#include "harness/compute/compute.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {

struct NvlinkDomains {
  std::string source;        // "emulated", "nvml" or "node"
  std::vector<int> of_rank;  // world rank -> domain, numbered in order of first appearance
};

// Collective over the runtime's world. emulated_size 0: detect; `node` is this rank's node.
NvlinkDomains find_nvlink_domains(const MpiRuntime& rt, const Compute& compute, int emulated_size,
                                  int node);

}  // namespace moebench
