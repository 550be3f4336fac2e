// fold_constants: foldable ops (OpInfo::foldable) over `full` constants
// become one `full`.
#include <npucache/error.h>

#include "compiler/passes.h"
#include "compiler/passes/rewriter.h"
#include "ir/storage_writes.h"
#include "runtime/unary_math.h"

#include <cmath>

namespace npucache::compiler {
namespace {

bool is_full(const Graph& g, ValueId v) { return g.node(v).op == Op::full; }
double full_value(const Graph& g, ValueId v) { return g.node(v).attrs.get<double>("value"); }

// The value of a binary op, a comparison or where on constant operands, or
// nullopt where it is undefined (an integer division by zero).
std::optional<double> evaluate_binary(Op op, const std::vector<double>& x, bool integral) {
  auto b = [](bool v) { return v ? 1.0 : 0.0; };
  switch (op) {
    case Op::add: return x[0] + x[1];
    case Op::sub: return x[0] - x[1];
    case Op::mul: return x[0] * x[1];
    case Op::div:
      if (!integral) return x[0] / x[1];
      if (x[1] == 0) return std::nullopt;
      return std::trunc(x[0] / x[1]);
    case Op::maximum: return std::max(x[0], x[1]);
    case Op::minimum: return std::min(x[0], x[1]);
    case Op::pow: return std::pow(x[0], x[1]);
    case Op::eq: return b(x[0] == x[1]);
    case Op::ne: return b(x[0] != x[1]);
    case Op::lt: return b(x[0] < x[1]);
    case Op::le: return b(x[0] <= x[1]);
    case Op::gt: return b(x[0] > x[1]);
    case Op::ge: return b(x[0] >= x[1]);
    case Op::where: return x[0] != 0 ? x[1] : x[2];
    default: throw Error("constant folding: op " + std::string(op_name(op)) + " is foldable but has no evaluation");
  }
}

// The value of a foldable op (OpInfo::foldable) on constant operands,
// computed in the op's dtype semantics (integers truncate, bool is 0/1):
// unary ops through the runtime's scalar math (runtime/unary_math.h), in
// f32 as the kernels, or exactly on integers; views keep their operand's
// value.
std::optional<double> evaluate(Op op, const std::vector<double>& x, DType out) {
  const OpInfo& info = op_info(op);
  if (!info.foldable) return std::nullopt;
  std::optional<double> r;
  switch (info.cls) {
    case OpClass::layout: return x[0];
    case OpClass::cast: r = x[0]; break;
    case OpClass::unary: {
      const runtime::UnaryMath* m = runtime::unary_math(op);
      if (!m) throw Error("constant folding: op " + std::string(op_name(op)) + " has no scalar function");
      if (is_integral(out)) {
        if (!m->exact) return std::nullopt;
        r = m->exact(x[0]);
      } else {
        r = m->f32(static_cast<float>(x[0]));
      }
      break;
    }
    default: r = evaluate_binary(op, x, is_integral(out));
  }
  if (!r) return std::nullopt;
  if (out == DType::boolean) return *r != 0 ? 1.0 : 0.0;
  if (is_integral(out)) return std::trunc(*r);
  if (out != DType::f32 && out != DType::f16 && out != DType::bf16) return std::nullopt;
  return static_cast<double>(static_cast<float>(*r));  // f32 arithmetic, as the kernels
}

}  // namespace

Graph fold_constants(const Graph& g) {
  Rewriter rw(g);
  Graph& out = rw.out();
  // A storage written in place is no constant, and a node whose storage
  // is written (a view of one) no value (ir/storage_writes.h).
  const StorageWrites writes(g);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    const auto id = static_cast<ValueId>(i);
    bool all_const = n.op != Op::placeholder && !n.inputs.empty() && !op_info(n.op).side_effect && !writes.written(id);
    std::vector<double> vals;
    for (ValueId in : n.inputs) {
      ValueId m = rw.map(in);
      all_const = all_const && !writes.written(in) && is_full(out, m);
      if (all_const) vals.push_back(full_value(out, m));
    }
    std::optional<double> folded;
    if (all_const) folded = evaluate(n.op, vals, n.type.dtype);
    if (folded) {
      rw.set(id,
             out.add_typed_node(Op::full, {},
                                Attrs{{"shape", n.type.shape}, {"value", *folded}, {"dtype", n.type.dtype}}, n.type));
    } else {
      rw.copy(id);
    }
  }
  return rw.finish();
}

}  // namespace npucache::compiler
