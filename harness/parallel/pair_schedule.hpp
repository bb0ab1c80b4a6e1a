// Rounds of pairs for the link test: in each round every rank is paired with at most one other
// (a permutation of the ranks that is its own inverse), so every rank is busy and no link is
// shared by two measurements of the round. The circle method (a round-robin tournament) pairs
// every two ranks exactly once in n - 1 rounds for even n (n rounds, one rank idle in each, for
// odd n). Pure functions, unit-tested without MPI.
#pragma once

#include <vector>

namespace moebench {

// round[r] is the partner of rank r in that round, or -1 when it sits the round out.
using PairRound = std::vector<int>;

// Every pair of the n ranks exactly once.
std::vector<PairRound> all_pairs_rounds(int n);

// The node-level schedule, for a large machine: every pair of nodes exactly once, each rank
// paired with the rank of the same local rank on the partner node (ranks are node-major: rank =
// node * ranks_per_node + local rank, as the launchers place them), then every pair of ranks within
// each node, all nodes at once. rounds = (nodes - 1 or nodes) + (ranks_per_node - 1 or
// ranks_per_node), instead of about nodes * ranks_per_node.
std::vector<PairRound> node_level_rounds(int nodes, int ranks_per_node);

}  // namespace moebench
