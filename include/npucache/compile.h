// compile(): the plain JIT entry point, the counterpart of
// torch.compile(model, backend=..., mode=..., dynamic=..., fullgraph=True).
//
//   auto fast = npucache::compile(model, &Model::decode, {.method_name = "decode"});
//   Tensor logits = fast(token, position, kv);
//
// The first call traces the method with its arguments, compiles the graph
// (mode max-autotune: fused-kernel code generation, the "inductor" backend;
// reduce-overhead: capture and replay, the "npugraphs" backend) and runs it;
// later calls whose inputs match the trace's signature run the compiled
// program. A call that does not match (a new shape of a static trace, a
// changed guard value) is traced and compiled again. Results stay in memory
// only (cache_compile persists them).
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/nn/decompositions.h>
#include <npucache/trace.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace npucache {

struct CompileOptions {
  std::optional<CompilerConfig> config;
  std::optional<NpuBackend> backend;
  bool dynamic = true;
  bool fullgraph = true;  // whole graphs only: false is a ConfigError
  DecompositionTable custom_decompositions;
  std::string method_name = "forward";
  std::vector<std::string> arg_names;
};

namespace detail {

// The type-erased engine behind CompiledMethod (src/compiler/engine.h):
// compiled entries with their input signatures, and where they persist.
class CompiledFunction;
using TraceFn = std::function<TraceResult()>;

// Runs the compiled entry matching `args`, tracing (`trace`) and compiling a
// new one when none matches. `entry` receives the entry's index.
std::vector<Tensor> call(CompiledFunction& f, const FlatArgs& args, const TraceFn& trace, std::size_t& entry);
TraceOptions trace_options(const CompiledFunction& f);
std::size_t compiles(const CompiledFunction& f);
// The engine of npucache::compile (results in memory only).
std::shared_ptr<CompiledFunction> make_compiled_function(const nn::Module& module, CompileOptions options);

}  // namespace detail

template <class M, class R, class... P>
class CompiledMethod {
 public:
  CompiledMethod(M& module, R (M::*method)(P...), std::shared_ptr<detail::CompiledFunction> engine)
      : module_(&module), method_(method), fn_(std::move(engine)) {}

  R operator()(P... args) {
    const TraceOptions topts = detail::trace_options(*fn_);
    FlatArgs flat = flatten_args(topts, args...);
    std::optional<R> traced;
    auto tracer = [&] {
      auto [tr, res] = trace_method_with_result(*module_, method_, topts, args...);
      traced = std::move(res);
      return std::move(tr);
    };
    std::size_t entry = 0;
    std::vector<Tensor> outs = detail::call(*fn_, flat, tracer, entry);
    if (traced) {
      if (templates_.size() <= entry) templates_.resize(entry + 1);
      templates_[entry] = std::move(traced);
    }
    if (templates_.size() <= entry || !templates_[entry]) {
      // A graph loaded from the cache ran without a trace: the method's
      // return structure comes from the stored output paths.
      if constexpr (std::is_same_v<R, Tensor>) {
        return outs.at(0);
      } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
        return outs;
      } else {
        throw TraceError("a cached method returning a struct must be traced once per process");
      }
    }
    R result = *templates_.at(entry);
    unflatten(result, outs);
    return result;
  }

  std::size_t compiles() const { return detail::compiles(*fn_); }
  const detail::CompiledFunction& engine() const { return *fn_; }

 private:
  M* module_;
  R (M::*method_)(P...);
  std::shared_ptr<detail::CompiledFunction> fn_;
  std::vector<std::optional<R>> templates_;
};

template <class M, class R, class... P>
CompiledMethod<M, R, P...> compile(M& module, R (M::*method)(P...), CompileOptions options = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>, "compile accepts only methods of an nn::Module instance");
  return CompiledMethod<M, R, P...>(module, method, detail::make_compiled_function(module, std::move(options)));
}

}  // namespace npucache
