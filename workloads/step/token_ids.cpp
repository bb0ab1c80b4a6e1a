#include "workloads/step/token_ids.hpp"

#include "harness/core/error.hpp"
#include "harness/math/random.hpp"

namespace moebench {

namespace {
// Apart from the weights' streams and the seeded inputs' (training_step.cpp).
std::uint64_t token_stream(std::uint64_t sequence) {
  return mix64((1ULL << 61) + sequence);
}
}  // namespace

std::int32_t token_id(std::uint64_t seed, std::uint64_t sequence, std::int64_t position,
                      std::int64_t vocab) {
  MB_CHECK(vocab > 0 && vocab <= (std::int64_t{1} << 31) - 1, "a vocabulary of " << vocab);
  MB_CHECK(position >= 0, "token position " << position);
  return static_cast<std::int32_t>(
      hash3(seed, token_stream(sequence), static_cast<std::uint64_t>(position)) %
      static_cast<std::uint64_t>(vocab));
}

std::vector<std::int32_t> token_id_rows(std::uint64_t seed, std::int64_t first_sequence,
                                        std::int64_t sequences, std::int64_t seq_len, int columns,
                                        std::int64_t vocab) {
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(sequences * seq_len * columns));
  for (std::int64_t s = 0; s < sequences; ++s) {
    const auto seq = static_cast<std::uint64_t>(first_sequence + s);
    for (std::int64_t p = 0; p < seq_len; ++p) {
      for (int j = 0; j < columns; ++j) out.push_back(token_id(seed, seq, p + j, vocab));
    }
  }
  return out;
}

}  // namespace moebench
