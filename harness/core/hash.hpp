// Hashing the keys of the backends' caches (GEMM plans, kept FP8 weight copies): one mixing step,
// boost's hash_combine, so every key hashes its fields the same way.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moebench {

// Mixes v into h; the order of the values matters, as it should for a key's fields.
inline void hash_mix(std::size_t& h, std::uint64_t v) {
  h ^= static_cast<std::size_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

}  // namespace moebench
