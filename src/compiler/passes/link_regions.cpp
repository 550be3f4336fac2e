// link_regions: compiled region bodies stamped in at their calls.
#include <npucache/error.h>

#include "compiler/passes.h"
#include "compiler/passes/rewriter.h"

#include <npucache/ir/hash.h>

#include <algorithm>

namespace npucache::compiler {
namespace {

[[noreturn]] void misfit(const Node& call, const std::string& what) {
  throw VerifyError("node '" + call.name + "' (region_call of " + call.attrs.get<std::string>("region") + "): " + what);
}

// The operands the body updates in place: buffer_update chains rooted at
// its placeholders, numbered as the call's operands.
std::vector<int64_t> updated_operands(const Graph& body) {
  int64_t inputs = 0;
  for (const Node& n : body.nodes())
    if (n.op == Op::placeholder && n.kind == PlaceholderKind::input) ++inputs;
  std::vector<int64_t> number(body.size(), -1);
  int64_t in = 0, param = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const Node& n = body.nodes()[i];
    if (n.op == Op::placeholder) number[i] = n.kind == PlaceholderKind::input ? in++ : inputs + param++;
  }
  std::vector<int64_t> out;
  for (const Node& n : body.nodes()) {
    if (n.op != Op::buffer_update) continue;
    ValueId v = n.inputs[0];
    while (body.node(v).op == Op::reshape || body.node(v).op == Op::buffer_update) v = body.node(v).inputs[0];
    if (body.node(v).op == Op::placeholder) out.push_back(number[static_cast<std::size_t>(v)]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

Graph link_regions(const Graph& g, const std::map<std::string, Graph>& bodies, LinkStats* stats,
                   const std::map<std::string, std::vector<std::string>>* symbols) {
  Rewriter rw(g);
  struct Facts {
    std::vector<int64_t> updated;
    std::vector<std::string> symbols;
  };
  std::map<std::string, Facts> checked;  // per region
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto id = static_cast<ValueId>(i);
    const Node& call = g.nodes()[i];
    if (call.op != Op::region_call) {
      rw.copy(id);
      continue;
    }
    const std::string& region = call.attrs.get<std::string>("region");
    const auto it = bodies.find(region);
    if (it == bodies.end()) misfit(call, "the region's body is missing");
    const Graph& body = it->second;
    auto c = checked.find(region);
    if (c == checked.end()) {
      Facts f{updated_operands(body), {}};
      if (symbols == nullptr) {
        f.symbols = canonical_symbols(body);
      } else if (const auto s = symbols->find(region); s != symbols->end()) {
        f.symbols = s->second;
      } else {
        misfit(call, "the region's symbol order is missing");
      }
      c = checked.emplace(region, std::move(f)).first;
    }
    if (c->second.updated != call.attrs.get<std::vector<int64_t>>("mutates"))
      misfit(call, "the body updates other operands in place than the call lists");
    // The body's sizes are this call's: its symbols bound in canonical order.
    const auto& bind = call.attrs.get<std::vector<SymExpr>>("bind");
    const std::vector<std::string>& order = c->second.symbols;
    if (bind.size() != order.size())
      misfit(call,
             "it binds " + std::to_string(bind.size()) + " symbols, its body has " + std::to_string(order.size()));
    std::map<std::string, SymExpr> sizes;
    bool renames = false;
    for (std::size_t k = 0; k < order.size(); ++k) {
      renames = renames || !(bind[k] == SymExpr::symbol(order[k]));
      sizes.emplace(order[k], bind[k]);
    }
    Graph renamed;
    if (renames) {
      renamed = body;
      renamed.substitute_symbols(sizes);
    }
    const Graph& stamped = renames ? renamed : body;
    std::vector<ValueId> map(body.size(), -1);
    std::size_t operand = 0;
    const auto args = static_cast<std::size_t>(call.attrs.get_int("num_args"));
    for (std::size_t b = 0; b < stamped.size(); ++b) {
      const Node& n = stamped.nodes()[b];
      if (n.op != Op::placeholder) continue;
      if ((n.kind == PlaceholderKind::input) != (operand < args))
        misfit(call, "its body's placeholders are not its arguments then its parameters");
      if (operand >= call.inputs.size())
        misfit(call, "its body reads more than its " + std::to_string(call.inputs.size()) + " operands");
      const ValueId v = rw.map(call.inputs[operand]);
      if (!(rw.out().node(v).type == n.type))
        misfit(call, "operand " + std::to_string(operand) + " is " + type_str(rw.out().node(v).type) +
                         ", its body's placeholder '" + n.target + "' " + type_str(n.type));
      map[b] = v;
      ++operand;
    }
    if (operand != call.inputs.size())
      misfit(call,
             "it has " + std::to_string(call.inputs.size()) + " operands, its body reads " + std::to_string(operand));
    for (std::size_t b = 0; b < stamped.size(); ++b) {
      const Node& n = stamped.nodes()[b];
      if (n.op == Op::placeholder) continue;
      if (n.op == Op::region_call) misfit(call, "its body calls a region");
      std::vector<ValueId> in;
      in.reserve(n.inputs.size());
      for (ValueId x : n.inputs) in.push_back(map[static_cast<std::size_t>(x)]);
      map[b] = rw.out().add_typed_node(n.op, std::move(in), n.attrs, n.type);
      if (stats) ++stats->nodes;
    }
    if (stamped.outputs().size() != 1)
      misfit(call, "its body has " + std::to_string(stamped.outputs().size()) + " results");
    const ValueId result = map[static_cast<std::size_t>(stamped.outputs().front())];
    if (!(rw.out().node(result).type == call.type))
      misfit(call,
             "its body's result is " + type_str(rw.out().node(result).type) + ", the call's " + type_str(call.type));
    rw.set(id, result);
    if (stats) ++stats->calls;
  }
  Graph out = rw.finish();
  verify(out);
  return out;
}

}  // namespace npucache::compiler
