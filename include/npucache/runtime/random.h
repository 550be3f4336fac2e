// splitmix64: the counter-based hash behind npucache's deterministic
// random numbers (RNG kernels, model weights): value i of a sequence depends
// only on the seed and i, never on thread timing.
#pragma once

#include <cstdint>

namespace npucache {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace npucache
