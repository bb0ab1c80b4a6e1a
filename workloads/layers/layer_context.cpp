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

Mat Scratch::get(std::string_view name, std::int64_t rows, std::int64_t cols, DType dtype) {
  auto it = buffers_.find(name);
  if (it == buffers_.end()) it = buffers_.emplace(std::string(name), Tensor()).first;
  Tensor& t = it->second;
  const std::int64_t numel = rows * cols;
  if (t.empty() || t.dtype() != dtype || t.numel() < numel) {
    const std::int64_t cap =
        t.empty() || t.dtype() != dtype ? numel : std::max(numel, t.numel() * 5 / 4);
    t = Tensor();  // the old buffer goes first: the peak holds one of them
    t = compute_.alloc(std::max<std::int64_t>(cap, 1), 1, dtype);
  }
  return Mat{t.data(), rows, cols, cols, dtype};
}

std::int64_t Scratch::bytes() const {
  std::int64_t sum = 0;
  for (const auto& [name, t] : buffers_) sum += static_cast<std::int64_t>(t.bytes());
  return sum;
}

}  // namespace moebench
