#include "nn/detail/trace_state.h"

#include <npucache/error.h>

#include <algorithm>
#include <atomic>

namespace npucache::detail {
namespace {
thread_local TraceState* t_trace = nullptr;
std::atomic<uint64_t> g_next_trace_id{1};
}  // namespace

TraceState* current_trace() { return t_trace; }
void set_current_trace(TraceState* t) { t_trace = t; }

SymExpr ShapeEnv::fresh(int64_t hint) {
  std::string name = "s" + std::to_string(hints_.size());
  hints_[name] = hint;
  order_[name] = order_.size();
  return SymExpr::symbol(name);
}

SymExpr ShapeEnv::resolve(const SymExpr& e) const {
  SymExpr r = e;
  for (std::size_t guard = 0; guard <= subst_.size(); ++guard) {
    bool pending = false;
    for (const auto& s : r.symbols()) pending = pending || subst_.count(s);
    if (!pending) break;
    r = r.substitute(subst_);
  }
  return r;
}

Shape ShapeEnv::resolve(const Shape& s) const {
  Shape out;
  out.reserve(s.size());
  for (const auto& d : s) out.push_back(resolve(d));
  return out;
}

std::optional<int64_t> ShapeEnv::hint(const SymExpr& e) const {
  try {
    return resolve(e).evaluate(hints_);
  } catch (const ShapeError&) {
    return std::nullopt;
  }
}

bool ShapeEnv::unify(const SymExpr& a, const SymExpr& b) {
  SymExpr ra = resolve(a), rb = resolve(b);
  if (ra == rb) return true;
  auto va = hint(ra), vb = hint(rb);
  if (!va || !vb || *va != *vb) return false;
  auto sa = ra.as_symbol(), sb = rb.as_symbol();
  if (sa && sb) {  // keep the older symbol
    if (order_.at(*sa) < order_.at(*sb))
      set_subst(*sb, ra);
    else
      set_subst(*sa, rb);
  } else if (sa) {
    set_subst(*sa, rb);
  } else if (sb) {
    set_subst(*sb, ra);
  } else {  // compound expressions with equal values: specialise their symbols
    specialize(ra);
    specialize(rb);
    return true;
  }
  guards_.push_back(ra.str() + " == " + rb.str());
  return true;
}

std::optional<int64_t> ShapeEnv::specialize(const SymExpr& e) {
  SymExpr r = resolve(e);
  if (auto c = r.try_constant()) return c;
  auto v = hint(r);
  if (!v) return std::nullopt;
  for (const auto& s : r.symbols()) {
    set_subst(s, SymExpr(hints_.at(s)));
    guards_.push_back(s + " == " + std::to_string(hints_.at(s)));
  }
  return v;
}

bool ShapeEnv::require_le(const SymExpr& a, const SymExpr& b) {
  const SymExpr ra = resolve(a), rb = resolve(b);
  if (auto d = (rb - ra).try_constant()) return *d >= 0;  // holds (or fails) for every size
  const auto x = hint(ra), y = hint(rb);
  // No sizes: a re-trace of a verified graph (the compiler's decompositions),
  // whose symbols have no values here; the trace that made the graph checked
  // the bound and its signature guards it. It holds unless known not to, as
  // for the verifier (a constant pair was decided above).
  if (!x || !y) return true;
  if (*x > *y) return false;
  const DimBound bound{ra, rb};
  if (std::find(bounds_.begin(), bounds_.end(), bound) == bounds_.end()) {
    bounds_.push_back(bound);
    guards_.push_back(ra.str() + " <= " + rb.str());
  }
  return true;
}

void ShapeEnv::set_subst(const std::string& sym, SymExpr e) {
  auto it = subst_.find(sym);
  if (logging_) undo_.emplace_back(sym, it == subst_.end() ? std::nullopt : std::optional<SymExpr>(it->second));
  if (it == subst_.end())
    subst_.emplace(sym, std::move(e));
  else
    it->second = std::move(e);
}

void ShapeEnv::begin_undo() {
  logging_ = true;
  undo_.clear();
  undo_guards_ = guards_.size();
  undo_bounds_ = bounds_.size();
}

void ShapeEnv::end_undo(bool rollback) {
  logging_ = false;
  if (rollback) {
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
      if (it->second)
        subst_[it->first] = *it->second;
      else
        subst_.erase(it->first);
    }
    guards_.resize(undo_guards_);
    bounds_.resize(undo_bounds_);
  }
  undo_.clear();
}

std::map<std::string, SymExpr> ShapeEnv::final_substitutions(const std::vector<Shape>& appearance) const {
  std::map<std::string, SymExpr> rename;
  for (const auto& shape : appearance)
    for (const auto& d : shape)
      for (const auto& s : resolve(d).symbols())
        if (!rename.count(s)) rename[s] = SymExpr::symbol("s" + std::to_string(rename.size()));
  std::map<std::string, SymExpr> out;
  for (const auto& [s, hint] : hints_) {
    SymExpr r = resolve(SymExpr::symbol(s));
    for (const auto& t : r.symbols())
      if (!rename.count(t)) rename[t] = SymExpr::symbol("s" + std::to_string(rename.size()));
    out[s] = r.substitute(rename);
  }
  return out;
}

TraceState::TraceState(const nn::Module* traced, const TraceOptions& opts)
    : id(g_next_trace_id++), module(traced), options(opts), unlowerable(opts.unlowerable) {
  if (traced == nullptr) return;
  for (const auto& [name, t] : traced->named_parameters())
    if (t.defined()) module_tensors[t.impl().get()] = {name, PlaceholderKind::parameter};
  for (const auto& [name, t] : traced->named_buffers())
    if (t.defined()) module_tensors[t.impl().get()] = {name, PlaceholderKind::buffer};
}

Tensor TraceState::wrap(ValueId v) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = graph.node(v).type;
  impl->trace_id = id;
  impl->value = v;
  if (lazy) lazy_values.emplace_back(impl, v);
  return Tensor(std::move(impl));
}

bool TraceState::pending_uses(const TensorImpl& impl, bool writes_only) const {
  if (!impl.block) return false;
  // The placeholders bound to the same storage.
  std::vector<ValueId> same;
  for (const auto& [t, v] : bound)
    if (t->block == impl.block) same.push_back(v);
  if (same.empty()) return false;
  if (!writes_only) return true;
  // A node writes the storage when it updates in place (its first operand
  // through views) a value rooted at one of those placeholders.
  auto rooted = [&](ValueId v) {
    while (true) {
      const Node& n = graph.node(v);
      if (std::find(same.begin(), same.end(), v) != same.end()) return true;
      if ((n.op != Op::reshape && n.op != Op::buffer_update) || n.inputs.empty()) return false;
      v = n.inputs[0];
    }
  };
  for (const Node& n : graph.nodes())
    if (n.op == Op::buffer_update && rooted(n.inputs[0])) return true;
  return false;
}

void settle_pending(const TensorImpl& impl, HostAccess access, const char* what) {
  TraceState* t = current_trace();
  if (t == nullptr || !t->lazy || !t->on_break || impl.traced()) return;
  if (!t->pending_uses(impl, access == HostAccess::read)) return;
  t->on_break(GraphBreakError::Kind::host_read, what,
              std::string(what) + (access == HostAccess::read
                                       ? "() reads a tensor that compiled code before it updates in place"
                                       : "() overwrites a tensor that compiled code before it uses"));
}

bool prepared_unknown(const TensorImpl& impl) {
  const TraceState* t = current_trace();
  return t != nullptr && t->lazy && t->host_value && t->unknown && !impl.traced() && t->unknown(impl);
}

std::optional<std::vector<double>> prepared_read(const TensorImpl& impl, const char* access) {
  if (!prepared_unknown(impl)) return std::nullopt;
  return current_trace()->host_value(impl, access);
}

void graph_break(const TensorImpl& impl, GraphBreakError::Kind kind, const std::string& reason) {
  TraceState* t = current_trace();
  std::string op = "?";
  if (t != nullptr && t->id == impl.trace_id && impl.value >= 0 &&
      static_cast<std::size_t>(impl.value) < t->graph.nodes().size())
    op = std::string(op_name(t->graph.node(impl.value).op)) + " (" + t->graph.node(impl.value).name + ")";
  if (t != nullptr && t->lazy && t->id == impl.trace_id && t->on_break) {
    t->on_break(kind, op, reason);
    return;
  }
  throw GraphBreakError(kind, op, reason);
}

ValueId TraceState::value_of(const Tensor& t, const std::string& what) {
  const TensorImpl* impl = t.impl().get();
  if (impl->traced()) {
    if (impl->trace_id != id && !region.empty())
      throw TraceError(what + " in the body of compile region " + region +
                       " is a tensor of the code around the region; a region reads only its arguments and its "
                       "module's parameters and buffers: pass it as an argument");
    if (impl->trace_id != id)
      throw TraceError(what + " is a traced tensor of another trace; tensors cannot cross traces");
    return impl->value;
  }
  if (auto it = bound.find(impl); it != bound.end()) return it->second;
  auto it = module_tensors.find(impl);
  if (it == module_tensors.end() && lazy) {  // an eager tensor: an input of the pending piece
    if (impl->meta && !host_value)
      throw MetaTensorError(what + " is a meta tensor: a method with graph breaks runs its pieces");
    ValueId v = graph.add_placeholder(PlaceholderKind::input, "in" + std::to_string(lazy_inputs.size()), impl->type);
    bound[impl] = v;
    lazy_inputs.emplace_back(v, t);
    return v;
  }
  if (it == module_tensors.end() && !region.empty())
    throw TraceError(what + " in the body of compile region " + region + " is an eager tensor (" +
                     type_str(impl->type) +
                     ") that is neither an argument of the region nor a parameter or buffer of its module; pass it "
                     "as an argument, register it on the region's module, or build it with ops::full/ops::arange "
                     "inside the region");
  if (it == module_tensors.end())
    throw TraceError(what + " is an eager tensor (" + type_str(impl->type) +
                     ") that is neither an input of the traced method nor a parameter or buffer "
                     "of its module; pass it as an argument, register it on the module, or "
                     "build it with ops::full/ops::arange inside the method");
  ValueId v = graph.add_placeholder(it->second.second, it->second.first, impl->type);
  bound[impl] = v;
  return v;
}

Tensor TraceState::record(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  if (unlowerable)
    if (std::string why = unlowerable(op); !why.empty()) {
      if (!lazy || !on_break)
        throw GraphBreakError(GraphBreakError::Kind::unlowerable_op, std::string(op_name(op)), why);
      // The caller (ops::apply) runs the op eagerly after the pending piece.
      on_break(GraphBreakError::Kind::unlowerable_op, std::string(op_name(op)), why);
      return Tensor();
    }
  std::vector<ValueId> ids;
  ids.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i)
    ids.push_back(value_of(inputs[i], std::string(op_name(op)) + " operand " + std::to_string(i)));
  const ValueId v = graph.add_node(op, std::move(ids), attrs, &shapes);
  // Constant sizes are bounded as eager ones are (symbolic ones when a call
  // binds them: the executor checks every buffer).
  std::vector<int64_t> known;
  for (const auto& d : graph.node(v).type.shape)
    if (auto c = d.try_constant()) known.push_back(*c);
  try {
    check_dims(known);
  } catch (const ShapeError& e) {
    throw ShapeError(graph.node(v).name + " (" + std::string(op_name(op)) + "): " + e.what());
  }
  return wrap(v);
}

}  // namespace npucache::detail
