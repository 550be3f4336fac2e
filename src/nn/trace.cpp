#include <npucache/error.h>
#include <npucache/ir/hash.h>
#include <npucache/trace.h>
#include <algorithm>

#include "nn/detail/tensor_impl.h"
#include "nn/detail/trace_state.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace npucache {

void detail::throw_not_flattenable(const std::string& path, const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  throw TraceError("argument '" + path + "' has type '" + (status == 0 && d ? d.get() : mangled) +
                   "', which cannot be traced: use a Tensor, std::vector, bool, integer, "
                   "floating or std::string, or give the struct a member "
                   "`template <class V> void visit(V& v)` that calls v(\"name\", field) for "
                   "each field");
}

bool detail::trace_active() { return detail::current_trace() != nullptr; }

std::string arg_name(const TraceOptions& options, std::size_t i) {
  return i < options.arg_names.size() ? options.arg_names[i] : "arg" + std::to_string(i);
}

TraceSession::TraceSession(const nn::Module& module, const TraceOptions& options)
    : state_(std::make_unique<detail::TraceState>(&module, options)) {
  if (detail::current_trace() != nullptr)
    throw TraceError("a trace is already active on this thread; traces do not nest");
  detail::set_current_trace(state_.get());
}

TraceSession::~TraceSession() {
  if (detail::current_trace() == state_.get()) detail::set_current_trace(nullptr);
}

Tensor TraceSession::input(const std::string& path, const Tensor& example) {
  if (!example.defined()) throw TraceError("input '" + path + "' is an undefined tensor");
  if (example.is_traced()) throw TraceError("input '" + path + "' is already a traced tensor");
  const auto& impl = *example.impl();
  TensorType t = impl.type;
  const auto& o = state_->options;
  auto marked = [&](const std::vector<std::pair<std::string, int64_t>>& marks, std::size_t dim) {
    return std::find(marks.begin(), marks.end(), std::pair<std::string, int64_t>(path, static_cast<int64_t>(dim))) !=
           marks.end();
  };
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    const int64_t size = t.shape[i].constant();
    if (marked(o.static_dims, i)) continue;
    if (marked(o.dynamic_dims, i))
      t.shape[i] = state_->shapes.fresh(std::max<int64_t>(size, 2));
    else if (o.dynamic && size >= 2)
      t.shape[i] = state_->shapes.fresh(size);
  }
  ValueId v = state_->graph.add_placeholder(PlaceholderKind::input, path, t);
  state_->signature.inputs.push_back({path, t});
  return state_->wrap(v);
}

void TraceSession::guard(const std::string& path, const std::string& value) {
  state_->signature.guards.push_back({path, value});
}

SymInt TraceSession::sym_input(const std::string& path, const SymInt& example) {
  const int64_t v = example.value();
  const auto& o = state_->options;
  auto marked = [&](const std::vector<std::pair<std::string, int64_t>>& marks) {
    return std::find(marks.begin(), marks.end(), std::pair<std::string, int64_t>(path, 0)) != marks.end();
  };
  const bool dynamic = !marked(o.static_dims) && (o.dynamic || marked(o.dynamic_dims));
  SymExpr e = dynamic ? state_->shapes.fresh(v) : SymExpr(v);
  state_->signature.sym_inputs.push_back({path, e});
  return SymInt(std::move(e));
}

int64_t SymInt::value() const {
  if (auto c = expr_.try_constant()) return *c;
  throw TraceError("a SymInt (" + expr_.str() +
                   ") was read as a plain integer while tracing with dynamic shapes: that is a data-dependent "
                   "decision; use it as a size (SymExpr) instead");
}

TraceResult TraceSession::finish(const std::vector<std::pair<std::string, Tensor>>& outputs, const std::string& name) {
  TraceResult r;
  std::vector<ValueId> outs;
  for (const auto& [path, t] : outputs) {
    if (!t.defined()) throw TraceError(name + ": output '" + path + "' is an undefined tensor");
    outs.push_back(state_->value_of(t, "output '" + path + "'"));
    r.output_paths.push_back(path);
  }
  if (outs.empty())
    throw TraceError(name +
                     " returns no tensor; a traced method must return a Tensor, a "
                     "std::vector<Tensor> or a struct of tensors");
  std::vector<Shape> input_shapes;
  for (const auto& in : state_->signature.inputs) input_shapes.push_back(in.type.shape);
  if (!state_->signature.sym_inputs.empty()) {
    Shape syms;
    for (const auto& si : state_->signature.sym_inputs) syms.push_back(si.expr);
    input_shapes.push_back(std::move(syms));
  }
  auto subst = state_->shapes.final_substitutions(input_shapes);
  state_->graph.substitute_symbols(subst);
  state_->graph.set_outputs(outs);
  for (auto& in : state_->signature.inputs)
    for (auto& d : in.type.shape) d = d.substitute(subst);
  for (auto& si : state_->signature.sym_inputs) si.expr = state_->shapes.resolve(si.expr).substitute(subst);
  state_->signature.shape_guards = state_->shapes.guards();
  for (const auto& bound : state_->shapes.bounds()) {
    DimBound final{state_->shapes.resolve(bound.lhs).substitute(subst),
                   state_->shapes.resolve(bound.rhs).substitute(subst)};
    const auto lo = final.lhs.try_constant(), hi = final.rhs.try_constant();
    if (lo && hi) continue;  // specialised since: checked by the constant dims
    if (std::find(state_->signature.dim_bounds.begin(), state_->signature.dim_bounds.end(), final) ==
        state_->signature.dim_bounds.end())
      state_->signature.dim_bounds.push_back(std::move(final));
  }
  // Region bodies: the same symbols, then named by their hash (which does
  // not see symbol names: same-shaped bodies whose sizes are other symbols
  // are one body). A call's "bind" holds its symbols in the order of its
  // signature; it becomes its values of the body's symbols in canonical
  // order: the symbol the body's tracing call had at a position is this
  // call's at that position.
  struct Named {
    std::string hex;
    std::vector<std::string> symbols;  // canonical order
    std::vector<SymExpr> traced_with;  // the tracing call's symbols, final
  };
  std::map<std::string, Named> named;
  for (const auto& body : state_->region_list) {
    body->graph.substitute_symbols(subst);
    verify(body->graph);
    CanonicalNaming c = canonical_naming(body->graph);  // one encoder pass for both
    Named n{c.hash.hex(), std::move(c.symbols), {}};
    for (const auto& e : body->arg_symbols) n.traced_with.push_back(e.substitute(subst));
    r.regions.emplace(n.hex, std::move(body->graph));
    named.emplace(body->id, std::move(n));
  }
  for (Node& node : state_->graph.mutable_nodes())
    if (node.op == Op::region_call) {
      const Named& n = named.at(node.attrs.get<std::string>("region"));
      const auto& mine = node.attrs.get<std::vector<SymExpr>>("bind");
      std::vector<SymExpr> bind;
      for (const auto& sym : n.symbols) {
        const SymExpr s = SymExpr::symbol(sym);
        const auto at = std::find(n.traced_with.begin(), n.traced_with.end(), s);
        const auto i = static_cast<std::size_t>(at - n.traced_with.begin());
        bind.push_back(at != n.traced_with.end() && i < mine.size() ? mine[i] : s);
      }
      node.attrs.set("region", n.hex);
      node.attrs.set("bind", std::move(bind));
    }
  verify(state_->graph);
  r.graph = std::move(state_->graph);
  r.signature = std::move(state_->signature);
  r.name = name;
  detail::set_current_trace(nullptr);
  return r;
}

SymBindings InputSignature::bind(const std::vector<std::pair<std::string, TensorType>>& tensors,
                                 const std::vector<GuardSpec>& values,
                                 const std::vector<std::pair<std::string, int64_t>>& symints) const {
  std::vector<std::pair<const std::string*, const TensorType*>> refs;
  refs.reserve(tensors.size());
  for (const auto& [p, t] : tensors) refs.emplace_back(&p, &t);
  return bind_refs(refs, values, symints);
}

SymBindings InputSignature::bind(const FlatArgs& args) const {
  std::vector<std::pair<const std::string*, const TensorType*>> refs;
  refs.reserve(args.tensors.size());
  for (const auto& [p, t] : args.tensors) {
    if (!t.defined()) throw TraceError("input '" + p + "' is an undefined tensor");
    if (t.is_traced()) throw TraceError("input '" + p + "' is a traced tensor");
    refs.emplace_back(&p, &t.impl()->type);
  }
  return bind_refs(refs, args.values, args.symints);
}

namespace {
// SymExpr's accessors read in place: a call checks every dim of every
// input against the signature.
const std::string* single_symbol(const SymExpr& e) {
  const auto& t = e.terms();
  if (t.size() == 1 && t.begin()->first.size() == 1 && t.begin()->second == 1) return &t.begin()->first.front();
  return nullptr;
}
std::optional<int64_t> constant_of(const SymExpr& e) {
  const auto& t = e.terms();
  if (t.empty()) return 0;
  if (t.size() == 1 && t.begin()->first.empty()) return t.begin()->second;
  return std::nullopt;
}
// A call's dims are constants (eager tensors).
int64_t call_dim(const SymExpr& e) {
  if (const auto c = constant_of(e)) return *c;
  return e.constant();  // throws, naming the dim
}
}  // namespace

SymBindings InputSignature::bind_refs(const std::vector<std::pair<const std::string*, const TensorType*>>& tensors,
                                      const std::vector<GuardSpec>& values,
                                      const std::vector<std::pair<std::string, int64_t>>& symints) const {
  if (tensors.size() != inputs.size())
    throw TraceError("call has " + std::to_string(tensors.size()) + " tensor inputs, the trace has " +
                     std::to_string(inputs.size()));
  SymBindings b;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& spec = inputs[i];
    const std::string& path = *tensors[i].first;
    const TensorType& t = *tensors[i].second;
    auto where = [&] { return "input '" + spec.path + "'"; };
    if (path != spec.path) throw TraceError(where() + " is '" + path + "' in this call");
    if (t.dtype != spec.type.dtype || t.shape.size() != spec.type.shape.size())
      throw TraceError(where() + " is " + type_str(t) + ", the trace expects " + type_str(spec.type));
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      const SymExpr& want = spec.type.shape[d];
      if (const std::string* s = single_symbol(want)) {
        const int64_t actual = call_dim(t.shape[d]);
        auto [it, inserted] = b.try_emplace(*s, actual);
        if (!inserted && it->second != actual)
          throw TraceError(where() + " dim " + std::to_string(d) + " is " + std::to_string(actual) +
                           " but the trace requires it to equal " + *s + " = " + std::to_string(it->second));
      }
    }
  }
  if (symints.size() != sym_inputs.size())
    throw TraceError("call has " + std::to_string(symints.size()) + " SymInt inputs, the trace has " +
                     std::to_string(sym_inputs.size()));
  for (std::size_t i = 0; i < sym_inputs.size(); ++i) {
    const SymInputSpec& spec = sym_inputs[i];
    const auto& [path, value] = symints[i];
    if (path != spec.path) throw TraceError("SymInt input '" + spec.path + "' is '" + path + "' in this call");
    if (const std::string* s = spec.expr.symbol_name()) {
      auto [it, inserted] = b.try_emplace(*s, value);
      if (!inserted && it->second != value)
        throw TraceError("SymInt '" + path + "' is " + std::to_string(value) + " but the trace requires it to equal " +
                         *s + " = " + std::to_string(it->second));
    }
  }
  for (std::size_t i = 0; i < sym_inputs.size(); ++i) {
    if (sym_inputs[i].expr.symbol_name()) continue;
    if (sym_inputs[i].expr.evaluate(b) != symints[i].second)
      throw TraceError("guard failed: SymInt '" + sym_inputs[i].path + "' was " + sym_inputs[i].expr.str() +
                       " when traced, now " + std::to_string(symints[i].second));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)  // constants and compound dims
    for (std::size_t d = 0; d < tensors[i].second->shape.size(); ++d) {
      const SymExpr& want = inputs[i].type.shape[d];
      if (single_symbol(want)) continue;
      const int64_t actual = call_dim(tensors[i].second->shape[d]);
      const std::optional<int64_t> fixed = constant_of(want);
      if ((fixed ? *fixed : want.evaluate(b)) != actual)
        throw TraceError("input '" + inputs[i].path + "' dim " + std::to_string(d) + " is " + std::to_string(actual) +
                         ", the trace was specialised to " + want.str());
    }
  for (const auto& bound : dim_bounds) {
    const int64_t l = bound.lhs.evaluate(b), r = bound.rhs.evaluate(b);
    if (l > r)
      throw TraceError("the call's sizes break a guard of the trace: " + bound.lhs.str() + " <= " + bound.rhs.str() +
                       " (here " + std::to_string(l) + " > " + std::to_string(r) + ")");
  }
  if (values.size() != guards.size())
    throw TraceError("call has " + std::to_string(values.size()) + " plain-value inputs, the trace has " +
                     std::to_string(guards.size()));
  for (std::size_t i = 0; i < guards.size(); ++i)
    if (values[i].path != guards[i].path || values[i].value != guards[i].value)
      throw TraceError("guard failed: '" + guards[i].path + "' was " + guards[i].value + " when traced, now " +
                       values[i].value);
  return b;
}

}  // namespace npucache
