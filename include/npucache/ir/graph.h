// The SSA graph: placeholders, nodes, outputs.
//
// Every node produces exactly one value, identified by its index (ValueId)
// in the graph's node list; inputs always refer to earlier nodes, so the node
// list is a topological order. Placeholders are nodes too: user inputs (in
// argument order), parameters and buffers (bound by qualified name, e.g.
// "layers.0.attn.q_proj.weight"). A buffer_update node writes its values into
// its first input's storage in place and yields that buffer.
//
// Graphs carry no device, rank or weight value: the same method traced on
// two tensor-parallel ranks yields equal graphs (see hash.h).
#pragma once

#include <npucache/export.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <npucache/ir/attrs.h>
#include <npucache/ir/dtype.h>
#include <npucache/ir/op.h>
#include <npucache/ir/symbolic.h>

namespace npucache {

using ValueId = int32_t;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};
// "f32[2, s0]".
NPUCACHE_API std::string type_str(const TensorType& t);

enum class PlaceholderKind : uint8_t { none, input, parameter, buffer };
NPUCACHE_API std::string_view placeholder_kind_name(PlaceholderKind k);

struct Node {
  Op op = Op::placeholder;
  std::vector<ValueId> inputs;
  Attrs attrs;
  TensorType type;
  std::string name;  // value name, unique in the graph
  PlaceholderKind kind = PlaceholderKind::none;
  std::string target;  // parameter/buffer name, input path
};

// Decides whether two dims are equal, whether a dim is a known constant,
// and whether one dim is at most another. The default accepts only
// structurally equal expressions and literal constants, and checks an
// inequality only between constants (a symbolic one is checked when a call
// binds the sizes); the tracer's unifier may also equate symbols or
// specialise them to constants, and records every inequality that its
// concrete values satisfy as a guard (a slice's end within its dim), each
// when their concrete values agree.
class NPUCACHE_API DimUnifier {
 public:
  virtual ~DimUnifier() = default;
  virtual bool unify(const SymExpr& a, const SymExpr& b) { return a == b; }
  virtual std::optional<int64_t> specialize(const SymExpr& e) { return e.try_constant(); }
  // Whether a <= b holds (false only when it is known not to).
  virtual bool require_le(const SymExpr& a, const SymExpr& b) {
    auto x = a.try_constant(), y = b.try_constant();
    return !x || !y || *x <= *y;
  }
};

class NPUCACHE_API Graph {
 public:
  ValueId add_placeholder(PlaceholderKind kind, const std::string& target, TensorType type);
  // Infers the output type; throws ShapeError naming the node, the op and the
  // offending operand types.
  ValueId add_node(Op op, std::vector<ValueId> inputs, Attrs attrs = {}, DimUnifier* unifier = nullptr);
  // Adds a node with a known type (deserialization, passes); verify() checks it.
  ValueId add_typed_node(Op op, std::vector<ValueId> inputs, Attrs attrs, TensorType type, std::string name = {});
  void set_outputs(std::vector<ValueId> outputs);

  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const Node& node(ValueId id) const;
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId> placeholders(PlaceholderKind kind) const;
  std::size_t size() const { return nodes_.size(); }
  // Replaces every symbol in every type and SymExpr attribute.
  void substitute_symbols(const std::map<std::string, SymExpr>& map);

  // Rebuilds a graph from its parts (deserialization); verify() checks it.
  static Graph from_parts(std::vector<Node> nodes, std::vector<ValueId> outputs);

  friend NPUCACHE_API bool operator==(const Graph& a, const Graph& b);

 private:
  NPUCACHE_LOCAL std::string fresh_name(std::string_view base);
  std::vector<Node> nodes_;
  std::vector<ValueId> outputs_;
  std::map<std::string, int> name_counts_;
  std::set<std::string> used_names_;
};

NPUCACHE_API bool operator==(const Node& a, const Node& b);

// Output type of `op` applied to operands of types `inputs`; throws
// ShapeError describing the mismatch (without the node name).
NPUCACHE_API TensorType infer_type(Op op, const std::vector<const TensorType*>& inputs, const Attrs& attrs,
                                   DimUnifier& unifier);

// Type-checks every node: inputs defined earlier, arity, and the recorded
// type equal to the inferred one. Throws VerifyError naming the node, the op
// and the offending shapes/dtypes.
NPUCACHE_API void verify(const Graph& g);

// FX-like readable text, one line per node with its type.
NPUCACHE_API std::string print_graph(const Graph& g);

// The first node drawing random numbers (randn, bernoulli, dropout), or
// null. Cached and captured graphs refuse them: a replay would repeat the
// same numbers.
NPUCACHE_API const Node* first_rng_node(const Graph& g);

}  // namespace npucache
