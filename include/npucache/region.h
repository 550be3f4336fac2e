// Compile regions: a repeated piece of a model (a transformer layer) traced
// and compiled once, the counterpart of PyTorch's
// torch.compiler.nested_compile_region.
//
//   h = nn::compile_region(*layers_[i], &DecoderLayer::forward, h, positions, k[i], v[i]);
//
// Outside a trace (eager calls) this is module.method(args...). While a
// compiled method's full graph is traced with regions on
// (TraceOptions::regions, CompileOptions::regions), the call records one
// region_call node instead of the method's ops. The first call with a given
// signature -- the method, the module's class, the types of its tensor
// arguments, its plain values and SymInts, and the names and types of the
// module's parameters and buffers -- traces the method's body into a graph
// of its own (TraceResult::regions); later calls with that signature, with
// other modules' weights, do not run the method at all: they record a call
// that reads their own module's parameters and buffers. The compiler
// compiles each body once and links it in at every call (the calling
// program runs each call with its own layer's parameters).
//
// What a region may do:
// - read its tensor arguments and the parameters and buffers of `module`
//   (which must be a registered submodule of the traced module, so that
//   they have names); any other tensor is a TraceError: pass it as an
//   argument. Constants built inside (ops::full) are fine.
// - update its arguments or buffers in place (ops::buffer_update: the KV
//   cache) and run collectives (the tensor-parallel all_reduce); the call
//   node lists both ("mutates", "collectives").
// - return one Tensor (a compile-time error otherwise).
// The signature does not see the module's other members (later calls do
// not run the method): modules of one class whose plain members change
// what the method computes (a flag, a window size) must pass them to the
// method as plain values or name them in type_name(); otherwise every
// module of the class is served the first one's body. With the
// environment variable NPUCACHE_CHECK_REGIONS=1 every call traces its body
// as well, and one that differs from its signature's body is a TraceError.
// Plain values (bool, integers) the method takes specialise the body, as
// guards do a trace; a region called inside another region's body, or in
// a method split at graph breaks (fullgraph=false), runs inline.
#pragma once

#include <npucache/export.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <npucache/module.h>
#include <npucache/tensor.h>
#include <npucache/trace.h>

namespace npucache {
namespace detail {

// One compile_region call while a trace may record (src/nn/region.cpp):
// `visit(v)` flattens copies of the call's arguments into `v` (twice at
// most, in the same order; the second time `v` replaces their tensors by
// the body's inputs), `run()` calls the method on those copies, and
// `method_name()` names it. When the thread's trace does not record
// regions this is run().
NPUCACHE_API Tensor run_region(const nn::Module& module, const unsigned char* method, std::size_t method_size,
                               const std::function<void(FlattenVisitor&)>& visit, const std::function<Tensor()>& run,
                               const std::function<std::string()>& method_name);

template <class R, class... P, class M, class Method, class... A>
R call_region(M& module, Method method, A&&... args) {
  static_assert(std::is_base_of_v<nn::Module, std::remove_const_t<M>>,
                "compile_region accepts only methods of an nn::Module");
  static_assert(std::is_same_v<R, Tensor>, "compile_region: the region's method must return a Tensor");
  static_assert(sizeof...(P) == sizeof...(A), "wrong number of arguments for the region's method");
  if (!trace_active()) return (module.*method)(std::forward<A>(args)...);
  unsigned char bytes[sizeof method];
  std::memcpy(bytes, &method, sizeof method);
  std::tuple<std::decay_t<P>...> copies(std::forward<A>(args)...);
  return run_region(
      module, bytes, sizeof bytes,
      [&](FlattenVisitor& v) {
        std::size_t i = 0;
        std::apply([&](auto&... a) { (flatten("arg" + std::to_string(i++), a, v), ...); }, copies);
      },
      [&]() -> Tensor { return std::apply([&](auto&... a) -> R { return (module.*method)(a...); }, copies); },
      [&] { return method_name(module, method).name; });
}

}  // namespace detail

namespace nn {

// Calls module.method(args...) as a compile region (see above).
template <class M, class R, class... P, class... A>
R compile_region(const M& module, R (M::*method)(P...) const, A&&... args) {
  return detail::call_region<R, P...>(module, method, std::forward<A>(args)...);
}
template <class M, class R, class... P, class... A>
R compile_region(M& module, R (M::*method)(P...), A&&... args) {
  return detail::call_region<R, P...>(module, method, std::forward<A>(args)...);
}

}  // namespace nn
}  // namespace npucache
