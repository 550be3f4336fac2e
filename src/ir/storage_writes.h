// Writes in place in a graph, for the passes that merge, fold or move
// nodes. The graph is functional except for them: a buffer_update writes
// its first operand's storage, and a region call the storages of the
// operands its body updates ("mutates"). Lowering makes a reshape, a
// buffer_update and a send views of their first operand, so a write
// changes the contents every value of that storage reads, and lowering
// orders each read after the writes before it in graph order. A pass
// keeps that meaning when it never:
// - merges a read before a write with an equal one after it (cse),
// - moves a read across a write of what it reads (fusion,
//   fold_transposes),
// - takes a written storage for a constant, or a node whose storage is
//   written for a value (constant_fold, fusion, cse).
#pragma once

#include <npucache/ir/graph.h>

#include <algorithm>
#include <variant>
#include <vector>

namespace npucache {

class StorageWrites {
 public:
  explicit StorageWrites(const Graph& g) : storage_(g.size()), writers_(g.size()) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      const Node& n = g.nodes()[i];
      const bool view = n.op == Op::reshape || n.op == Op::buffer_update || n.op == Op::send;
      storage_[i] = view && !n.inputs.empty() ? storage_[static_cast<std::size_t>(n.inputs[0])] : i;
      if (n.op == Op::buffer_update && !n.inputs.empty()) write(i, n.inputs[0]);
      if (n.op != Op::region_call) continue;
      const AttrValue* m = n.attrs.find("mutates");
      const auto* operands = m ? std::get_if<std::vector<int64_t>>(m) : nullptr;
      if (operands)
        for (int64_t k : *operands)
          if (k >= 0 && static_cast<std::size_t>(k) < n.inputs.size()) write(i, n.inputs[static_cast<std::size_t>(k)]);
    }
  }

  // The value whose storage `v` is (itself unless a view).
  std::size_t storage(ValueId v) const { return storage_.at(static_cast<std::size_t>(v)); }
  // Whether any node writes `v`'s storage in place.
  bool written(ValueId v) const { return !writers_[storage(v)].empty(); }
  // The writes of `v`'s storage by nodes before node `at`: two reads of
  // `v` at nodes with equal counts see the same contents.
  std::size_t writes_before(std::size_t at, ValueId v) const {
    const std::vector<std::size_t>& w = writers_[storage(v)];
    return static_cast<std::size_t>(std::lower_bound(w.begin(), w.end(), at) - w.begin());
  }

 private:
  void write(std::size_t node, ValueId target) {
    std::vector<std::size_t>& w = writers_[storage(target)];
    if (w.empty() || w.back() != node) w.push_back(node);
  }

  std::vector<std::size_t> storage_;
  std::vector<std::vector<std::size_t>> writers_;  // by storage: the nodes writing it, ascending
};

}  // namespace npucache
