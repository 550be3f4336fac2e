// Compile regions while a trace records (npucache/region.h).
//
// A call is looked up by its signature in the trace's bodies. A new
// signature traces the body in a TraceState of its own: the region's
// module binds its parameters by their names relative to it, the
// arguments become input placeholders of the call's (resolved) types, and
// the symbol environment is the method's (copied in and back), so sizes
// the body equates or specialises guard the method as a flat trace would.
// Either way the method's graph gets one region_call node whose operands
// are the argument values, then the values of this call's module tensors
// named as the body's parameter placeholders.
#include <npucache/error.h>
#include <npucache/ir/hash.h>
#include <npucache/region.h>

#include "nn/detail/tensor_impl.h"
#include "nn/detail/trace_state.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <typeinfo>

namespace npucache::detail {

struct RegionCall::Impl : FlattenVisitor {
  TraceState* outer = nullptr;
  const nn::Module* module = nullptr;
  std::string key;
  std::string name;
  std::vector<ValueId> args;
  std::vector<TensorType> arg_types;
  std::unique_ptr<TraceState> body;
  // NPUCACHE_CHECK_REGIONS: the body of this call's signature, traced
  // before; this call's body is traced too and must be the same.
  std::shared_ptr<RegionBody> check;
  std::size_t next_input = 0;
  bool collecting = true;

  void tensor(const std::string& path, Tensor& t) override {
    if (collecting) {
      const ValueId v = outer->value_of(t, "argument '" + path + "' of a compile region");
      TensorType type = outer->graph.node(v).type;
      type.shape = outer->shapes.resolve(type.shape);
      key += "|t" + path + ":" + type_str(type);
      args.push_back(v);
      arg_types.push_back(std::move(type));
      return;
    }
    const ValueId v = body->graph.add_placeholder(PlaceholderKind::input, path, arg_types.at(next_input++));
    t = body->wrap(v);
  }
  void value(const std::string& path, const std::string& repr) override {
    if (collecting) key += "|v" + path + "=" + repr;
  }
  void symint(const std::string& path, SymInt& s) override {
    if (collecting) key += "|s" + path + "=" + outer->shapes.resolve(s.expr()).str();
  }

  // The module's tensors by name; `out` receives the structure for the key.
  std::map<std::string, Tensor> module_tensors(std::string* out) const {
    std::map<std::string, Tensor> by_name;
    for (const auto& [n, t] : module->named_parameters()) by_name.emplace(n, t);
    for (const auto& [n, t] : module->named_buffers()) by_name.emplace("#" + n, t);
    if (out)
      for (const auto& [n, t] : by_name) *out += "|m" + n + ":" + (t.defined() ? type_str(t.impl()->type) : "-");
    return by_name;
  }

  Tensor record(const RegionBody& b) {
    std::vector<ValueId> in = args;
    const auto tensors = module_tensors(nullptr);
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
    TensorType out = b.graph.node(b.graph.outputs().front()).type;
    out.shape = outer->shapes.resolve(out.shape);
    Attrs a{{"region", b.id},
            {"num_args", static_cast<int64_t>(b.num_args)},
            {"out_dtype", out.dtype},
            {"out_shape", std::vector<SymExpr>(out.shape.begin(), out.shape.end())},
            {"mutates", b.mutates},
            {"collectives", b.collectives},
            {"bind", std::vector<SymExpr>{}}};  // finish() binds the body's symbols
    const ValueId v = outer->graph.add_node(Op::region_call, std::move(in), std::move(a), &outer->shapes);
    return outer->wrap(v);
  }
};

namespace {

// NPUCACHE_CHECK_REGIONS set (and not "0"): every call traces its body.
bool check_every_call() {
  const char* e = std::getenv("NPUCACHE_CHECK_REGIONS");
  return e != nullptr && *e != '\0' && std::string(e) != "0";
}

}  // namespace

bool RegionCall::active() {
  const TraceState* t = current_trace();
  return t != nullptr && t->module != nullptr && t->options.regions && !t->lazy && t->region.empty();
}

RegionCall::RegionCall(const nn::Module& module, const unsigned char* method, std::size_t method_size)
    : impl_(std::make_unique<Impl>()) {
  impl_->outer = current_trace();
  impl_->module = &module;
  char hex[3];
  // The module's C++ class too: a pointer to a virtual method names a slot,
  // the same for every class that overrides it, and type_name() may be one
  // name for several classes. (The key lives only while this trace does.)
  impl_->key = module.type_name() + "|" + std::to_string(reinterpret_cast<std::uintptr_t>(&typeid(module))) + "|";
  for (std::size_t i = 0; i < method_size; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", method[i]);
    impl_->key += hex;
  }
}

RegionCall::~RegionCall() {
  if (impl_->body && current_trace() == impl_->body.get()) set_current_trace(impl_->outer);
}

FlattenVisitor& RegionCall::arguments() { return *impl_; }

bool RegionCall::recorded(Tensor& out) {
  impl_->module_tensors(&impl_->key);
  auto it = impl_->outer->region_bodies.find(impl_->key);
  if (it == impl_->outer->region_bodies.end()) return false;
  if (check_every_call()) {
    impl_->check = it->second;
    return false;
  }
  out = impl_->record(*it->second);
  return true;
}

FlattenVisitor& RegionCall::begin_body(const std::string& method_name) {
  Impl& m = *impl_;
  m.name = short_type_name(m.module->type_name()) + "." + (method_name.empty() ? "forward" : method_name);
  m.body = std::make_unique<TraceState>(m.module, m.outer->options);
  m.body->shapes = m.outer->shapes;
  m.body->region = m.name;
  m.body->unlowerable = m.outer->unlowerable;
  m.collecting = false;
  set_current_trace(m.body.get());
  return m;
}

namespace {

// The placeholder a value updated in place roots at (through views and
// earlier updates), or -1.
ValueId root_placeholder(const Graph& g, ValueId v) {
  while (true) {
    const Node& n = g.node(v);
    if (n.op == Op::placeholder) return v;
    if ((n.op != Op::reshape && n.op != Op::buffer_update) || n.inputs.empty()) return -1;
    v = n.inputs[0];
  }
}

}  // namespace

Tensor RegionCall::end_body(const Tensor& result) {
  Impl& m = *impl_;
  if (!result.defined()) throw TraceError("compile region " + m.name + " returned an undefined tensor");
  const ValueId out = m.body->value_of(result, "the result of compile region " + m.name);
  Graph& g = m.body->graph;
  g.set_outputs({out});
  if (m.check) {
    // The key resolves the arguments' types as this body's placeholders,
    // so an honest body hashes as the first one.
    m.outer->shapes = m.body->shapes;
    set_current_trace(m.outer);
    if (canonical_hash(g) != canonical_hash(m.check->graph))
      throw TraceError("compile region " + m.name + ": a module of class " + m.module->type_name() +
                       " computes another body than the first module of its signature (NPUCACHE_CHECK_REGIONS): " +
                       "a plain member changes what the method computes; pass it to the method as a plain value " +
                       "or name it in type_name()");
    return m.record(*m.check);
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
  // Sizes are decided in the method's symbol environment.
  m.outer->shapes = m.body->shapes;
  set_current_trace(m.outer);
  b->graph = std::move(g);
  m.outer->region_bodies[m.key] = b;
  m.outer->region_list.push_back(b);
  return m.record(*b);
}

}  // namespace npucache::detail
