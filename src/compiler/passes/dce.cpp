// eliminate_dead_code: keeps placeholders, side effects and what reaches an
// output.
#include "compiler/passes.h"
#include "compiler/passes/rewriter.h"

namespace npucache::compiler {

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (ValueId o : g.outputs()) live[static_cast<std::size_t>(o)] = true;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::placeholder || op_info(n.op).side_effect) live[i] = true;
  }
  for (std::size_t i = g.size(); i-- > 0;)
    if (live[i])
      for (ValueId in : g.nodes()[i].inputs) live[static_cast<std::size_t>(in)] = true;
  Rewriter rw(g);
  for (std::size_t i = 0; i < g.size(); ++i)
    if (live[i]) rw.copy(static_cast<ValueId>(i));
  return rw.finish();
}

}  // namespace npucache::compiler
