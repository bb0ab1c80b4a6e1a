// MLA's per-head layout (workloads/layers/attention.cpp), written once for both backends: the kv
// up-projection's row holds, per head h, [k_nope (dn) | v (dv)]; attention reads per head
// k = [k_nope | the shared k_rope (dr)] and v. mla_k_source and mla_v_source say where a column
// of k or v comes from, so the split (and its gradient, the same map backwards) is one pass over
// a row instead of three copies per head.
#pragma once

#include <cstdint>

#include "workloads/ops/hd.hpp"

namespace moebench {

struct MlaDims {
  std::int64_t heads = 0, dn = 0, dr = 0, dv = 0;
  MB_HD std::int64_t dq() const { return dn + dr; }
  MB_HD std::int64_t kv_width() const { return heads * (dn + dv); }
};

// Column c of k (heads x dq wide): the kv column it copies, or -1 - j for the shared k_rope's
// column j.
MB_HD std::int64_t mla_k_source(std::int64_t c, const MlaDims& d) {
  const std::int64_t h = c / d.dq(), j = c - h * d.dq();
  return j < d.dn ? h * (d.dn + d.dv) + j : -1 - (j - d.dn);
}

// Column c of v (heads x dv wide): the kv column it copies.
MB_HD std::int64_t mla_v_source(std::int64_t c, const MlaDims& d) {
  const std::int64_t h = c / d.dv;
  return h * (d.dn + d.dv) + d.dn + (c - h * d.dv);
}

// Column c of kv (the gradient's direction): the dk column (>= 0) or the dv column (-1 - col)
// it comes from.
MB_HD std::int64_t mla_kv_grad_source(std::int64_t c, const MlaDims& d) {
  const std::int64_t h = c / (d.dn + d.dv), j = c - h * (d.dn + d.dv);
  return j < d.dn ? h * d.dq() + j : -1 - (h * d.dv + (j - d.dn));
}

}  // namespace moebench
