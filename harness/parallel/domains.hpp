// NVLink domains: the sets of GPUs that reach each other over NVLink (a node on HGX systems; a
// rack of up to 72 GPUs on NVL72, which NVML names by a cluster UUID and a clique id). An
// expert group whose ranks sit in two domains sends part of every dispatch and combine over the
// slower network. Pure functions of the ranks' domains and the grid, unit-tested without MPI.
#pragma once

#include <string>
#include <vector>

#include "harness/parallel/grid.hpp"

namespace moebench {

// Each rank's domain as a small number, in order of first appearance of its key (a host name, or
// NVML's cluster UUID and clique id).
std::vector<int> domains_from_keys(const std::vector<std::string>& keys);

// Emulated domains of `size` consecutive ranks (--nvlink-domain-size): rank r is in r / size.
std::vector<int> emulated_domains(int world, int size);

// One line per expert group that spans more than one domain although it would fit in one (no
// larger than the domains it touches: a group larger than a domain spans domains by design, as
// EP 32 does over 8-GPU nodes), at most `limit` of them and then a count of the rest, naming its
// world ranks and the domains, and what would keep groups whole.
std::vector<std::string> straddling_expert_groups(const ParallelGrid& grid,
                                                  const std::vector<int>& domains,
                                                  std::size_t limit = 4);

}  // namespace moebench
