// Gradient buckets: the ranges of a group's flat gradient buffer reduced by one collective each.
// Parameters lie layer by layer in each group's buffer (workloads/params/parameters.hpp), and the
// backward finishes the last layer first, so a bucket is a run of whole layers taken from the
// end of the buffer: its collective can start as soon as its lowest layer's backward is done,
// while the layers below compute (as Megatron-LM's and PyTorch DDP's buckets do).
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/params/parameters.hpp"

namespace moebench {

struct GradBucket {
  ParamGroup group = ParamGroup::dense;
  std::int64_t offset = 0;  // first element in the group's flat buffer
  std::int64_t numel = 0;
  int ready_layer = 0;  // its gradients are final once this layer's backward has run
};

// The buckets of both groups in the order the backward completes them (highest ready_layer
// first; dense before expert at the same layer). Layers are merged into a bucket until it holds
// at least bucket_bytes (0: one bucket per layer); the padding at the end of a buffer goes with
// its first bucket. whole_groups: one bucket per group (ZeRO-1's reduce-scatter shards the whole
// buffer). A group without parameters has no bucket. RuntimeError if the layout is not layer by
// layer.
std::vector<GradBucket> make_grad_buckets(const std::vector<ParamInfo>& infos,
                                          const std::int64_t padded_numel[2],
                                          std::int64_t bucket_bytes, std::int64_t bytes_per_element,
                                          bool whole_groups);

}  // namespace moebench
