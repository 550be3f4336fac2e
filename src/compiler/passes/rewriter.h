// Rebuilding a graph node by node with a value map (old id -> new id).
#pragma once

#include <npucache/ir/graph.h>

#include <vector>

namespace npucache::compiler {

class Rewriter {
 public:
  explicit Rewriter(const Graph& src) : src_(src), map_(src.size(), -1) {}

  // Copies node `old` (placeholder or op) with its inputs mapped.
  ValueId copy(ValueId old) {
    const Node& n = src_.node(old);
    ValueId v;
    if (n.op == Op::placeholder) {
      v = out_.add_placeholder(n.kind, n.target, n.type);
    } else {
      std::vector<ValueId> in;
      in.reserve(n.inputs.size());
      for (ValueId i : n.inputs) in.push_back(map(i));
      v = out_.add_typed_node(n.op, std::move(in), n.attrs, n.type);
    }
    set(old, v);
    return v;
  }
  ValueId map(ValueId old) const { return map_.at(static_cast<std::size_t>(old)); }
  void set(ValueId old, ValueId now) { map_.at(static_cast<std::size_t>(old)) = now; }
  Graph& out() { return out_; }
  Graph finish() {
    std::vector<ValueId> outs;
    for (ValueId o : src_.outputs()) outs.push_back(map(o));
    out_.set_outputs(outs);
    return std::move(out_);
  }

 private:
  const Graph& src_;
  Graph out_;
  std::vector<ValueId> map_;
};

}  // namespace npucache::compiler
