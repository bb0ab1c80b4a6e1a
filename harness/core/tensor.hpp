// Tensors as the step sees them: 2-D, row-major, owned by a compute backend's memory. The step
// never touches element data directly; it hands views (`Mat`) to the compute interface, which is
// what lets the same step run on host memory (cpu) and device memory (cuda).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "harness/core/error.hpp"

namespace moebench {

enum class DType : std::uint8_t { f32, bf16, i32 };

constexpr std::size_t dtype_size(DType t) {
  return t == DType::bf16 ? 2 : 4;
}
const char* dtype_name(DType t);

// A non-owning view of a row-major matrix: element (r, c) is at data + (r * ld + c) elements.
struct Mat {
  void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // leading dimension in elements, >= cols
  DType dtype = DType::f32;

  std::int64_t numel() const { return rows * cols; }
  bool contiguous() const { return ld == cols || rows <= 1; }
  // Rows [first, first + count).
  Mat row_slice(std::int64_t first, std::int64_t count) const;
  // Columns [first, first + count) of every row (ld unchanged).
  Mat col_slice(std::int64_t first, std::int64_t count) const;
  // The same contiguous elements seen as rows x cols.
  Mat reshaped(std::int64_t new_rows, std::int64_t new_cols) const;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Whether the memory spans of two views (first to last element) intersect.
bool spans_overlap(const Mat& a, const Mat& b);

// Owns a contiguous allocation made by a compute backend (the deleter returns it there).
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<void> storage, std::int64_t rows, std::int64_t cols, DType dtype)
      : storage_(std::move(storage)), rows_(rows), cols_(cols), dtype_(dtype) {}

  Mat view() const { return Mat{storage_.get(), rows_, cols_, cols_, dtype_}; }
  operator Mat() const { return view(); }  // NOLINT: a tensor is usable wherever a view is
  void* data() const { return storage_.get(); }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t numel() const { return rows_ * cols_; }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  bool empty() const { return storage_ == nullptr; }

 private:
  std::shared_ptr<void> storage_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  DType dtype_ = DType::f32;
};

}  // namespace moebench
