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

#include <npucache/export.h>

#include <cstdint>
#include <string>
#include <vector>

#include <npucache/ir/graph.h>

namespace npucache {

struct NPUCACHE_API Hash128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
  std::string hex() const;  // 32 lowercase hex digits
  friend bool operator==(const Hash128&, const Hash128&) = default;
  friend auto operator<=>(const Hash128&, const Hash128&) = default;
};

NPUCACHE_API Hash128 canonical_hash(const Graph& g);

// The canonical order the hash numbers values in: placeholders in order,
// then nodes depth-first (operands first) from the outputs, then from the
// side-effecting nodes. Nodes that reach neither are left out.
NPUCACHE_API std::vector<ValueId> canonical_order(const Graph& g);

// The first difference between two graphs in canonical order, in words a
// user can act on ("node mul_3 (full): constant 1 stored, 3 now"), or ""
// when they are equal up to names.
NPUCACHE_API std::string first_difference(const Graph& stored, const Graph& now);

}  // namespace npucache
