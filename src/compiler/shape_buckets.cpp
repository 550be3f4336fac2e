#include "compiler/shape_buckets.h"

#include "compiler/row_independence.h"

#include <npucache/ops.h>

#include <limits>

namespace npucache::compiler {
namespace {

// The symbols a dim uses, and whether the dim is exactly one symbol.
void note_dim(const SymExpr& d, std::set<std::string>& whole, std::set<std::string>& partial) {
  const auto syms = d.symbols();
  if (auto s = d.as_symbol())
    whole.insert(*s);
  else
    partial.insert(syms.begin(), syms.end());
}

}  // namespace

std::set<std::string> paddable_symbols(const DeviceProgram& p, const Graph& traced) {
  std::set<std::string> whole, partial;
  std::set<int> updated_inputs;
  for (const auto& st : p.steps)
    if (st.op == Op::buffer_update) {
      const BufferDesc& r = p.buffers[static_cast<std::size_t>(p.root(st.operands[0]))];
      if (r.kind == BufferKind::input) updated_inputs.insert(r.index);
    }
  for (const auto& b : p.buffers)
    if (b.kind == BufferKind::input)
      for (const auto& d : b.type.shape) {
        note_dim(d, whole, partial);
        if (updated_inputs.count(b.index))  // a padded copy would take the update
          for (const auto& s : d.symbols()) partial.insert(s);
      }
  for (int o : p.outputs)
    for (const auto& d : p.buffers[static_cast<std::size_t>(o)].type.shape) note_dim(d, whole, partial);
  std::set<std::string> out;
  for (const auto& s : whole)
    if (!partial.count(s) && row_independent(traced, s)) out.insert(s);
  return out;
}

std::optional<SymBindings> nearest_bucket(const SymBindings& actual, const std::vector<SymBindings>& captured,
                                          const std::set<std::string>& paddable) {
  std::optional<SymBindings> best;
  int64_t best_pad = std::numeric_limits<int64_t>::max();
  for (const auto& c : captured) {
    int64_t pad = 0;
    bool fits = true;
    for (const auto& [sym, v] : c) {
      auto it = actual.find(sym);
      if (it == actual.end()) {
        fits = false;
        break;
      }
      if (it->second == v) continue;
      if (!paddable.count(sym) || v < it->second) {
        fits = false;
        break;
      }
      pad += v - it->second;
    }
    if (!fits) continue;
    if (pad == 0) return std::nullopt;  // captured as it is
    if (pad < best_pad) {
      best_pad = pad;
      best = c;
    }
  }
  if (best)  // symbols the capture does not bind (update-only) keep their values
    for (const auto& [sym, v] : actual) best->emplace(sym, v);
  return best;
}

std::vector<Tensor> pad_inputs(const DeviceProgram& p, const std::vector<Tensor>& inputs, const SymBindings& actual,
                               const SymBindings& bucket) {
  std::vector<Tensor> out = inputs;
  for (const auto& b : p.buffers) {
    if (b.kind != BufferKind::input) continue;
    Tensor& t = out.at(static_cast<std::size_t>(b.index));
    for (std::size_t d = 0; d < b.type.shape.size(); ++d) {
      const auto s = b.type.shape[d].as_symbol();
      if (!s) continue;
      const int64_t have = actual.at(*s), want = bucket.at(*s);
      if (want <= have) continue;
      Shape pad_shape = t.shape();
      pad_shape[d] = want - have;
      t = ops::concat({t, ops::full(pad_shape, 0.0, t.dtype())}, static_cast<int64_t>(d));
    }
  }
  return out;
}

std::vector<Tensor> slice_outputs(const DeviceProgram& p, const std::vector<Tensor>& outputs, const SymBindings& actual,
                                  const SymBindings& bucket) {
  std::vector<Tensor> out = outputs;
  for (std::size_t i = 0; i < p.outputs.size() && i < out.size(); ++i) {
    const auto& shape = p.buffers[static_cast<std::size_t>(p.outputs[i])].type.shape;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const auto s = shape[d].as_symbol();
      if (!s || bucket.at(*s) == actual.at(*s)) continue;
      // A copy of the leading part (an eager slice is a copy).
      out[i] = ops::slice(out[i], static_cast<int64_t>(d), 0, actual.at(*s));
    }
  }
  return out;
}

}  // namespace npucache::compiler
