// eliminate_common_subexpressions: one node per (op, operands, attributes)
// and per contents of the operands' storage (ir/storage_writes.h). A
// read is keyed with the writes in place its operands' storages had so
// far, in graph order: the sum of a cache before an update and after it
// are two sums. A node whose own storage is written in place is a buffer
// of its own, never merged with another or another with it: two equal
// zero-filled caches, each updated, stay two caches.
#include "compiler/passes.h"
#include "compiler/passes/rewriter.h"
#include "ir/storage_writes.h"

#include <map>

namespace npucache::compiler {

Graph eliminate_common_subexpressions(const Graph& g) {
  Rewriter rw(g);
  const StorageWrites writes(g);
  std::map<std::string, ValueId> seen;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    const auto id = static_cast<ValueId>(i);
    if (n.op == Op::placeholder || op_info(n.op).side_effect || writes.written(id)) {
      rw.copy(id);
      continue;
    }
    std::string key = std::string(op_name(n.op)) + "(";
    for (ValueId in : n.inputs)
      key += std::to_string(rw.map(in)) + "@" + std::to_string(writes.writes_before(i, in)) + ",";
    for (const auto& [k, v] : n.attrs.items()) key += k + "=" + attr_str(v) + ",";
    key += ")" + type_str(n.type);
    auto it = seen.find(key);
    if (it != seen.end())
      rw.set(id, it->second);
    else
      seen.emplace(std::move(key), rw.copy(id));
  }
  return rw.finish();
}

}  // namespace npucache::compiler
