#include "models/weights.h"

#include <npucache/error.h>

#include <npucache/runtime/random.h>

namespace npucache::models {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t stream_base(uint64_t seed, const std::string& name) { return splitmix64(seed ^ fnv1a(name)); }

// Element `i` of the parameter whose stream starts at `base`.
float weight_at(uint64_t base, int64_t i, double scale) {
  const double u = static_cast<double>(splitmix64(base + static_cast<uint64_t>(i)) >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>((2.0 * u - 1.0) * scale);
}

}  // namespace

std::vector<float> full_weights(uint64_t seed, const std::string& name, int64_t count, double scale) {
  std::vector<float> w(static_cast<std::size_t>(count));
  const uint64_t base = stream_base(seed, name);
  for (int64_t i = 0; i < count; ++i) w[static_cast<std::size_t>(i)] = weight_at(base, i, scale);
  return w;
}

void fill_shard(Tensor& t, uint64_t seed, const std::string& name, int64_t rows, int64_t cols, int axis, int rank,
                int parts, double scale) {
  const int64_t lr = axis == 0 ? rows / parts : rows;
  const int64_t lc = axis == 1 ? cols / parts : cols;
  const uint64_t base = stream_base(seed, name);
  std::vector<float> shard(static_cast<std::size_t>(lr * lc));
  for (int64_t r = 0; r < lr; ++r) {
    const int64_t fr = axis == 0 ? rank * lr + r : r;
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t fc = axis == 1 ? rank * lc + c : c;
      shard[static_cast<std::size_t>(r * lc + c)] = weight_at(base, fr * cols + fc, scale);
    }
  }
  t.copy_from(shard);
}

}  // namespace npucache::models
