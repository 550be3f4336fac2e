// Counter-based random numbers: element i of a launch draws from
// splitmix64(seed, offset + i), so results depend only on the stream's seed
// and the launch's position in its sequence, never on thread timing.
#include "runtime/kernels/kernel_util.h"

#include <npucache/runtime/random.h>

#include <cmath>

namespace npucache::runtime::kernels {
namespace {

double uniform(uint64_t seed, uint64_t counter, uint64_t lane) {
  uint64_t h = splitmix64(seed ^ splitmix64(counter * 2 + lane));
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);  // (0, 1)
}

}  // namespace

void rng_kernel(const KernelLaunch& l) {
  const TensorArg& out = l.args.back();
  const int64_t n = out.numel();
  FloatOut o(out);
  if (l.op == Op::randn) {
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t c = l.rng_offset + static_cast<uint64_t>(i);
      double u1 = uniform(l.rng_seed, c, 0), u2 = uniform(l.rng_seed, c, 1);
      o.data()[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  } else {  // bernoulli(p)
    FloatIn p(l.args[0]);
    for (int64_t i = 0; i < n; ++i)
      o.data()[i] = uniform(l.rng_seed, l.rng_offset + static_cast<uint64_t>(i), 0) < p.data()[i] ? 1.0f : 0.0f;
  }
  o.commit();
}

}  // namespace npucache::runtime::kernels
