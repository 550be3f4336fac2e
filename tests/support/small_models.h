// Values for the small models of the tests: weights and inputs that are
// deterministic, small and not all alike. No GoogleTest and no internal
// header here: worker programs linking only the public library (e.g.
// tests/cache/serve_worker.cpp) use it too; the comparison of two results
// is in support/expect_close.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace npucache::testing_support {

// n values scale * (i % period) + shift, i = 0 .. n-1.
inline std::vector<float> ramp(int64_t n, float scale, float shift, int period = 13) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = scale * static_cast<float>(i % period) + shift;
  return v;
}

}  // namespace npucache::testing_support
