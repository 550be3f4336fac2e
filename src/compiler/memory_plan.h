// Memory planning: places the program's arena buffers at offsets in one
// arena, reusing memory between buffers whose lifetimes are ordered.
//
// Buffer B2 may take B1's memory when every step touching B1 happens before
// B2's first write. "Happens before" is the transitive closure of step
// dependencies and stream order (cross-stream dependencies become events),
// so the plan is safe on any number of streams. Placement is greedy by size
// (largest first, lowest fitting offset), computed per concrete binding of
// the program's symbolic sizes.
#pragma once

#include "compiler/program.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace npucache::compiler {

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per buffer; -1 when not in the arena
  std::size_t arena_bytes = 0;   // planned peak
  std::size_t sum_bytes = 0;     // all arena buffers laid out separately
};

// Per-step ancestor sets; computed once per program.
class HappensBefore {
 public:
  explicit HappensBefore(const DeviceProgram& p);
  bool before(int a, int b) const;  // step a happens before step b

 private:
  std::size_t words_;
  std::vector<uint64_t> bits_;
};

// `bytes` holds each buffer's size in bytes under the current binding.
MemoryPlan plan_memory(const DeviceProgram& p, const HappensBefore& hb, const std::vector<std::size_t>& bytes);

}  // namespace npucache::compiler
