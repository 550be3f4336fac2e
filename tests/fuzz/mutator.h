// The fuzzer's mutations (tests/fuzz/fuzz_decoders.cpp): stacked byte
// mutations of an input, deterministic for a seed, so a run's finding is
// found again by its seed.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace npucache::fuzz {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  // 1-4 stacked mutations of `in` (its first byte, the target, is kept);
  // `other` is spliced from.
  std::string mutate(const std::string& in, const std::string& other) {
    std::string s = in.substr(1);
    const int n = 1 + static_cast<int>(below(4));
    for (int i = 0; i < n; ++i) once(s, other.size() > 1 ? std::string_view(other).substr(1) : std::string_view());
    return in.substr(0, 1) + s;
  }

 private:
  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  // One mutation of `s`: a flipped bit, a random or interesting value,
  // small arithmetic on a length, a truncation, an erased, inserted or
  // duplicated range, or a splice from `other`.
  void once(std::string& s, std::string_view other);

  std::mt19937_64 rng_;
};

}  // namespace npucache::fuzz
