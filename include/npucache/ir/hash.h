// The canonical graph hash.
//
// 128 bits (XXH3-128) over the graph's structure: ops, attributes, types,
// symbolic dims and topology, with values numbered canonically (placeholders
// in order, then nodes in a depth-first order from the outputs and the
// side-effecting nodes). Stable across processes and builds: no pointers,
// no unordered iteration. Invariant to value, placeholder and symbol names,
// parameter names, weight values, device index and rank; sensitive to every
// change in computation.
#pragma once

#include <cstdint>
#include <string>

#include <npucache/ir/graph.h>

namespace npucache {

struct Hash128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
  std::string hex() const;  // 32 lowercase hex digits
  friend bool operator==(const Hash128&, const Hash128&) = default;
  friend auto operator<=>(const Hash128&, const Hash128&) = default;
};

Hash128 canonical_hash(const Graph& g);

}  // namespace npucache
