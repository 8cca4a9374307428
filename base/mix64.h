// SplitMix64's output function (Steele, Lea and Flood 2014): a bijective
// 64-bit mix, the one hash the runtime derives counter-based randomness
// from (parameter initialisation, synthetic data, dropout masks), so every
// value is a pure function of its key. Pure; thread-safe.
#pragma once

#include <cstdint>

namespace dt {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace dt
