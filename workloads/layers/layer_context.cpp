#include "workloads/layers/layer_context.hpp"

#include <algorithm>

namespace moebench {

Mat ensure_rows(Compute& compute, Tensor& t, std::int64_t rows, std::int64_t cols, DType dtype) {
  if (t.empty() || t.cols() != cols || t.rows() < rows || t.dtype() != dtype) {
    // Grow with headroom so that routing imbalance from step to step does not reallocate.
    const std::int64_t cap =
        t.empty() || t.cols() != cols ? rows : std::max(rows, t.rows() * 5 / 4);
    t = compute.alloc(std::max<std::int64_t>(cap, 1), cols, dtype);
  }
  return t.view().row_slice(0, rows);
}

}  // namespace moebench
