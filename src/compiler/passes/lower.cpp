// lower: a primitive graph becomes a DeviceProgram (see program.h).
#include <npucache/error.h>

#include "compiler/passes.h"

#include <algorithm>

namespace npucache::compiler {

int DeviceProgram::root(int b) const {
  for (std::size_t guard = 0; guard <= buffers.size(); ++guard) {
    const BufferDesc& d = buffers.at(static_cast<std::size_t>(b));
    if (d.kind != BufferKind::view) return b;
    b = d.index;
  }
  throw Error("DeviceProgram: cyclic views");
}

void DeviceProgram::add_output(int b) {
  BufferDesc& rb = buffers.at(static_cast<std::size_t>(root(b)));
  if (rb.kind == BufferKind::arena || rb.kind == BufferKind::temp) {
    rb.kind = BufferKind::output;
    rb.index = num_output_buffers++;
  }
  outputs.push_back(b);
}

Attrs evaluate_attrs(const Attrs& a, const SymBindings& b) {
  Attrs out;
  for (const auto& [k, v] : a.items()) {
    if (const auto* dims = std::get_if<std::vector<SymExpr>>(&v)) {
      std::vector<SymExpr> e;
      for (const auto& d : *dims) e.emplace_back(d.evaluate(b));
      out.set(k, e);
    } else {
      out.set(k, v);
    }
  }
  return out;
}

DeviceProgram lower(const Graph& g, bool memory_planning) {
  DeviceProgram p;
  const auto& nodes = g.nodes();
  std::vector<int> producer(nodes.size(), -1);          // step writing each buffer's value
  std::vector<std::vector<int>> readers(nodes.size());  // steps reading each root so far
  std::vector<int> last_writer(nodes.size(), -1);       // last step writing each root
  int last_ordered = -1;                                // last side-effecting step (comm, rng, in-place)
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    BufferDesc b;
    b.type = n.type;
    if (n.op == Op::placeholder) {
      if (n.kind == PlaceholderKind::input) {
        b.kind = BufferKind::input;
        b.index = p.num_inputs++;
      } else {
        b.kind = BufferKind::parameter;
        b.index = static_cast<int>(p.parameters.size());
        p.parameters.push_back({n.target, n.kind});
      }
      p.buffers.push_back(b);
      continue;
    }
    if (op_info(n.op).composite)
      throw VerifyError("node '" + n.name + "' (" + std::string(op_name(n.op)) +
                        ") is composite: decompose the graph before lowering");
    const bool view = n.op == Op::reshape || n.op == Op::buffer_update || n.op == Op::send;
    if (view) {
      b.kind = BufferKind::view;
      b.index = n.inputs[0];
    } else {
      b.kind = memory_planning ? BufferKind::arena : BufferKind::temp;
    }
    p.buffers.push_back(b);
    if (n.op == Op::reshape) continue;  // a pure view: no step

    ProgramStep s;
    s.op = n.op;
    s.attrs = n.attrs;
    for (ValueId in : n.inputs) s.operands.push_back(in);
    s.result = static_cast<int>(i);
    const int si = static_cast<int>(p.steps.size());
    auto dep = [&](int d) {
      if (d >= 0 && std::find(s.deps.begin(), s.deps.end(), d) == s.deps.end()) s.deps.push_back(d);
    };
    for (ValueId in : n.inputs) {
      const int r = p.root(in);
      dep(last_writer[static_cast<std::size_t>(r)]);
    }
    // The roots this step writes in place: a buffer_update's first operand;
    // a region call's operands its body updates (link_program.h).
    std::vector<int> in_place;
    if (n.op == Op::buffer_update) in_place.push_back(p.root(n.inputs[0]));
    if (n.op == Op::region_call)
      for (int64_t m : n.attrs.get<std::vector<int64_t>>("mutates"))
        in_place.push_back(p.root(n.inputs.at(static_cast<std::size_t>(m))));
    for (int r : in_place)  // write-after-read: every earlier reader first
      for (int rd : readers[static_cast<std::size_t>(r)]) dep(rd);
    if (op_info(n.op).side_effect || n.op == Op::group_rank) {
      dep(last_ordered);
      last_ordered = si;
    }
    std::sort(s.deps.begin(), s.deps.end());
    for (ValueId in : n.inputs) readers[static_cast<std::size_t>(p.root(in))].push_back(si);
    last_writer[static_cast<std::size_t>(p.root(static_cast<int>(i)))] = si;
    for (int r : in_place) last_writer[static_cast<std::size_t>(r)] = si;
    producer[i] = si;
    p.steps.push_back(std::move(s));
  }
  for (ValueId o : g.outputs()) p.add_output(o);
  return p;
}

}  // namespace npucache::compiler
