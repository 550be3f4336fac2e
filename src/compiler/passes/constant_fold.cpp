// fold_constants: elementwise ops over `full` constants become one `full`.
#include <npucache/error.h>

#include "compiler/passes.h"
#include "compiler/passes/rewriter.h"

#include <cmath>

namespace npucache::compiler {
namespace {

bool is_full(const Graph& g, ValueId v) { return g.node(v).op == Op::full; }
double full_value(const Graph& g, ValueId v) { return g.node(v).attrs.get<double>("value"); }

// The value of a foldable elementwise op on constant operands, computed in
// the op's dtype semantics (integers truncate, bool is 0/1).
std::optional<double> evaluate(Op op, const std::vector<double>& x, DType out) {
  auto b = [](bool v) { return v ? 1.0 : 0.0; };
  double r;
  switch (op) {
    case Op::add: r = x[0] + x[1]; break;
    case Op::sub: r = x[0] - x[1]; break;
    case Op::mul: r = x[0] * x[1]; break;
    case Op::div:
      if (is_integral(out)) {
        if (x[1] == 0) return std::nullopt;
        r = std::trunc(x[0] / x[1]);
      } else {
        r = x[0] / x[1];
      }
      break;
    case Op::maximum: r = std::max(x[0], x[1]); break;
    case Op::minimum: r = std::min(x[0], x[1]); break;
    case Op::pow: r = std::pow(x[0], x[1]); break;
    case Op::eq: r = b(x[0] == x[1]); break;
    case Op::ne: r = b(x[0] != x[1]); break;
    case Op::lt: r = b(x[0] < x[1]); break;
    case Op::le: r = b(x[0] <= x[1]); break;
    case Op::gt: r = b(x[0] > x[1]); break;
    case Op::ge: r = b(x[0] >= x[1]); break;
    case Op::where: r = x[0] != 0 ? x[1] : x[2]; break;
    case Op::neg: r = -x[0]; break;
    case Op::abs: r = std::fabs(x[0]); break;
    case Op::exp: r = std::exp(x[0]); break;
    case Op::log: r = std::log(x[0]); break;
    case Op::sqrt: r = std::sqrt(x[0]); break;
    case Op::rsqrt: r = 1.0 / std::sqrt(x[0]); break;
    case Op::sin: r = std::sin(x[0]); break;
    case Op::cos: r = std::cos(x[0]); break;
    case Op::reciprocal: r = 1.0 / x[0]; break;
    case Op::relu: r = x[0] > 0 ? x[0] : 0; break;
    case Op::sigmoid: r = 1.0 / (1.0 + std::exp(-x[0])); break;
    case Op::tanh: r = std::tanh(x[0]); break;
    case Op::cast: r = x[0]; break;
    default: return std::nullopt;
  }
  if (out == DType::boolean) return b(r != 0);
  if (is_integral(out)) return std::trunc(r);
  if (out != DType::f32 && out != DType::f16 && out != DType::bf16) return std::nullopt;
  return static_cast<double>(static_cast<float>(r));  // f32 arithmetic, as the kernels
}

bool is_layout(Op op) { return op == Op::reshape || op == Op::expand || op == Op::permute; }

}  // namespace

Graph fold_constants(const Graph& g) {
  Rewriter rw(g);
  Graph& out = rw.out();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    const auto id = static_cast<ValueId>(i);
    bool all_const = n.op != Op::placeholder && !n.inputs.empty() && !op_info(n.op).side_effect;
    std::vector<double> vals;
    for (ValueId in : n.inputs) {
      ValueId m = rw.map(in);
      all_const = all_const && is_full(out, m);
      if (all_const) vals.push_back(full_value(out, m));
    }
    std::optional<double> folded;
    if (all_const) folded = is_layout(n.op) ? std::optional<double>(vals[0]) : evaluate(n.op, vals, n.type.dtype);
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
