// Attention's shape and its operands by head. A head's q, k and v are column blocks of the step's
// row-major matrices (rows = batch x seq_len); HeadCols says where head h's block starts, so
// attention reads MLA's per-head k_nope and v in place from the kv up-projection and its rope
// key from the one block every head shares, without building per-head copies.
#pragma once

#include <cstdint>

#include "harness/core/tensor.hpp"
#include "harness/math/hd.hpp"
#include "harness/math/mla.hpp"

namespace moebench {

struct AttentionShape {
  std::int64_t batch = 1;    // sequences
  std::int64_t seq_len = 1;  // tokens per sequence; rows of q/k/v are batch * seq_len
  std::int64_t heads = 1;
  std::int64_t qk_dim = 1;  // per-head q and k width
  std::int64_t v_dim = 1;   // per-head v and output width
  float scale = 1.0f;       // softmax scale, usually 1/sqrt(qk_dim)
  bool causal = true;
};

// One operand by head: head h of a row is the `width` columns of m from column h x head_stride.
// A head stride of 0 gives every head the same columns (MLA's shared rope key); the gradient of
// such an operand is the sum over the heads. An empty operand has width 0.
struct HeadCols {
  Mat m;
  std::int64_t head_stride = 0;
  std::int64_t width = 0;

  MB_HD bool shared() const { return head_stride == 0; }
  // Per head, one after the other with nothing between (cuDNN's [batch, heads, seq, d] view).
  MB_HD bool packed() const { return head_stride == width; }
  // Head h's columns.
  Mat head(std::int64_t h) const { return m.col_slice(h * head_stride, width); }
};

// Attention's q, k and v, or their gradients (the same layout), by head. A head's key is
// [k | k_rope], qk_dim wide (k_rope may be empty): the scores are q's first k.width columns times
// k plus its last k_rope.width columns times k_rope.
struct AttentionOperands {
  HeadCols q, k, k_rope, v;

  // Plain attention: q, k (rows x heads qk_dim) and v (rows x heads v_dim), head after head.
  static AttentionOperands dense(const AttentionShape& s, Mat q, Mat k, Mat v);
  // MLA: q (rows x heads dq), kv (rows x heads (dn + dv): per head [k_nope | v], the kv
  // up-projection's output) and krope (rows x dr, shared by the heads). The same call on dq, dkv
  // and dkrope gives the gradients' layout.
  static AttentionOperands mla(const MlaDims& d, Mat q, Mat kv, Mat krope);
  // Whether q, k and v are each one packed block per head (what cuDNN's SDPA reads in place).
  bool packed() const { return q.packed() && k.packed() && k_rope.width == 0 && v.packed(); }
};

// Column j of head h's key [a | b] (a.width + b.width wide): from b where second, at column col of
// its matrix. The gather into a packed key and the scatter of its gradient use it (cuda backend).
struct KeyColumn {
  bool second;
  std::int64_t col;
};
MB_HD KeyColumn key_column(std::int64_t a_stride, std::int64_t a_width, std::int64_t b_stride,
                           std::int64_t h, std::int64_t j) {
  return j < a_width ? KeyColumn{false, h * a_stride + j}
                     : KeyColumn{true, h * b_stride + (j - a_width)};
}

}  // namespace moebench
