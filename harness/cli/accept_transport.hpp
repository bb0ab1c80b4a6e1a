// Which transport NCCL used for accept's collectives (read from NCCL's log after them,
// nccl_log.hpp), judged. A transport that is not the expected one is a finding by itself: TCP
// sockets where
// the system has an RDMA scale-out network (NCCL's silent fallback when the HCA, its driver or
// the plugin is missing: a few GB/s in place of hundreds), host memory (SHM) between GPUs of one
// NVLink domain (peer access off, an IOMMU or ACS setting).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/cli/accept_checks.hpp"

namespace moebench {

// What is expected of the transports: ranks on more than one node (a network crosses), and the
// system's figures (an NVLink domain larger than 1: P2P between GPUs of a node; a scale-out
// network of `scale_out_bytes_per_s` a GPU: RDMA, not sockets).
struct TransportExpectation {
  bool spans_nodes = false;
  bool nvlink = false;
  double scale_out_bytes_per_s = 0;
};

// One check a rank (`collective_transport`, stage collectives) whose log was read: TCP sockets
// where an RDMA network is expected, or SHM between GPUs where NVLink is, fail it; every rank
// failing for the same reason is one check of the cluster's (a setting, not a node). A rank whose
// log was not read is an `info` check with its reason (`why`, by rank); no rank's at all, one
// `info` check with rank 0's.
std::vector<AcceptCheck> judge_transports(const std::vector<AcceptRank>& ranks,
                                          const std::vector<std::optional<NcclTransports>>& seen,
                                          const TransportExpectation& expect,
                                          const std::vector<std::string>& why);

}  // namespace moebench
