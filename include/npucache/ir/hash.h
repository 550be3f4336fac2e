// The canonical graph hash.
//
// 128 bits (XXH3-128) over the graph's structure: ops, attributes, types,
// symbolic dims and topology, with values numbered canonically (placeholders
// in order, then nodes in a depth-first order from the outputs and the
// side-effecting nodes), each operand with the number of writes in place
// its storage had before the node reading it (a read before an update and
// one after it differ), then the side-effecting nodes in graph order (the
// order they run: two random draws, sends or receives swapped differ). Stable across processes and builds: no pointers,
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

// The symbols of `g` in the order the canonical hash numbers them: graphs
// with equal hashes name corresponding symbols at the same positions (a
// compile region's call binds its body's symbols in this order).
NPUCACHE_API std::vector<std::string> canonical_symbols(const Graph& g);

// Both in one pass over `g`: equal to {canonical_hash(g), canonical_symbols(g)}.
struct CanonicalNaming {
  Hash128 hash;
  std::vector<std::string> symbols;
};
NPUCACHE_API CanonicalNaming canonical_naming(const Graph& g);

// The canonical order the hash numbers values in: placeholders in order,
// then nodes depth-first (operands first) from the outputs, then from the
// side-effecting nodes. Nodes that reach neither are left out.
NPUCACHE_API std::vector<ValueId> canonical_order(const Graph& g);

// The parameters and buffers a graph reads, by name, in placeholder order.
//
// The rule for every key that selects a program to run: the canonical hash
// does not see which parameters a program binds (it is invariant to their
// names, so that pipeline stages and same-shaped layers share one stored
// object), so a key that picks a program to run with a module's weights
// pairs the hash with these names. Graph-break pieces put them in their key
// (the in-process map and the piece's cache entry); method entries record
// them (`parameters`) and a hit compares them with the trace's; a stored
// object is bound to an entry's names when it is loaded. Keys that select
// only bytes leave them out: an object's graph key, a capture template (it
// addresses parameters by slot, bound at replay) and a remote object.
inline std::vector<std::string> bound_names(const Graph& g) {
  std::vector<std::string> out;
  for (const Node& n : g.nodes())
    if (n.op == Op::placeholder && n.kind != PlaceholderKind::input) out.push_back(n.target);
  return out;
}

// The first difference between two graphs in canonical order, in words a
// user can act on ("node mul_3 (full): constant 1 stored, 3 now"), or ""
// when they are equal up to names.
NPUCACHE_API std::string first_difference(const Graph& stored, const Graph& now);

}  // namespace npucache
