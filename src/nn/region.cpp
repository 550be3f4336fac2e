// Compile regions while a trace records (npucache/region.h).
//
// A call is looked up by its signature in the trace's bodies. Symbols in
// the signature are numbered by first appearance ("c0", "c1", ...), so
// layers whose KV caches have sizes of their own (dynamic shapes) share a
// signature. A new signature traces the body in a TraceState of its own:
// the region's module binds its parameters by their names relative to it,
// the arguments become input placeholders of the call's (resolved) types,
// and the symbol environment is the method's (copied in and back), so
// sizes the body equates, specialises or bounds guard the method as a flat
// trace would. The body keeps those decisions over the numbers; a later
// call replays them on its own symbols in the environment, and when one
// does not hold for its sizes (an undo log takes them back), traces the
// body anew. Either way
// the method's graph gets one region_call node whose operands are the
// argument values, then this call's module tensors named as the body's
// parameter placeholders; its "bind" holds the call's symbols in the
// signature's order until finish() (trace.cpp) turns it into the values of
// the body's symbols.
#include <npucache/error.h>
#include <npucache/ir/hash.h>
#include <npucache/region.h>

#include "nn/detail/tensor_impl.h"
#include "nn/detail/trace_state.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <typeinfo>

namespace npucache::detail {

namespace {

// NPUCACHE_CHECK_REGIONS set (and not "0"): every call traces its body.
bool check_every_call() {
  const char* e = std::getenv("NPUCACHE_CHECK_REGIONS");
  return e != nullptr && *e != '\0' && std::string(e) != "0";
}

// The value whose storage `v` is, through the views lowering makes
// (compiler/passes/lower.cpp: a reshape, an update in place, a send).
ValueId storage_root(const Graph& g, ValueId v) {
  while (true) {
    const Node& n = g.node(v);
    if ((n.op != Op::reshape && n.op != Op::buffer_update && n.op != Op::send) || n.inputs.empty()) return v;
    v = n.inputs[0];
  }
}

struct RegionCallState : FlattenVisitor {
  TraceState* outer = nullptr;
  const nn::Module* module = nullptr;
  std::string key;
  std::string name;
  std::vector<ValueId> args;
  std::vector<TensorType> arg_types;
  // The call's symbols in order of first appearance, and their numbers;
  // `exact` when a size is a compound expression (the signature then
  // names the symbols themselves).
  std::vector<SymExpr> symbols;
  std::map<std::string, SymExpr> numbered;  // symbol -> "c<i>"
  bool exact = false;
  std::unique_ptr<TraceState> body;
  // NPUCACHE_CHECK_REGIONS: the body of this call's signature, traced
  // before; this call's body is traced too and must be the same.
  std::shared_ptr<RegionBody> check;
  std::size_t next_input = 0;
  bool collecting = true;
  // Set after a body whose result is a view of an operand: the arguments
  // are given back their values of the method's trace (traced inline).
  bool restoring = false;

  // `e` over the numbers (numbering new symbols).
  std::string number(const SymExpr& e) {
    if (e.try_constant()) return e.str();
    if (const std::string* s = e.symbol_name()) {
      auto it = numbered.find(*s);
      if (it == numbered.end()) {
        it = numbered.emplace(*s, SymExpr::symbol("c" + std::to_string(numbered.size()))).first;
        symbols.push_back(e);
      }
      return it->second.str();
    }
    exact = true;
    for (const auto& s : e.symbols())
      if (!numbered.count(s)) {
        numbered.emplace(s, SymExpr::symbol("c" + std::to_string(numbered.size())));
        symbols.push_back(SymExpr::symbol(s));
      }
    return e.str();
  }

  // A text of the key as its length and its bytes: a path, a value or a
  // name holding the key's separators ("a'|varg1[1]='b", one string) never
  // reads as two pieces ("a", then "b").
  void text(const std::string& s) {
    key += std::to_string(s.size());
    key += ':';
    key += s;
  }

  void tensor(const std::string& path, Tensor& t) override {
    if (collecting) {
      const ValueId v = outer->value_of(t, "argument '" + path + "' of a compile region");
      TensorType type = outer->graph.node(v).type;
      type.shape = outer->shapes.resolve(type.shape);
      key += "|t";
      text(path);
      key += std::string(dtype_name(type.dtype)) + "[";
      for (const auto& d : type.shape) key += number(d) + ",";
      key += "]";
      args.push_back(v);
      arg_types.push_back(std::move(type));
      return;
    }
    if (restoring) {
      t = outer->wrap(args.at(next_input++));
      return;
    }
    const ValueId v = body->graph.add_placeholder(PlaceholderKind::input, path, arg_types.at(next_input++));
    t = body->wrap(v);
  }
  // A list's length: [[], []] and [[]] flatten to no element either way.
  std::size_t sequence_size(const std::string& path, std::size_t current) override {
    if (collecting) {
      key += "|n";
      text(path);
      key += std::to_string(current);
    }
    return current;
  }
  void value(const std::string& path, const std::string& repr) override {
    if (!collecting) return;
    key += "|v";
    text(path);
    text(repr);
  }
  void symint(const std::string& path, SymInt& s) override {
    if (!collecting) return;
    key += "|s";
    text(path);
    key += number(outer->shapes.resolve(s.expr()));
  }

  // The module's tensors by name, read once per call (recorded() then
  // record()); `out` receives the structure for the key.
  std::map<std::string, Tensor> by_name;
  bool have_tensors = false;
  const std::map<std::string, Tensor>& module_tensors(std::string* out) {
    if (have_tensors && !out) return by_name;
    by_name.clear();
    have_tensors = true;
    for (const auto& [n, t] : module->named_parameters()) by_name.emplace(n, t);
    for (const auto& [n, t] : module->named_buffers()) by_name.emplace("#" + n, t);
    if (out) {
      // A tensor under two names (tied weights) is one placeholder of the
      // body: the second name says which earlier one it is, so tied and
      // untied modules of one class have signatures of their own.
      std::map<const TensorImpl*, std::size_t> first;
      std::size_t index = 0;
      for (const auto& [n, t] : by_name) {
        *out += "|m" + std::to_string(n.size()) + ":" + n;
        *out += t.defined() ? type_str(t.impl()->type) : "-";
        if (t.defined()) {
          const auto [it, fresh] = first.emplace(t.impl().get(), index);
          if (!fresh) *out += "=" + std::to_string(it->second);
        }
        ++index;
      }
    }
    return by_name;
  }

  // `e` over the numbers with this call's symbols (the map built once).
  std::map<std::string, SymExpr> to_mine;
  SymExpr mine(const SymExpr& e) {
    if (to_mine.size() != symbols.size())
      for (std::size_t i = to_mine.size(); i < symbols.size(); ++i)
        to_mine.emplace("c" + std::to_string(i), symbols[i]);
    return e.substitute(to_mine);
  }

  // Replays the body's size decisions on this call's symbols; false (and
  // the method's environment unchanged: the decisions are undone) when
  // one does not hold.
  bool replay(const RegionBody& b) {
    if (!b.replayable || b.arg_symbols.size() != symbols.size()) return false;
    ShapeEnv& env = outer->shapes;
    env.begin_undo();
    bool holds = true;
    try {
      for (const auto& [lhs, rhs] : b.decisions)
        if (holds && !env.unify(mine(lhs), mine(rhs))) holds = false;
      for (const auto& bound : b.bounds)
        if (holds && !env.require_le(mine(bound.lhs), mine(bound.rhs))) holds = false;
    } catch (...) {
      env.end_undo(true);
      throw;
    }
    env.end_undo(!holds);
    return holds;
  }

  ValueId storage_of(ValueId v) const { return storage_root(outer->graph, v); }

  // Two arguments of one storage, or an argument of the storage of one of
  // the module's tensors already in the trace. The body takes each as an
  // operand of its own, so an update in place of one and a read of the
  // other would be ordered by nothing once the call is linked onto one
  // buffer: such a call is traced inline.
  bool shares_storage() {
    std::set<ValueId> storages;
    for (ValueId a : args)
      if (!storages.insert(storage_of(a)).second) return true;
    for (const auto& [n, tensor] : module_tensors(nullptr)) {
      if (!tensor.defined()) continue;
      const auto it = outer->bound.find(tensor.impl().get());
      if (it != outer->bound.end() && storages.count(storage_of(it->second))) return true;
    }
    return false;
  }

  Tensor record(const RegionBody& b) {
    std::vector<ValueId> in = args;
    const auto& tensors = module_tensors(nullptr);
    for (const std::string& p : b.params) {
      auto it = tensors.find(p);
      if (it == tensors.end()) it = tensors.find("#" + p);
      if (it == tensors.end())  // the key holds the module's names: unreachable
        throw TraceError("compile region " + b.name + ": the module has no tensor '" + p + "'");
      if (!it->second.defined()) throw TraceError("compile region " + b.name + ": its tensor '" + p + "' is undefined");
      const TensorImpl* impl = it->second.impl().get();
      if (!outer->module_tensors.count(impl) && !outer->bound.count(impl))
        throw TraceError("compile region " + b.name + ": its module is not a registered submodule of the traced " +
                         "module (its tensor '" + p + "' has no name there); register it with register_module, " +
                         "or call its method as plain code");
      in.push_back(outer->value_of(it->second, "parameter '" + p + "' of compile region " + b.name));
    }
    std::vector<SymExpr> out_shape;
    const bool own = symbols == b.arg_symbols;
    for (const auto& d : (own ? b.out : b.out_numbered).shape)
      out_shape.push_back(outer->shapes.resolve(own ? d : mine(d)));
    Attrs a{{"region", b.id},           {"num_args", static_cast<int64_t>(b.num_args)},
            {"out_dtype", b.out.dtype}, {"out_shape", std::move(out_shape)},
            {"mutates", b.mutates},     {"collectives", b.collectives},
            {"bind", symbols}};  // finish() binds the body's symbols
    const ValueId v = outer->graph.add_node(Op::region_call, std::move(in), std::move(a), &outer->shapes);
    return outer->wrap(v);
  }

  ~RegionCallState() override {
    if (body && current_trace() == body.get()) set_current_trace(outer);
  }

  // When a body of this call's signature was traced (and its size
  // decisions hold for this call): records the call into `out`.
  // The rest of the signature, after the arguments: the module's tensors,
  // and the symbols themselves when a size is compound.
  void complete_key() {
    module_tensors(&key);
    if (exact)
      for (const auto& s : symbols) key += "|" + s.str();
  }

  bool recorded(Tensor& out) {
    auto it = outer->region_bodies.find(key);
    if (it == outer->region_bodies.end()) return false;
    if (check_every_call()) {
      check = it->second;
      return false;
    }
    if (it->second->arg_symbols != symbols && !replay(*it->second)) return false;
    out = record(*it->second);
    return true;
  }

  void begin_body(const std::string& method_name) {
    name = short_type_name(module->type_name()) + "." + (method_name.empty() ? "forward" : method_name);
    body = std::make_unique<TraceState>(module, outer->options);
    body->shapes = outer->shapes;
    body->region = name;
    body->unlowerable = outer->unlowerable;
    collecting = false;
    set_current_trace(body.get());
  }

  // The body traced: records the call into `out`; false (the body
  // dropped, the method's trace current again) when its result is a view
  // of one of its operands.
  bool end_body(const Tensor& result, Tensor& out);
};

// The placeholder a value updated in place roots at (through views and
// earlier updates), or -1.
ValueId root_placeholder(const Graph& g, ValueId v) {
  while (true) {
    const Node& n = g.node(v);
    if (n.op == Op::placeholder) return v;
    if ((n.op != Op::reshape && n.op != Op::buffer_update && n.op != Op::send) || n.inputs.empty()) return -1;
    v = n.inputs[0];
  }
}

bool RegionCallState::end_body(const Tensor& result, Tensor& call_result) {
  RegionCallState& m = *this;
  if (!result.defined()) throw TraceError("compile region " + m.name + " returned an undefined tensor");
  const ValueId out = m.body->value_of(result, "the result of compile region " + m.name);
  Graph& g = m.body->graph;
  if (g.node(storage_root(g, out)).op == Op::placeholder) {
    m.outer->inline_signatures.insert(m.key);  // later calls of it go inline at once
    // The result is an argument, a parameter or a buffer, or a view of
    // one (a cache updated in place and returned): a region's result is
    // a buffer of its own to the calling program, which would order the
    // caller's later updates of the operand and its reads of the result
    // by nothing. Traced inline, as with regions off; the method's size
    // decisions are its own again (the body's are dropped with it).
    set_current_trace(m.outer);
    return false;
  }
  g.set_outputs({out});
  if (m.check) {
    // The body traced again (NPUCACHE_CHECK_REGIONS): equal up to symbol
    // names, or a member the signature does not see changed it.
    m.outer->shapes = m.body->shapes;
    set_current_trace(m.outer);
    if (canonical_hash(g) != canonical_hash(m.check->graph))
      throw TraceError("compile region " + m.name + ": a module of class " + m.module->type_name() +
                       " computes another body than the first module of its signature (NPUCACHE_CHECK_REGIONS): " +
                       "a plain member changes what the method computes; pass it to the method as a plain value " +
                       "or name it in type_name()");
    call_result = m.record(*m.check);
    return true;
  }
  auto b = std::make_shared<RegionBody>();
  b->id = "p" + std::to_string(m.outer->region_list.size());
  b->name = m.name;
  b->num_args = m.args.size();
  // Operand numbers: the inputs in order, then the parameters and buffers.
  std::map<ValueId, int64_t> operand;
  int64_t next = static_cast<int64_t>(b->num_args);
  int64_t input = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::placeholder) continue;
    if (n.kind == PlaceholderKind::input) {
      operand[static_cast<ValueId>(i)] = input++;
    } else {
      operand[static_cast<ValueId>(i)] = next++;
      b->params.push_back(n.target);
    }
  }
  for (const Node& n : g.nodes()) {
    if (n.op == Op::buffer_update) {
      const ValueId r = root_placeholder(g, n.inputs[0]);
      if (r >= 0) b->mutates.push_back(operand.at(r));
    }
    if (op_info(n.op).cls == OpClass::comm && n.op != Op::group_rank) {
      if (!b->collectives.empty()) b->collectives += " ";
      const AttrValue* group = n.attrs.find("group");
      const AttrValue* peer = n.attrs.find("peer");
      b->collectives += std::string(op_name(n.op)) + ":" + (group ? attr_str(*group) : peer ? attr_str(*peer) : "");
    }
  }
  std::sort(b->mutates.begin(), b->mutates.end());
  b->mutates.erase(std::unique(b->mutates.begin(), b->mutates.end()), b->mutates.end());
  // What the body decided about sizes, over the signature's numbers.
  b->arg_symbols = m.symbols;
  b->replayable = !m.exact;
  auto over_numbers = [&](const SymExpr& e, SymExpr& into) {
    for (const auto& sym : e.symbols())
      if (!m.numbered.count(sym)) return false;
    into = e.substitute(m.numbered);
    return true;
  };
  const ShapeEnv& before = m.outer->shapes;
  const ShapeEnv& after = m.body->shapes;
  for (const auto& [sym, e] : after.substitutions()) {
    if (before.substitutions().count(sym)) continue;
    std::pair<SymExpr, SymExpr> d;
    b->replayable = b->replayable && over_numbers(SymExpr::symbol(sym), d.first) && over_numbers(e, d.second);
    b->decisions.push_back(std::move(d));
  }
  for (std::size_t i = before.bounds().size(); i < after.bounds().size(); ++i) {
    DimBound d;
    b->replayable =
        b->replayable && over_numbers(after.bounds()[i].lhs, d.lhs) && over_numbers(after.bounds()[i].rhs, d.rhs);
    b->bounds.push_back(std::move(d));
  }
  b->out = g.node(out).type;
  b->out.shape = after.resolve(b->out.shape);
  b->out_numbered = b->out;
  for (auto& d : b->out_numbered.shape) b->replayable = b->replayable && over_numbers(SymExpr(d), d);
  // Sizes are decided in the method's symbol environment.
  m.outer->shapes = m.body->shapes;
  set_current_trace(m.outer);
  b->graph = std::move(g);
  if (!m.outer->region_bodies.count(m.key)) m.outer->region_bodies[m.key] = b;
  m.outer->region_list.push_back(b);
  call_result = m.record(*b);
  return true;
}

}  // namespace

Tensor run_region(const nn::Module& module, const unsigned char* method, std::size_t method_size,
                  const std::function<void(FlattenVisitor&)>& visit, const std::function<Tensor()>& run,
                  const std::function<std::string()>& method_name) {
  TraceState* t = current_trace();
  if (t == nullptr || t->module == nullptr || !t->options.regions || t->lazy || !t->region.empty()) return run();
  RegionCallState call;
  call.outer = t;
  call.module = &module;
  // The module's C++ class too: a pointer to a virtual method names a slot,
  // the same for every class that overrides it, and type_name() may be one
  // name for several classes. (The key lives only while this trace does.)
  call.key = module.type_name() + "|" + std::to_string(reinterpret_cast<std::uintptr_t>(&typeid(module))) + "|";
  char hex[3];
  for (std::size_t i = 0; i < method_size; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", method[i]);
    call.key += hex;
  }
  visit(call);
  call.complete_key();
  if (call.shares_storage() || t->inline_signatures.count(call.key)) return run();
  Tensor out;
  if (call.recorded(out)) return out;
  call.begin_body(method_name());
  visit(call);
  if (call.end_body(run(), out)) return out;
  call.restoring = true;
  call.next_input = 0;
  visit(call);
  return run();
}

}  // namespace npucache::detail
