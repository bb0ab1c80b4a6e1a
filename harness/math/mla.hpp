// MLA's per-head dimensions. The kv up-projection's row holds, per head h, [k_nope (dn) | v (dv)];
// attention reads a head's key as [k_nope | the rope key (dr) every head shares] and its value in
// place (harness/compute/attention_operands.hpp).
#pragma once

#include <cstdint>

#include "harness/math/hd.hpp"

namespace moebench {

struct MlaDims {
  std::int64_t heads = 0, dn = 0, dr = 0, dv = 0;
  MB_HD std::int64_t dq() const { return dn + dr; }
  MB_HD std::int64_t kv_width() const { return heads * (dn + dv); }
};

}  // namespace moebench
