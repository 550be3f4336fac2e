// Largest absolute difference between two runs' per-step logits (over the
// steps both have).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace npucache::testing {

inline double max_abs_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (std::size_t s = 0; s < std::min(a.size(), b.size()); ++s)
    for (std::size_t v = 0; v < std::min(a[s].size(), b[s].size()); ++v)
      worst = std::max(worst, static_cast<double>(std::fabs(a[s][v] - b[s][v])));
  return worst;
}

}  // namespace npucache::testing
