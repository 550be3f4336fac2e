// eliminate_common_subexpressions: one node per (op, operands, attributes)
// and per contents of the operands' storage. A write in place (a
// buffer_update of a buffer, a region call updating operands its body
// updates) gives the storage it writes, and every view of it, other
// contents: a read after it is not the same read as one before it (the
// sum of a cache before an update and after it are two sums), so each
// operand is keyed with the writes its storage had so far, in graph order
// (the order lowering keeps for writes and reads of one storage).
#include "compiler/passes.h"
#include "compiler/passes/rewriter.h"

#include <map>

namespace npucache::compiler {

Graph eliminate_common_subexpressions(const Graph& g) {
  Rewriter rw(g);
  std::map<std::string, ValueId> seen;
  // The storage each value is (through the views lowering makes: a
  // reshape, a buffer_update, a send) and the writes in place of each.
  std::vector<std::size_t> storage(g.size());
  std::vector<int> writes(g.size(), 0);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    const bool view = n.op == Op::reshape || n.op == Op::buffer_update || n.op == Op::send;
    storage[i] = view && !n.inputs.empty() ? storage[static_cast<std::size_t>(n.inputs[0])] : i;
  }
  auto written = [&](const Node& n) {
    if (n.op == Op::buffer_update && !n.inputs.empty()) ++writes[storage[static_cast<std::size_t>(n.inputs[0])]];
    if (n.op == Op::region_call)
      if (const AttrValue* m = n.attrs.find("mutates"))
        if (const auto* operands = std::get_if<std::vector<int64_t>>(m))
          for (int64_t k : *operands)
            if (k >= 0 && static_cast<std::size_t>(k) < n.inputs.size())
              ++writes[storage[static_cast<std::size_t>(n.inputs[static_cast<std::size_t>(k)])]];
  };
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    const auto id = static_cast<ValueId>(i);
    if (n.op == Op::placeholder || op_info(n.op).side_effect) {
      rw.copy(id);
      written(n);
      continue;
    }
    std::string key = std::string(op_name(n.op)) + "(";
    for (ValueId in : n.inputs)
      key += std::to_string(rw.map(in)) + "@" + std::to_string(writes[storage[static_cast<std::size_t>(in)]]) + ",";
    for (const auto& [k, v] : n.attrs.items()) key += k + "=" + attr_str(v) + ",";
    key += ")" + type_str(n.type);
    auto it = seen.find(key);
    if (it != seen.end())
      rw.set(id, it->second);
    else
      seen.emplace(std::move(key), rw.copy(id));
    written(n);
  }
  return rw.finish();
}

}  // namespace npucache::compiler
