#include "harness/core/tensor.hpp"

namespace moebench {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
  }
  return "?";
}

namespace {
void* offset(void* base, std::int64_t elements, DType t) {
  return static_cast<char*>(base) + elements * static_cast<std::int64_t>(dtype_size(t));
}
}  // namespace

bool spans_overlap(const Mat& a, const Mat& b) {
  const auto span_bytes = [](const Mat& m) -> std::int64_t {
    if (m.rows == 0 || m.cols == 0) return 0;
    return ((m.rows - 1) * m.ld + m.cols) * static_cast<std::int64_t>(dtype_size(m.dtype));
  };
  const auto* a0 = static_cast<const char*>(a.data);
  const auto* b0 = static_cast<const char*>(b.data);
  if (span_bytes(a) == 0 || span_bytes(b) == 0) return false;
  return a0 < b0 + span_bytes(b) && b0 < a0 + span_bytes(a);
}

Mat Mat::row_slice(std::int64_t first, std::int64_t count) const {
  MB_CHECK(first >= 0 && count >= 0 && first + count <= rows,
           "row slice [" << first << ", " << first + count << ") of a " << rows << "-row matrix");
  return Mat{offset(data, first * ld, dtype), count, cols, ld, dtype};
}

Mat Mat::col_slice(std::int64_t first, std::int64_t count) const {
  MB_CHECK(
      first >= 0 && count >= 0 && first + count <= cols,
      "column slice [" << first << ", " << first + count << ") of a " << cols << "-column matrix");
  return Mat{offset(data, first, dtype), rows, count, ld, dtype};
}

Mat Mat::reshaped(std::int64_t new_rows, std::int64_t new_cols) const {
  MB_CHECK(contiguous(), "reshape of a strided view");
  MB_CHECK(new_rows * new_cols == rows * cols,
           "reshape " << rows << "x" << cols << " to " << new_rows << "x" << new_cols);
  return Mat{data, new_rows, new_cols, new_cols, dtype};
}

}  // namespace moebench
