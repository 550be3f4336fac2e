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

#include <npucache/compiler_config.h>
#include <npucache/decompositions.h>
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

namespace compiler {
struct CompiledGraph;
}

namespace detail {

// Where compiled graphs persist (the cache layer implements it); a
// CompiledFunction without one keeps results in memory only.
class EntrySource {
 public:
  virtual ~EntrySource() = default;
  // Before the first trace: a stored compiled graph for this call, or null.
  // `trace` traces the method with this call's arguments (a source that
  // coordinates several processes may need the graph before compiling).
  virtual std::shared_ptr<compiler::CompiledGraph> load(const FlatArgs& args,
                                                        const std::function<TraceResult()>& trace) = 0;
  // After a trace, before it is compiled; may throw to refuse the graph.
  virtual void traced(const TraceResult&) {}
  // The first trace was compiled: persist it.
  virtual void compiled(const compiler::CompiledGraph& g) = 0;
  // A later trace of the same function (a recompile): the source is
  // dropped afterwards and execution continues uncached.
  virtual void recompiled(const std::string& name) = 0;
};

// The type-erased engine behind CompiledMethod.
class CompiledFunction {
 public:
  CompiledFunction(const nn::Module& module, CompileOptions options,
                   std::shared_ptr<EntrySource> source = nullptr);
  ~CompiledFunction();
  CompiledFunction(const CompiledFunction&) = delete;
  CompiledFunction& operator=(const CompiledFunction&) = delete;

  // Runs the compiled entry matching `args`, tracing (`trace`) and compiling
  // a new one when none matches. `entry` receives the entry's index.
  std::vector<Tensor> call(const FlatArgs& args, const std::function<TraceResult()>& trace,
                           std::size_t& entry);

  std::size_t compiles() const;
  // Seconds spent looking up and loading from the entry source (cache).
  double load_seconds() const;
  const compiler::CompiledGraph& entry(std::size_t i) const;
  const CompilerConfig& config() const;
  TraceOptions trace_options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace detail

template <class M, class R, class... P>
class CompiledMethod {
 public:
  CompiledMethod(M& module, R (M::*method)(P...), CompileOptions options,
                 std::shared_ptr<detail::EntrySource> source = nullptr)
      : module_(&module), method_(method),
        fn_(std::make_shared<detail::CompiledFunction>(module, std::move(options), std::move(source))) {}

  R operator()(P... args) {
    const TraceOptions topts = fn_->trace_options();
    FlatArgs flat = flatten_args(topts, args...);
    std::optional<R> traced;
    auto tracer = [&] {
      auto [tr, res] = trace_method_with_result(*module_, method_, topts, args...);
      traced = std::move(res);
      return std::move(tr);
    };
    std::size_t entry = 0;
    std::vector<Tensor> outs = fn_->call(flat, tracer, entry);
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

  std::size_t compiles() const { return fn_->compiles(); }
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
  return CompiledMethod<M, R, P...>(module, method, std::move(options));
}

}  // namespace npucache
