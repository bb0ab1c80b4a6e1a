#include "harness/compute/attention_operands.hpp"

namespace moebench {

AttentionOperands AttentionOperands::dense(const AttentionShape& s, Mat q, Mat k, Mat v) {
  return AttentionOperands{HeadCols{q, s.qk_dim, s.qk_dim}, HeadCols{k, s.qk_dim, s.qk_dim},
                           HeadCols{}, HeadCols{v, s.v_dim, s.v_dim}};
}

AttentionOperands AttentionOperands::mla(const MlaDims& d, Mat q, Mat kv, Mat krope) {
  const std::int64_t kv_stride = d.dn + d.dv;
  return AttentionOperands{HeadCols{q, d.dq(), d.dq()}, HeadCols{kv, kv_stride, d.dn},
                           HeadCols{krope, 0, d.dr},
                           HeadCols{kv.col_slice(d.dn, kv.cols - d.dn), kv_stride, d.dv}};
}

}  // namespace moebench
