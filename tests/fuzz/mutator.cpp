#include "fuzz/mutator.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace npucache::fuzz {

void Mutator::once(std::string& s, std::string_view other) {
  static const uint64_t kInteresting[] = {0,
                                          1,
                                          0x7f,
                                          0x80,
                                          0xff,
                                          0x7fff,
                                          0xffff,
                                          0x7fffffff,
                                          0xffffffff,
                                          0x100000000ull,
                                          0x7fffffffffffffffull,
                                          0xffffffffffffffffull,
                                          4096,
                                          65536};
  const uint64_t kind = below(9);
  if (s.empty() && kind != 6) {
    s.push_back(static_cast<char>(below(256)));
    return;
  }
  const std::size_t at = below(s.size());
  switch (kind) {
    case 0:  // flip a bit
      s[at] = static_cast<char>(s[at] ^ (1 << below(8)));
      break;
    case 1:  // a random byte
      s[at] = static_cast<char>(below(256));
      break;
    case 2: {  // an interesting 8/32/64-bit value
      const uint64_t v = kInteresting[below(std::size(kInteresting))];
      const std::size_t w = std::size_t{1} << below(4);  // 1, 2, 4, 8 bytes
      if (at + w <= s.size()) std::memcpy(s.data() + at, &v, w);
      break;
    }
    case 3:  // small arithmetic on a 32-bit value (lengths, counts)
      if (at + 4 <= s.size()) {
        uint32_t v;
        std::memcpy(&v, s.data() + at, 4);
        v += static_cast<uint32_t>(below(33)) - 16u;
        std::memcpy(s.data() + at, &v, 4);
      }
      break;
    case 4:  // truncate
      s.resize(at);
      break;
    case 5:  // erase a range
      s.erase(at, 1 + below(std::min<std::size_t>(64, s.size() - at)));
      break;
    case 6: {  // insert random bytes
      std::string ins(1 + below(16), '\0');
      for (auto& c : ins) c = static_cast<char>(below(256));
      s.insert(std::min(at, s.size()), ins);
      break;
    }
    case 7: {  // duplicate a range
      const std::size_t len = 1 + below(std::min<std::size_t>(64, s.size() - at));
      s.insert(below(s.size() + 1), s.substr(at, len));
      break;
    }
    default:  // splice from another seed
      if (!other.empty()) {
        const std::size_t from = below(other.size());
        const std::size_t len = 1 + below(std::min<std::size_t>(256, other.size() - from));
        s.replace(at, std::min(len, s.size() - at), other.substr(from, len));
      }
      break;
  }
}

}  // namespace npucache::fuzz
