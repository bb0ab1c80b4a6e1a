// Host memory for the host-run kernel tests: a matrix view of BF16 or FP32 with canaries around
// it, and an exact comparison of two such allocations, canaries included.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "harness/backends/cuda/device_mat.cuh"
#include "harness/math/random.hpp"

namespace moebench::cuda {

constexpr float kCanary = -12345.0f;  // BF16-exact

// A view's shape for the cases: rows x cols in rows of ld elements, starting `offset` elements
// into its allocation.
struct ViewShape {
  std::int64_t rows, cols, ld, offset;
  const char* what;
};

// Host memory for a rows x ld matrix of `dtype`, 16-byte aligned, with a margin of canaries
// before and after; view() is the rows x cols view at column `offset` (offset 1 breaks the
// 16-byte alignment of BF16 and FP32 rows alike).
class HostMat {
 public:
  HostMat(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t offset, DType dtype)
      : rows_(rows), cols_(cols), ld_(ld), offset_(offset), dtype_(dtype) {
    const std::size_t bytes = static_cast<std::size_t>(total()) * dtype_size(dtype);
    storage_ = std::make_unique<uint4[]>((bytes + 15) / 16);
    for (std::int64_t i = 0; i < total(); ++i) set_raw(i, kCanary);
  }
  Mat view() const {
    return Mat{static_cast<char*>(base()) + (kMargin + offset_) * dtype_size(dtype_), rows_, cols_,
               ld_, dtype_};
  }
  // Every element of the allocation, in memory order (view elements and canaries).
  std::int64_t total() const { return 2 * kMargin + rows_ * ld_ + offset_; }
  float raw(std::int64_t i) const {
    if (dtype_ == DType::bf16) {
      std::uint16_t h;
      std::memcpy(&h, static_cast<const char*>(base()) + 2 * i, 2);
      return bits_to_float(static_cast<std::uint32_t>(h) << 16);
    }
    float f;
    std::memcpy(&f, static_cast<const char*>(base()) + 4 * i, 4);
    return f;
  }
  void set_raw(std::int64_t i, float v) {
    if (dtype_ == DType::bf16) {
      const std::uint16_t h = static_cast<std::uint16_t>(pack_bf16x2(v, 0.0f) & 0xffffu);
      std::memcpy(static_cast<char*>(base()) + 2 * i, &h, 2);
    } else {
      std::memcpy(static_cast<char*>(base()) + 4 * i, &v, 4);
    }
  }
  // Whether element i of the allocation lies inside the view.
  bool in_view(std::int64_t i) const {
    const std::int64_t j = i - kMargin - offset_;
    if (j < 0 || j >= rows_ * ld_) return false;
    return j % ld_ < cols_;
  }
  // Fills the view with seeded values in [-2, 2), rounded to the dtype.
  void randomise(std::uint64_t stream) {
    const Mat v = view();
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t c = 0; c < cols_; ++c)
        store(v, r, c, 2.0f * uniform_pm1(5, stream, static_cast<std::uint64_t>(r * cols_ + c)));
  }
  // Fills the view with seeded integers in [-k, k]: products and sums of a few thousand of them
  // are exact in FP32 in any order, so a reduction over them compares exactly.
  void integers(std::uint64_t stream, int k) {
    const Mat v = view();
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t c = 0; c < cols_; ++c) {
        const float u = uniform_pm1(6, stream, static_cast<std::uint64_t>(r * cols_ + c));
        store(v, r, c, std::nearbyint(static_cast<float>(k) * u));
      }
  }
  HostMat clone() const {
    HostMat m(rows_, cols_, ld_, offset_, dtype_);
    std::memcpy(m.base(), base(), static_cast<std::size_t>(total()) * dtype_size(dtype_));
    return m;
  }

 private:
  static constexpr std::int64_t kMargin = 24;
  void* base() const { return storage_.get(); }
  std::int64_t rows_, cols_, ld_, offset_;
  DType dtype_;
  std::unique_ptr<uint4[]> storage_;
};

// got and want element for element, canaries included.
inline void check_same(const HostMat& got, const HostMat& want, const std::string& what) {
  std::int64_t wrong = 0, first = -1;
  for (std::int64_t i = 0; i < got.total(); ++i) {
    const float g = got.raw(i), w = want.raw(i);
    if (!(g == w || (g != g && w != w))) {
      ++wrong;
      if (first < 0) first = i;
    }
  }
  INFO(what << ": " << wrong << " elements differ; first at " << first << " (got "
            << (first >= 0 ? got.raw(first) : 0.0f) << ", want "
            << (first >= 0 ? want.raw(first) : 0.0f)
            << ", inside the view: " << (first >= 0 && got.in_view(first)) << ")");
  CHECK(wrong == 0);
}

}  // namespace moebench::cuda
