// fold_transposes: a matmul reads a transposed operand in place.
#include "compiler/passes.h"
#include "compiler/passes/rewriter.h"
#include "ir/storage_writes.h"

namespace npucache::compiler {
namespace {

// Whether `perm` swaps the last two dims and keeps the others.
bool swaps_last_two(const std::vector<int64_t>& perm) {
  const auto r = static_cast<int64_t>(perm.size());
  if (r < 2) return false;
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[static_cast<std::size_t>(i)] != i) return false;
  return perm[static_cast<std::size_t>(r - 2)] == r - 1 && perm[static_cast<std::size_t>(r - 1)] == r - 2;
}

}  // namespace

Graph fold_transposes(const Graph& g) {
  Rewriter rw(g);
  // The folded matmul reads the permute's operand where the matmul is:
  // only when no write in place of it comes between (ir/storage_writes.h).
  const StorageWrites writes(g);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    const auto id = static_cast<ValueId>(i);
    if (n.op == Op::matmul && !n.attrs.get_bool_or("trans_b", false)) {
      const Node& b = g.node(n.inputs[1]);
      if (b.op == Op::permute && swaps_last_two(b.attrs.get<std::vector<int64_t>>("perm")) &&
          writes.writes_before(static_cast<std::size_t>(n.inputs[1]), b.inputs[0]) ==
              writes.writes_before(i, b.inputs[0])) {
        Attrs a = n.attrs;
        a.set("trans_b", true);
        rw.set(id,
               rw.out().add_typed_node(Op::matmul, {rw.map(n.inputs[0]), rw.map(b.inputs[0])}, std::move(a), n.type));
        continue;
      }
    }
    rw.copy(id);
  }
  return eliminate_dead_code(rw.finish());
}

}  // namespace npucache::compiler
