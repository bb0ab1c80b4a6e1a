// One layer's core attention over one sequence at MLA shapes, with its operands allocated and
// filled at random (the same seed on every rank): the query, the shared kv up-projection and
// rope key the step hands over, the output and its gradient. What `moebench bench` times and
// `moebench accept`'s attention probe runs.
#pragma once

#include <cstdint>

#include "harness/compute/compute.hpp"

namespace moebench {

class MlaAttentionCase {
 public:
  MlaAttentionCase(Compute& c, const MlaDims& d, std::int64_t seq, std::uint64_t seed);
  const AttentionShape& shape() const { return shape_; }
  void forward();
  void forward_backward();
  Mat output() const { return out_.view(); }
  Mat query_gradient() const { return dq_.view(); }

 private:
  Compute& c_;
  MlaDims d_;
  AttentionShape shape_;
  Tensor q_, kv_, kr_, out_, stats_, dout_, dq_, dkv_, dkr_;
};

}  // namespace moebench
