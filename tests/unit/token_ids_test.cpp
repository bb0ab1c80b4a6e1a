// The synthetic token ids: in the vocabulary, a pure function of (seed, sequence, position), and
// the rows' columns are the same sequence shifted (column j of position p is position p + j).
#include "workloads/step/token_ids.hpp"

#include <doctest/doctest.h>

#include <set>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

TEST_CASE("token ids: in range, deterministic, and spread over the vocabulary") {
  std::set<std::int32_t> seen;
  for (std::int64_t p = 0; p < 4000; ++p) {
    const std::int32_t id = token_id(5, 3, p, 100);
    CHECK(id >= 0);
    CHECK(id < 100);
    CHECK(id == token_id(5, 3, p, 100));
    seen.insert(id);
  }
  CHECK(seen.size() == 100);  // 4000 draws over 100 ids miss one with probability ~1e-15
  // Another sequence or seed is another stream.
  int same_seq = 0, same_seed = 0;
  for (std::int64_t p = 0; p < 1000; ++p) {
    same_seq += token_id(5, 3, p, 1 << 20) == token_id(5, 4, p, 1 << 20) ? 1 : 0;
    same_seed += token_id(5, 3, p, 1 << 20) == token_id(6, 3, p, 1 << 20) ? 1 : 0;
  }
  CHECK(same_seq < 3);
  CHECK(same_seed < 3);
  CHECK_THROWS_AS(token_id(5, 3, -1, 100), RuntimeError);
  CHECK_THROWS_AS(token_id(5, 3, 0, 0), RuntimeError);
}

TEST_CASE("token id rows: column j is the sequence shifted by j, past its end for the labels") {
  const std::int64_t seq = 6;
  const int cols = 3;
  const std::vector<std::int32_t> rows = token_id_rows(9, 10, 2, seq, cols, 50);
  REQUIRE(rows.size() == static_cast<std::size_t>(2 * seq * cols));
  for (std::int64_t s = 0; s < 2; ++s) {
    for (std::int64_t p = 0; p < seq; ++p) {
      for (int j = 0; j < cols; ++j) {
        CHECK(rows[static_cast<std::size_t>((s * seq + p) * cols + j)] ==
              token_id(9, static_cast<std::uint64_t>(10 + s), p + j, 50));
      }
    }
  }
}

}  // namespace
}  // namespace moebench
