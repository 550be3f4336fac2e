#include "coord/hash.h"

namespace npucache::coord {

std::uint64_t stable_hash(std::string_view bytes) {
  std::uint64_t h = 1469598103934665603ull;  // the project's offset basis (hash.h)
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;  // the FNV 64-bit prime
  }
  return h;
}

}  // namespace npucache::coord
