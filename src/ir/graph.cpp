#include <npucache/error.h>
#include <npucache/ir/graph.h>

namespace npucache {

std::string type_str(const TensorType& t) { return std::string(dtype_name(t.dtype)) + shape_str(t.shape); }

std::string_view placeholder_kind_name(PlaceholderKind k) {
  switch (k) {
    case PlaceholderKind::none: return "none";
    case PlaceholderKind::input: return "input";
    case PlaceholderKind::parameter: return "parameter";
    case PlaceholderKind::buffer: return "buffer";
  }
  return "invalid";
}

std::string Graph::fresh_name(std::string_view base) {
  std::string b;
  for (char ch : base) b += (std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
  if (b.empty()) b = "v";
  int& n = name_counts_[b];
  std::string name;
  do {
    name = n == 0 ? b : b + "_" + std::to_string(n);
    ++n;
  } while (used_names_.count(name));
  used_names_.insert(name);
  return name;
}

ValueId Graph::add_placeholder(PlaceholderKind kind, const std::string& target, TensorType type) {
  if (kind == PlaceholderKind::none) throw VerifyError("placeholder needs a kind");
  Node n;
  n.op = Op::placeholder;
  n.kind = kind;
  n.target = target;
  n.type = std::move(type);
  n.name = fresh_name(target);
  nodes_.push_back(std::move(n));
  return static_cast<ValueId>(nodes_.size() - 1);
}

ValueId Graph::add_node(Op op, std::vector<ValueId> inputs, Attrs attrs, DimUnifier* unifier) {
  std::vector<const TensorType*> types;
  types.reserve(inputs.size());
  for (ValueId v : inputs) types.push_back(&node(v).type);
  DimUnifier strict;
  std::string name = fresh_name(op_name(op));
  TensorType t;
  try {
    t = infer_type(op, types, attrs, unifier ? *unifier : strict);
  } catch (const ShapeError& e) {
    throw ShapeError("node '" + name + "' (" + std::string(op_name(op)) + "): " + e.what());
  }
  return add_typed_node(op, std::move(inputs), std::move(attrs), std::move(t), std::move(name));
}

ValueId Graph::add_typed_node(Op op, std::vector<ValueId> inputs, Attrs attrs, TensorType type, std::string name) {
  for (ValueId v : inputs)
    if (v < 0 || static_cast<std::size_t>(v) >= nodes_.size())
      throw VerifyError("node input %" + std::to_string(v) + " of " + std::string(op_name(op)) +
                        " does not refer to an earlier node");
  Node n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.type = std::move(type);
  n.name = name.empty() ? fresh_name(op_name(op)) : std::move(name);
  used_names_.insert(n.name);
  nodes_.push_back(std::move(n));
  return static_cast<ValueId>(nodes_.size() - 1);
}

void Graph::set_outputs(std::vector<ValueId> outputs) {
  for (ValueId v : outputs) node(v);
  outputs_ = std::move(outputs);
}

const Node& Graph::node(ValueId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= nodes_.size())
    throw VerifyError("value %" + std::to_string(id) + " is not in the graph (" + std::to_string(nodes_.size()) +
                      " nodes)");
  return nodes_[static_cast<std::size_t>(id)];
}

std::vector<ValueId> Graph::placeholders(PlaceholderKind kind) const {
  std::vector<ValueId> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].op == Op::placeholder && nodes_[i].kind == kind) out.push_back(static_cast<ValueId>(i));
  return out;
}

void Graph::substitute_symbols(const std::map<std::string, SymExpr>& map) {
  if (map.empty()) return;
  auto sub_shape = [&](Shape& s) {
    for (auto& d : s) d = d.substitute(map);
  };
  for (auto& n : nodes_) {
    sub_shape(n.type.shape);
    Attrs attrs;
    for (const auto& [k, v] : n.attrs.items()) {
      if (const auto* dims = std::get_if<std::vector<SymExpr>>(&v)) {
        Shape s = *dims;
        sub_shape(s);
        attrs.set(k, s);
      } else {
        attrs.set(k, v);
      }
    }
    n.attrs = std::move(attrs);
  }
}

Graph Graph::from_parts(std::vector<Node> nodes, std::vector<ValueId> outputs) {
  Graph g;
  for (const Node& n : nodes) g.used_names_.insert(n.name);
  g.nodes_ = std::move(nodes);
  g.set_outputs(std::move(outputs));
  return g;
}

bool operator==(const Node& a, const Node& b) {
  return a.op == b.op && a.inputs == b.inputs && a.attrs == b.attrs && a.type == b.type && a.name == b.name &&
         a.kind == b.kind && a.target == b.target;
}

bool operator==(const Graph& a, const Graph& b) { return a.nodes_ == b.nodes_ && a.outputs_ == b.outputs_; }

const Node* first_rng_node(const Graph& g) {
  for (const Node& n : g.nodes())
    if (op_info(n.op).rng) return &n;
  return nullptr;
}

}  // namespace npucache
