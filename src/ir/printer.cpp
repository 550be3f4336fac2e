// FX-like readable text of a graph.
//
//   graph(%x_data: f32[s0, 2] input 'x.data', %linear2_weight: f32[1, 2] parameter 'linear2.weight'):
//     %linear = linear(%x_data, %linear2_weight, %linear2_bias) : f32[s0, 1]
//     return (%add)
#include <npucache/ir/graph.h>

namespace npucache {

std::string print_graph(const Graph& g) {
  std::string s = "graph(";
  bool first = true;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::placeholder) continue;
    s += (first ? "\n    %" : ",\n    %") + n.name + ": " + type_str(n.type) + " " +
         std::string(placeholder_kind_name(n.kind)) + " '" + n.target + "'";
    first = false;
  }
  s += "):\n";
  for (const Node& n : g.nodes()) {
    if (n.op == Op::placeholder) continue;
    s += "  %" + n.name + " = " + std::string(op_name(n.op)) + "(";
    bool sep = false;
    for (ValueId v : n.inputs) {
      s += (sep ? ", %" : "%") + g.node(v).name;
      sep = true;
    }
    for (const auto& [k, v] : n.attrs.items()) {
      s += (sep ? ", " : "") + k + "=" + attr_str(v);
      sep = true;
    }
    s += ") : " + type_str(n.type) + "\n";
  }
  s += "  return (";
  for (std::size_t i = 0; i < g.outputs().size(); ++i) s += (i ? ", %" : "%") + g.node(g.outputs()[i]).name;
  return s + ")\n";
}

}  // namespace npucache
