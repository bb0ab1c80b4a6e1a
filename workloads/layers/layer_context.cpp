#include "workloads/layers/layer_context.hpp"

#include <algorithm>
#include <vector>

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

Mat Scratch::iota(std::int64_t rows) {
  if (rows <= iota_rows_) return get("iota", rows, 1, DType::i32);
  // Grown: filled up to its new capacity, so that a slightly larger request next time is free.
  const std::int64_t cap = std::max(rows, iota_rows_ * 5 / 4);
  Mat all = get("iota", cap, 1, DType::i32);
  std::vector<std::int32_t> host(static_cast<std::size_t>(cap));
  for (std::int64_t i = 0; i < cap; ++i)
    host[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  compute_.upload_i32(host.data(), all);
  iota_rows_ = cap;
  return all.row_slice(0, rows);
}

std::int64_t Scratch::bytes() const {
  std::int64_t sum = 0;
  for (const auto& [name, t] : buffers_) sum += static_cast<std::int64_t>(t.bytes());
  return sum;
}

}  // namespace moebench
