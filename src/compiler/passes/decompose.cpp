// decompose: re-traces each composite op's decomposition into primitives.
#include <npucache/error.h>

#include "compiler/passes.h"
#include "nn/interop.h"

namespace npucache::compiler {
namespace {

constexpr int kMaxRounds = 8;  // custom decompositions may emit composite ops

bool needs_rewrite(const Graph& g, const DecompositionTable& custom, bool first_round) {
  for (const Node& n : g.nodes())
    if (n.op != Op::placeholder && (op_info(n.op).composite || (first_round && custom.count(n.op)))) return true;
  return false;
}

Graph one_round(const Graph& g, const DecompositionTable& custom, bool first_round) {
  nn::Retrace st;
  std::vector<Tensor> vals(g.size());
  const auto& nodes = g.nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op == Op::placeholder) {
      vals[i] = st.placeholder(n.kind, n.target, n.type);
      continue;
    }
    std::vector<Tensor> in;
    for (ValueId v : n.inputs) in.push_back(vals[static_cast<std::size_t>(v)]);
    auto c = first_round ? custom.find(n.op) : custom.end();
    const Decomposition* d = c != custom.end()         ? &c->second.fn
                             : op_info(n.op).composite ? default_decomposition(n.op)
                                                       : nullptr;
    Tensor out;
    if (d == nullptr) {
      out = st.record(n.op, in, n.attrs);
    } else {
      const std::string who =
          c != custom.end() ? "custom decomposition '" + c->second.name + "'" : "default decomposition";
      try {
        out = (*d)(in, n.attrs);
      } catch (const Error& e) {
        throw VerifyError("node '" + n.name + "' (" + std::string(op_name(n.op)) + "): " + who +
                          " failed: " + e.what());
      }
      if (!out.defined() || !out.is_traced())
        throw VerifyError("node '" + n.name + "' (" + std::string(op_name(n.op)) + "): " + who +
                          " returned no traced tensor");
      TensorType got = out.type();
      if (!(got == n.type))
        throw VerifyError("node '" + n.name + "' (" + std::string(op_name(n.op)) + "): " + who + " returned " +
                          type_str(got) + " but the op's type is " + type_str(n.type));
    }
    vals[i] = out;
  }
  std::vector<Tensor> outs;
  for (ValueId o : g.outputs()) outs.push_back(vals[static_cast<std::size_t>(o)]);
  return st.finish(outs);
}

}  // namespace

Graph decompose(const Graph& g, const DecompositionTable& custom) {
  Graph cur = g;
  for (int round = 0; round < kMaxRounds; ++round) {
    if (!needs_rewrite(cur, custom, round == 0)) return cur;
    cur = one_round(cur, custom, round == 0);
  }
  if (needs_rewrite(cur, custom, false))
    throw VerifyError("decompose: composite ops remain after " + std::to_string(kMaxRounds) +
                      " rounds; a decomposition keeps producing composite ops");
  return cur;
}

}  // namespace npucache::compiler
