// Counter-based pseudo-random numbers: a value is a pure function of (seed, stream, index), so
// weights and inputs can be regenerated anywhere (any rank, the --verify reference, a GPU
// kernel) without sharing state. splitmix64 finalisers, good enough for synthetic data.
#pragma once

#include <cstdint>

#include "harness/math/hd.hpp"

namespace moebench {

MB_HD std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

MB_HD std::uint64_t hash3(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return mix64(mix64(mix64(seed) ^ stream) ^ index);
}

// Uniform in [0, 1) with 24 random bits (exact in float).
MB_HD float uniform01(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return static_cast<float>(hash3(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

// Uniform in [-1, 1).
MB_HD float uniform_pm1(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return 2.0f * uniform01(seed, stream, index) - 1.0f;
}

// A stream id for a named tensor of a layer (and an expert, where it has one), so that the same
// tensor gets the same values whichever rank or process builds it.
MB_HD std::uint64_t tensor_stream(std::uint64_t layer, std::uint64_t tensor, std::uint64_t expert) {
  return mix64((layer << 40) ^ (tensor << 24) ^ expert);
}

}  // namespace moebench
