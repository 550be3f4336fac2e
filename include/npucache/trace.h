// Tracing a module method into a Graph.
//
// trace_method(module, &Model::method, options, args...) calls the method
// once with tracing tensors standing for the tensors in `args`, and returns
// the recorded graph, the input signature a later call must match, and the
// output paths.
//
// Structured inputs: a user struct exposes its fields through a visit
// member, as Boost.Serialization's serialize does:
//   struct InputMeta {
//     Tensor data; bool is_prompt;
//     template <class V> void visit(V& v) { v("data", data); v("is_prompt", is_prompt); }
//   };
// std::vector<T> of flattenable T works too. Tensors become graph inputs;
// plain values (bool, integers, floating, std::string) become guards: the
// trace is specialised to them. Any other type is a TraceError naming the
// argument path and its type.
//
// Dynamic shapes (options.dynamic): every input dim of size >= 2 becomes a
// fresh symbol; dims are equated or specialised to constants only where an
// op requires it (matching a weight's size, a constant head dim), each
// recorded as a guard. Static: all dims are constants. Single dims are
// marked dynamic or static with options.dynamic_dims / static_dims.
#pragma once

#include <npucache/export.h>

#include <charconv>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/tensor.h>

namespace npucache {

// A host integer a method takes as a size or a length -- a decode step's
// actual KV length, as torch's SymInt. A plain integer argument is a guard
// (the trace is specialised to its value); a SymInt is traced as a symbol
// under dynamic shapes (dynamic=true, or automatic dynamic once its value
// changed), so one program serves every value: ops take it where they take
// a SymExpr (slice bounds, ops::fused_attention's kv_len). Static traces
// specialise it like a plain integer. In reduce-overhead, a SymInt used
// only as an updatable operator parameter (kv_len) is patched at each
// replay instead of capturing again.
class NPUCACHE_API SymInt {
 public:
  SymInt(int64_t value = 0) : expr_(value) {}  // NOLINT(google-explicit-constructor): integers convert
  explicit SymInt(SymExpr expr) : expr_(std::move(expr)) {}
  const SymExpr& expr() const { return expr_; }
  operator SymExpr() const { return expr_; }  // NOLINT(google-explicit-constructor)
  // The value; while a dynamic trace runs it is a symbol, and reading it
  // on the host would be a data-dependent decision: TraceError.
  int64_t value() const;

 private:
  SymExpr expr_;
};

// Receives the leaves of a flattened value.
class NPUCACHE_API FlattenVisitor {
 public:
  virtual ~FlattenVisitor() = default;
  virtual void tensor(const std::string& path, Tensor& t) = 0;
  virtual void value(const std::string& path, const std::string& repr) = 0;
  // A SymInt leaf: a plain value unless the visitor says otherwise.
  virtual void symint(const std::string& path, SymInt& s) { value(path, std::to_string(s.value())); }
  // The number of elements the vector at `path` must have before it is
  // visited (a visitor that builds values sizes them; others keep them).
  virtual std::size_t sequence_size(const std::string& path, std::size_t current) {
    (void)path;
    return current;
  }
};

namespace detail {
[[noreturn]] NPUCACHE_API void throw_not_flattenable(const std::string& path, const char* mangled_type);
// The shortest text that reads back as exactly `value` ("1e-07", "0.1",
// "-0", "inf"): a guard on a plain floating value compares every bit, so
// 1e-7 and 1e-9 are different guards (six-digit text made them equal).
template <class F>
std::string exact_float_text(F value) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, r.ptr);
}
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
}  // namespace detail

// Adapts a struct's visit(v) calls ("v(name, field)") to a FlattenVisitor.
class FieldAdaptor {
 public:
  FieldAdaptor(FlattenVisitor& v, std::string prefix) : v_(v), prefix_(std::move(prefix)) {}
  template <class T>
  void operator()(const char* name, T& field);

 private:
  FlattenVisitor& v_;
  std::string prefix_;
};

template <class T>
concept Visitable = requires(T& t, FieldAdaptor& a) {
  t.visit(a);
};

template <class T>
void flatten(const std::string& path, T& value, FlattenVisitor& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    v.tensor(path, value);
  } else if constexpr (std::is_same_v<T, SymInt>) {
    v.symint(path, value);
  } else if constexpr (detail::is_vector<T>::value) {
    if (const std::size_t n = v.sequence_size(path, value.size()); n != value.size()) value.resize(n);
    for (std::size_t i = 0; i < value.size(); ++i) flatten(path + "[" + std::to_string(i) + "]", value[i], v);
  } else if constexpr (std::is_same_v<T, bool>) {
    v.value(path, value ? "true" : "false");
  } else if constexpr (std::is_integral_v<T>) {
    v.value(path, std::to_string(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    v.value(path, detail::exact_float_text(value));
  } else if constexpr (std::is_same_v<T, std::string>) {
    v.value(path, "'" + value + "'");
  } else if constexpr (Visitable<T>) {
    FieldAdaptor a(v, path);
    value.visit(a);
  } else {
    detail::throw_not_flattenable(path, typeid(T).name());
  }
}

template <class T>
void FieldAdaptor::operator()(const char* name, T& field) {
  flatten(prefix_ + "." + name, field, v_);
}

struct TraceOptions {
  bool dynamic = true;
  std::string method_name = "forward";  // names the graph and cache entries
  std::vector<std::string> arg_names;   // default arg0, arg1, ...
  // Input dims that are symbolic whatever `dynamic` says (marked dynamic,
  // or turned dynamic by automatic dynamic), as (input path, dim). Such a
  // dim is symbolic even at size 0 or 1, so the program serves every size
  // (the trace's hint is then 2; a call the graph does not fit fails to
  // bind). Pairs naming no input dim are ignored.
  std::vector<std::pair<std::string, int64_t>> dynamic_dims;
  // Input dims that stay constant whatever `dynamic` says.
  std::vector<std::pair<std::string, int64_t>> static_dims;
  // Why an op cannot be lowered by the compile the trace is for ("" when
  // it can; unset: every op can): recording one is a graph break
  // (GraphBreakError). compile() sets it under fullgraph=false.
  std::function<std::string(Op)> unlowerable;
  // Compile regions (nn/region.h): a call of nn::compile_region records a
  // region_call node and traces the region's body once per signature.
  // Off: the region's code is traced inline at every call, as plain code.
  bool regions = true;
};

struct InputSpec {
  std::string path;
  TensorType type;  // symbolic dims under dynamic shapes
};

struct GuardSpec {
  std::string path;   // a plain-value input ("arg0.is_prompt")
  std::string value;  // its traced value ("true")
};

// A SymInt input: a symbol (dynamic) or the constant it was specialised to.
struct SymInputSpec {
  std::string path;
  SymExpr expr;
};

// A size relation the trace relied on: lhs <= rhs (a slice's end within
// its dim), checked when a call binds the sizes.
struct DimBound {
  SymExpr lhs, rhs;
  friend bool operator==(const DimBound&, const DimBound&) = default;
};

struct FlatArgs;

struct NPUCACHE_API InputSignature {
  std::vector<InputSpec> inputs;
  std::vector<GuardSpec> guards;
  std::vector<SymInputSpec> sym_inputs;
  // Dims the trace equated or specialised ("s0 == 16") and bounded
  // ("4 <= s0"), as text.
  std::vector<std::string> shape_guards;
  // The bounds, checked by bind().
  std::vector<DimBound> dim_bounds;

  // Checks a call's flattened tensors and values against the signature and
  // returns the symbol values it binds. Throws TraceError naming the first
  // mismatch (count, path, dtype, rank, dim, guard value).
  SymBindings bind(const std::vector<std::pair<std::string, TensorType>>& tensors, const std::vector<GuardSpec>& values,
                   const std::vector<std::pair<std::string, int64_t>>& symints = {}) const;
  // The same for a flattened call (eager tensors), without copying types.
  SymBindings bind(const FlatArgs& args) const;

 private:
  NPUCACHE_LOCAL SymBindings bind_refs(const std::vector<std::pair<const std::string*, const TensorType*>>& tensors,
                                       const std::vector<GuardSpec>& values,
                                       const std::vector<std::pair<std::string, int64_t>>& symints) const;
};

struct TraceResult {
  Graph graph;
  InputSignature signature;
  std::vector<std::string> output_paths;
  std::string name;  // "Model.method(arg0, arg1)"
  // The bodies of the compile regions `graph` calls, by the canonical hash
  // (Hash128::hex) that their region_call nodes name. A body's inputs are
  // the call's first num_args operands, its parameter and buffer
  // placeholders (named relative to the region's module) the rest, in
  // order; its symbols are the graph's.
  std::map<std::string, Graph> regions;
};

namespace detail {
struct TraceState;
// Whether a trace records on the calling thread: a compiled method's first
// call tracing it, or a method split at graph breaks recording its next
// piece. A compiled method called then runs as part of the code being
// recorded.
NPUCACHE_API bool trace_active();
}  // namespace detail

// Activates tracing on the calling thread for its lifetime.
class NPUCACHE_API TraceSession {
 public:
  TraceSession(const nn::Module& module, const TraceOptions& options);
  ~TraceSession();
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;

  Tensor input(const std::string& path, const Tensor& example);
  void guard(const std::string& path, const std::string& value);
  // A SymInt input: a symbol under dynamic shapes (or when `path` dim 0 is
  // marked dynamic), else the constant value (recorded in the signature).
  SymInt sym_input(const std::string& path, const SymInt& example);
  // Validates and returns the graph; throws TraceError when `outputs` holds
  // no traced tensor.
  TraceResult finish(const std::vector<std::pair<std::string, Tensor>>& outputs, const std::string& name);

 private:
  std::unique_ptr<detail::TraceState> state_;
};

// Collects the tensors and plain values of an argument list, flattened.
struct NPUCACHE_API FlatArgs : FlattenVisitor {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<GuardSpec> values;
  std::vector<std::pair<std::string, int64_t>> symints;
  void tensor(const std::string& path, Tensor& t) override { tensors.emplace_back(path, t); }
  void value(const std::string& path, const std::string& repr) override { values.push_back({path, repr}); }
  void symint(const std::string& path, SymInt& s) override { symints.emplace_back(path, s.value()); }
};

NPUCACHE_API std::string arg_name(const TraceOptions& options, std::size_t i);

namespace detail {
struct MemberFunctionName {
  std::string name;    // "prompt"; empty when the code has no symbol for it
  std::string symbol;  // "ns::Model::prompt(Input const&)"
};
// `pmf` holds the bytes of a pointer to member function of the object at
// `object` (the most derived class the pointer belongs to).
NPUCACHE_API MemberFunctionName member_function_name(const void* object, const unsigned char* pmf, std::size_t size);
// "ns::Model<int>" -> "Model"
NPUCACHE_API std::string short_type_name(const std::string& qualified);
}  // namespace detail

// The name of the member function `method` of `module`'s class, from the
// code itself: "prompt" for &Model::prompt (a virtual method is named by
// the override `module` runs). Empty when the binary has no symbol for it
// (stripped): set a method name explicitly then.
template <class M, class R, class... P>
detail::MemberFunctionName method_name(const M& module, R (M::*method)(P...)) {
  unsigned char bytes[sizeof method];
  std::memcpy(bytes, &method, sizeof method);
  return detail::member_function_name(static_cast<const void*>(&module), bytes, sizeof method);
}
template <class M, class R, class... P>
detail::MemberFunctionName method_name(const M& module, R (M::*method)(P...) const) {
  unsigned char bytes[sizeof method];
  std::memcpy(bytes, &method, sizeof method);
  return detail::member_function_name(static_cast<const void*>(&module), bytes, sizeof method);
}

namespace detail {
// trace_method_with_result for a member function of either constness
// (`Method` is R (M::*)(P...) or R (M::*)(P...) const).
template <class R, class... P, class M, class Method, class... A>
std::pair<TraceResult, R> trace_member(M& module, Method method, const TraceOptions& options, A&&... args) {
  static_assert(std::is_base_of_v<nn::Module, M>, "trace_method accepts only methods of an nn::Module instance");
  static_assert(sizeof...(P) == sizeof...(A), "wrong number of arguments for the method");
  TraceSession session(module, options);
  std::tuple<std::decay_t<P>...> copies(std::forward<A>(args)...);
  struct Inputs : FlattenVisitor {
    TraceSession& s;
    explicit Inputs(TraceSession& session) : s(session) {}
    void tensor(const std::string& path, Tensor& t) override { t = s.input(path, t); }
    void value(const std::string& path, const std::string& repr) override { s.guard(path, repr); }
    void symint(const std::string& path, SymInt& v) override { v = s.sym_input(path, v); }
  } in(session);
  std::size_t i = 0;
  std::apply([&](auto&... a) { (flatten(arg_name(options, i++), a, in), ...); }, copies);
  R result = std::apply([&](auto&... a) -> R { return (module.*method)(a...); }, copies);
  FlatArgs out;
  flatten(std::string("out"), result, out);
  std::string name = detail::short_type_name(module.type_name()) + "." + options.method_name + "(";
  for (std::size_t k = 0; k < sizeof...(P); ++k) name += (k ? ", " : "") + arg_name(options, k);
  return {session.finish(out.tensors, name + ")"), std::move(result)};
}
}  // namespace detail

// Like trace_method, also returning the method's (traced) result, whose
// structure a compiled call reuses to shape its outputs. `method` may be
// const.
template <class M, class R, class... P, class... A>
std::pair<TraceResult, R> trace_method_with_result(M& module, R (M::*method)(P...), const TraceOptions& options,
                                                   A&&... args) {
  return detail::trace_member<R, P...>(module, method, options, std::forward<A>(args)...);
}
template <class M, class R, class... P, class... A>
std::pair<TraceResult, R> trace_method_with_result(M& module, R (M::*method)(P...) const, const TraceOptions& options,
                                                   A&&... args) {
  return detail::trace_member<R, P...>(module, method, options, std::forward<A>(args)...);
}

template <class M, class R, class... P, class... A>
TraceResult trace_method(M& module, R (M::*method)(P...), const TraceOptions& options, A&&... args) {
  return trace_method_with_result(module, method, options, std::forward<A>(args)...).first;
}
template <class M, class R, class... P, class... A>
TraceResult trace_method(M& module, R (M::*method)(P...) const, const TraceOptions& options, A&&... args) {
  return trace_method_with_result(module, method, options, std::forward<A>(args)...).first;
}

// Flattens a call's arguments (named as trace_method names them).
template <class... A>
FlatArgs flatten_args(const TraceOptions& options, const A&... args) {
  FlatArgs flat;
  std::tuple<A...> copies(args...);
  std::size_t i = 0;
  std::apply([&](auto&... a) { (flatten(arg_name(options, i++), a, flat), ...); }, copies);
  return flat;
}

// Replaces the tensors of `value` (in flatten order) by `tensors`.
template <class T>
void unflatten(T& value, const std::vector<Tensor>& tensors) {
  struct Fill : FlattenVisitor {
    const std::vector<Tensor>& ts;
    std::size_t next = 0;
    explicit Fill(const std::vector<Tensor>& t) : ts(t) {}
    void tensor(const std::string& path, Tensor& t) override {
      if (next >= ts.size()) throw TraceError("result '" + path + "' has no value to fill in");
      t = ts[next++];
    }
    void value(const std::string&, const std::string&) override {}
  } fill(tensors);
  flatten(std::string("out"), value, fill);
}

}  // namespace npucache
