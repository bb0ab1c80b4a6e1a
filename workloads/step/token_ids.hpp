// The synthetic token ids of --head on: a pure function of (seed, sequence, position), so every
// stage that needs them (the first embeds them, the last predicts them) and the --verify
// reference compute the same ids without sending them.
#pragma once

#include <cstdint>
#include <vector>

namespace moebench {

// The id of the token at `position` of global sequence `sequence`, uniform in [0, vocab). Any
// position: the labels of a sequence's last tokens run past its end, as the extra token of
// Megatron's samples (seq_len + 1 tokens) does.
std::int32_t token_id(std::uint64_t seed, std::uint64_t sequence, std::int64_t position,
                      std::int64_t vocab);

// Rows of `sequences` sequences from `first_sequence` on, seq_len tokens each, with columns
// columns: column j of the row of position p is the id of position p + j (the input, then the
// label of each head; workloads/layers/model_ends.hpp). Row-major.
std::vector<std::int32_t> token_id_rows(std::uint64_t seed, std::int64_t first_sequence,
                                        std::int64_t sequences, std::int64_t seq_len, int columns,
                                        std::int64_t vocab);

}  // namespace moebench
