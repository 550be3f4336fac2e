// The compile-region tests' count of what this process did with regions.
//
// RegionCounts::take(): the region hits and the region compiles of this
// process (storage::process_counters) since the last take(), or since the
// counter was made.
#pragma once

#include "storage/stats.h"

#include <cstdint>
#include <utility>

namespace npucache::testing_support {

class RegionCounts {
 public:
  RegionCounts() { (void)take(); }
  // {hits, compiles} since the last take().
  std::pair<uint64_t, uint64_t> take() {
    const storage::CacheStats c = storage::process_counters();
    const std::pair<uint64_t, uint64_t> now{c.region_hits - hits_, c.region_compiles - compiles_};
    hits_ = c.region_hits;
    compiles_ = c.region_compiles;
    return now;
  }

 private:
  uint64_t hits_ = 0, compiles_ = 0;
};

}  // namespace npucache::testing_support
