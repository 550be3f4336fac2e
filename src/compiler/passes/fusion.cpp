// fuse: vertical fusion of f32 elementwise chains, optionally into a
// trailing last-dim reduction (the encoding is described in fusion.h).
#include <npucache/error.h>

#include "compiler/fusion.h"
#include "compiler/passes.h"
#include "compiler/passes/rewriter.h"
#include "ir/storage_writes.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>

namespace npucache::compiler {
namespace {

bool is_f32ish(DType t) { return t == DType::f32 || t == DType::boolean; }

// An elementwise op the fused kernel runs (OpInfo::fusible), or a uniform
// constant, over f32 (or bool) values.
bool fusable_elementwise(const Graph& g, const Node& n) {
  if (n.op != Op::full && !op_info(n.op).fusible) return false;
  if (!is_f32ish(n.type.dtype)) return false;
  for (ValueId in : n.inputs)
    if (!is_f32ish(g.node(in).type.dtype)) return false;
  return true;
}

bool fusable_reduction(const Node& n) {
  if (n.op != Op::sum && n.op != Op::mean && n.op != Op::max) return false;
  if (n.type.dtype != DType::f32) return false;
  return n.inputs.size() == 1;
}

bool reduces_last_dim(const Graph& g, const Node& n) {
  const auto& dims = n.attrs.get<std::vector<int64_t>>("dims");
  const auto rank = static_cast<int64_t>(g.node(n.inputs[0]).type.shape.size());
  return rank >= 1 && dims.size() == 1 && (dims[0] == -1 || dims[0] == rank - 1);
}

// Whether `s` broadcasts to `target` (right-aligned, dims equal or 1).
bool broadcasts_to(const Shape& s, const Shape& target) {
  if (s.size() > target.size()) return false;
  const std::size_t off = target.size() - s.size();
  for (std::size_t i = 0; i < s.size(); ++i)
    if (!(s[i] == target[off + i]) && !(s[i] == SymExpr(1))) return false;
  return true;
}

struct Group {
  ValueId root;
  bool reduction;
  Shape iter_shape;
  std::set<ValueId> members;
};

}  // namespace

Graph fuse(const Graph& g, FusionStats* stats) {
  const auto n = g.size();
  std::vector<std::vector<ValueId>> users(n);
  for (std::size_t i = 0; i < n; ++i)
    for (ValueId in : g.nodes()[i].inputs) users[static_cast<std::size_t>(in)].push_back(static_cast<ValueId>(i));
  std::vector<bool> is_output(n, false);
  for (ValueId o : g.outputs()) is_output[static_cast<std::size_t>(o)] = true;

  std::vector<int> group_of(n, -1);
  std::vector<Group> groups;
  const StorageWrites writes(g);
  for (std::size_t r = n; r-- > 0;) {
    const Node& root = g.nodes()[r];
    if (group_of[r] >= 0 || root.op == Op::full) continue;
    const bool red = fusable_reduction(root) && reduces_last_dim(g, root);
    if (!red && !fusable_elementwise(g, root)) continue;
    Group grp{static_cast<ValueId>(r), red, red ? g.node(root.inputs[0]).type.shape : root.type.shape, {}};
    grp.members.insert(grp.root);
    std::priority_queue<ValueId> cand;
    for (ValueId in : root.inputs) cand.push(in);
    while (!cand.empty()) {
      ValueId c = cand.top();
      cand.pop();
      const auto ci = static_cast<std::size_t>(c);
      if (grp.members.count(c) || group_of[ci] >= 0) continue;
      const Node& p = g.node(c);
      if (!fusable_elementwise(g, p)) continue;
      if (p.op == Op::full) {                           // a uniform constant: copied into every group using it
        if (!writes.written(c)) grp.members.insert(c);  // a written one is a buffer: an input
        continue;
      }
      // The group runs where its root is: a member whose operands are
      // written in place between it and the root would read other
      // contents there (ir/storage_writes.h).
      bool same_contents = true;
      for (ValueId in : p.inputs)
        same_contents = same_contents && writes.writes_before(ci, in) == writes.writes_before(r, in);
      if (!same_contents) continue;
      // Values of a smaller (broadcast) shape are recomputed per element.
      if (!broadcasts_to(p.type.shape, grp.iter_shape) || is_output[ci]) continue;
      bool all_inside = true;
      for (ValueId u : users[ci]) all_inside = all_inside && grp.members.count(u);
      if (!all_inside) continue;
      grp.members.insert(c);
      for (ValueId in : p.inputs) cand.push(in);
    }
    int non_const = 0;
    for (ValueId m : grp.members) non_const += g.node(m).op != Op::full;
    if (non_const < 2) continue;  // a lone op is already one pass over memory
    const int gi = static_cast<int>(groups.size());
    for (ValueId m : grp.members)
      if (g.node(m).op != Op::full) group_of[static_cast<std::size_t>(m)] = gi;
    groups.push_back(std::move(grp));
  }

  Rewriter rw(g);
  Graph& out = rw.out();
  int fused_ops = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<ValueId>(i);
    const int gi = group_of[i];
    if (gi < 0) {
      rw.copy(id);
      continue;
    }
    const Group& grp = groups[static_cast<std::size_t>(gi)];
    if (grp.root != id) continue;  // materialised only at the root
    // Inputs: values used by members that are not members, in first-use order.
    std::vector<ValueId> ext;
    std::map<ValueId, int64_t> reg;
    for (ValueId m : grp.members) {
      if (g.node(m).op == Op::full) continue;
      for (ValueId in : g.node(m).inputs)
        if (!grp.members.count(in) && !reg.count(in)) {
          reg[in] = static_cast<int64_t>(ext.size());
          ext.push_back(in);
        }
    }
    std::vector<int64_t> code;
    std::vector<double> consts;
    int64_t next = static_cast<int64_t>(ext.size());
    for (ValueId m : grp.members) {  // std::set: ascending ids = topological
      const Node& node = g.node(m);
      if (grp.reduction && m == grp.root) continue;
      if (node.op == Op::full) {
        code.insert(code.end(), {int64_t{op_number(Op::full)}, static_cast<int64_t>(consts.size()), kFusedNoOperand,
                                 kFusedNoOperand});
        consts.push_back(node.attrs.get<double>("value"));
      } else {
        int64_t ops[3] = {kFusedNoOperand, kFusedNoOperand, kFusedNoOperand};
        for (std::size_t k = 0; k < node.inputs.size(); ++k) ops[k] = reg.at(node.inputs[k]);
        code.insert(code.end(), {int64_t{op_number(node.op)}, ops[0], ops[1], ops[2]});
        ++fused_ops;
      }
      reg[m] = next++;
    }
    const Node& root = g.node(grp.root);
    Attrs a{{"code", code},
            {"iter_shape", grp.iter_shape},
            {"shape", root.type.shape},
            {"dtype", root.type.dtype},
            {"block", kFusedDefaultBlock}};
    for (std::size_t k = 0; k < consts.size(); ++k) a.set("c" + std::to_string(k), consts[k]);
    a.set("num_consts", static_cast<int64_t>(consts.size()));
    if (grp.reduction) {
      a.set("reduce", int64_t{op_number(root.op)});
      a.set("keepdim", root.attrs.get_bool_or("keepdim", false));
      ++fused_ops;
    }
    std::vector<ValueId> in;
    for (ValueId e : ext) in.push_back(rw.map(e));
    rw.set(id, out.add_typed_node(Op::fused, std::move(in), std::move(a), root.type));
  }
  if (stats) {
    stats->groups = static_cast<int>(groups.size());
    stats->fused_ops = fused_ops;
  }
  Graph result = rw.finish();
  return eliminate_dead_code(result);
}

}  // namespace npucache::compiler
