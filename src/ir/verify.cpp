// The graph verifier: re-infers every node's type and compares.
#include <npucache/error.h>
#include <npucache/ir/graph.h>

#include <set>

namespace npucache {

void verify(const Graph& g) {
  std::set<std::string> names;
  DimUnifier strict;
  const auto& nodes = g.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    std::string where = "node '" + n.name + "' (" + std::string(op_name(n.op)) + ")";
    if (!names.insert(n.name).second) throw VerifyError(where + ": value name is not unique");
    if (n.op == Op::placeholder) {
      if (n.kind == PlaceholderKind::none || !n.inputs.empty())
        throw VerifyError(where + ": placeholder without kind or with inputs");
      continue;
    }
    std::vector<const TensorType*> types;
    for (ValueId v : n.inputs) {
      if (v < 0 || static_cast<std::size_t>(v) >= i)
        throw VerifyError(where + ": input %" + std::to_string(v) + " is not defined before the node");
      types.push_back(&nodes[static_cast<std::size_t>(v)].type);
    }
    TensorType inferred;
    try {
      inferred = infer_type(n.op, types, n.attrs, strict);
    } catch (const ShapeError& e) {
      throw VerifyError(where + ": " + e.what());
    }
    if (!(inferred == n.type))
      throw VerifyError(where + ": recorded type " + type_str(n.type) + " differs from inferred type " +
                        type_str(inferred));
  }
  if (g.outputs().empty()) throw VerifyError("graph has no outputs");
  for (ValueId v : g.outputs())
    if (v < 0 || static_cast<std::size_t>(v) >= nodes.size())
      throw VerifyError("graph output %" + std::to_string(v) + " is not a node");
}

}  // namespace npucache
