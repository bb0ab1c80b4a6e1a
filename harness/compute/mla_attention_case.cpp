#include "harness/compute/mla_attention_case.hpp"

#include <cmath>

namespace moebench {

MlaAttentionCase::MlaAttentionCase(Compute& c, const MlaDims& d, std::int64_t seq,
                                   std::uint64_t seed)
    : c_(c),
      d_(d),
      shape_{1, seq, d.heads, d.dq(), d.dv, 1.0f / std::sqrt(static_cast<float>(d.dq())), true},
      q_(c.alloc(seq, d.heads * d.dq())),
      kv_(c.alloc(seq, d.kv_width())),
      kr_(c.alloc(seq, d.dr)),
      out_(c.alloc(seq, d.heads * d.dv)),
      stats_(c.alloc(seq, d.heads, DType::f32)),
      dout_(c.alloc(seq, d.heads * d.dv)),
      dq_(c.alloc(seq, d.heads * d.dq())),
      dkv_(c.alloc(seq, d.kv_width())),
      dkr_(c.alloc(seq, d.dr)) {
  std::uint64_t stream = 1;
  for (const Tensor* t : {&q_, &kv_, &kr_, &dout_}) c.fill_random(*t, seed, stream++, 1.0f);
}

void MlaAttentionCase::forward() {
  c_.attention_forward(shape_, AttentionOperands::mla(d_, q_, kv_, kr_), out_, stats_);
}

void MlaAttentionCase::forward_backward() {
  const AttentionOperands in = AttentionOperands::mla(d_, q_, kv_, kr_);
  c_.attention_forward(shape_, in, out_, stats_);
  c_.attention_backward(shape_, in, out_, dout_, stats_,
                        AttentionOperands::mla(d_, dq_, dkv_, dkr_));
}

}  // namespace moebench
