// compile(): the plain JIT entry point, the counterpart of torch.compile
// (seed 003):
//
//   torch.compile(model, fullgraph=False, dynamic=None, backend="inductor",
//                 mode=None, options=None, disable=False)
//   auto fast = npucache::compile(model, &Model::decode, {.backend = "inductor", .mode = "reduce-overhead"});
//   Tensor logits = fast(token, position, kv);
//
// The first call traces the method with its arguments, compiles the graph
// as the backend and mode say and runs it; later calls whose inputs match a
// compiled entry run its program, others are compiled again (a new shape
// of a static dimension, a changed guard value). Results stay in memory
// only (cache_compile persists them). docs/GUIDE.md, "The compile
// surface", has the table of what each backend, mode and option does:
//
//   backend, mode or option          fusion+codegen  autotuned tilings  capture and replay
//   inductor, mode unset/"default"   yes             no (defaults)      no
//   inductor, "max-autotune-no-cudagraphs" yes       yes                no
//   inductor, "max-autotune"         yes             yes                yes
//   inductor, "reduce-overhead"      yes             no                 yes
//     (or option triton.cudagraphs)
//   npugraphs (mode must be unset)   no (eager kernels) no              yes
//
// TorchAir's CompilerConfig (config, or backend = get_npu_backend(config))
// keeps TorchAir's meaning of its mode: max-autotune compiles the whole
// graph with autotuned tilings and no capture; reduce-overhead captures.
#pragma once

#include <npucache/export.h>

#include <npucache/compiler/config.h>
#include <npucache/error.h>
#include <npucache/nn/decompositions.h>
#include <npucache/trace.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace npucache {

// Where the outputs of a reduce-overhead (captured) call live.
enum class ReplayOutputs {
  // In the calling thread's pool of captured graphs, as PyTorch's cudagraph
  // trees keep them: no copy per call; an output stays valid until a later
  // call of the same thread reuses its memory (reading it then is a
  // DeviceError naming both calls; Tensor::clone() keeps a result).
  pool,
  // Copied into storage of their own each call: results can be kept.
  fresh,
};

// torch.compile's backend argument: a name ("inductor", "npugraphs") or an
// NpuBackend object (TorchAir's get_npu_backend(config)).
class Backend {
 public:
  Backend(const char* name) : name_(name) {}                       // NOLINT: a name converts, as in Python
  Backend(std::string name) : name_(std::move(name)) {}            // NOLINT
  Backend(NpuBackend npu) : name_("npu"), npu_(std::move(npu)) {}  // NOLINT
  // "inductor", "npugraphs" (as given), or "npu" for an NpuBackend object.
  const std::string& name() const { return name_; }
  const std::optional<NpuBackend>& npu() const { return npu_; }

 private:
  std::string name_;
  std::optional<NpuBackend> npu_;
};

// A value of compile()'s `options` map ({"trace.enabled", true}).
using OptionValue = std::variant<bool, int64_t, double, std::string>;

// One dimension of one flattened input ("arg0", "arg1.data"), for
// CompileOptions::mark_dynamic / mark_static.
struct DimMark {
  std::string input;
  int64_t dim = 0;
  friend bool operator==(const DimMark&, const DimMark&) = default;
  friend auto operator<=>(const DimMark&, const DimMark&) = default;
};

struct CompileOptions {
  // --- torch.compile's arguments (seed 003) ---------------------------------
  // "inductor" (the default), "npugraphs", or an NpuBackend object.
  std::optional<Backend> backend;
  // The inductor backend's mode: unset or "default", "reduce-overhead",
  // "max-autotune", "max-autotune-no-cudagraphs". Not with `options`, not
  // with npugraphs or a TorchAir config (ConfigError).
  std::optional<std::string> mode;
  // false (torch.compile's default): what cannot be traced into one graph
  // (a read of a tensor's value on the host, a data-dependent branch, an op
  // the mode cannot lower) splits the method into compiled pieces with
  // eager code between them, each break counted and explained in
  // CallStatus. true: such a break is a GraphBreakError giving its reason.
  bool fullgraph = false;
  // true: every input dim of size >= 2 is symbolic; false: every dim is
  // static (a new size compiles again); unset (torch.compile's default):
  // automatic dynamic -- static first, a dim that changes between calls is
  // compiled once more as dynamic and stays dynamic (cache_compile keeps
  // the decision in the cache directory, so the next process compiles the
  // dynamic version at once).
  std::optional<bool> dynamic;
  // torch.compile's `options`: "triton.cudagraphs" (bool: capture and
  // replay), "trace.enabled" (bool: write each compile's graphs and program
  // to "trace.debug_dir", default ./npucache_debug), "enable_shape_handling"
  // (bool: a call whose dynamic dims are smaller than an existing capture's
  // is padded up to it and the padding sliced off the outputs, so one
  // capture serves a range of sizes). Another key is a ConfigError listing
  // these.
  std::map<std::string, OptionValue> options;
  // true: calls run the method eagerly; nothing is compiled or cached.
  bool disable = false;

  // --- TorchAir's ------------------------------------------------------------
  // The TorchAir config (the counterpart of get_npu_backend(config));
  // with `backend` an NpuBackend of another config: ConfigError.
  std::optional<CompilerConfig> config;
  DecompositionTable custom_decompositions;

  // --- npucache's ------------------------------------------------------------
  // Names the graph and ${func} in a cache path. Default: the name of the
  // member function itself ("prompt" for &Model::prompt), from the code.
  std::string method_name;
  std::vector<std::string> arg_names;
  // Dims that are symbolic (mark_dynamic) or static (mark_static) whatever
  // `dynamic` says, as torch._dynamo.mark_dynamic / mark_static.
  std::vector<DimMark> mark_dynamic, mark_static;
  // Compile regions (npucache/region.h; the shipped decoders mark their
  // layers): true traces and compiles each region once per signature and
  // links it in at every call; false traces the regions' code inline at
  // every call, as plain code (the programs compute the same; their graph
  // keys differ).
  bool regions = true;
  // reduce-overhead: where outputs live (not part of any cache key).
  ReplayOutputs replay_outputs = ReplayOutputs::pool;
  // Captures (one per shape) a method makes at most; later new shapes run
  // without capture, with one warning (PyTorch's cudagraph trees have the
  // same kind of limit).
  std::size_t capture_limit = 64;
  // What a compile given no backend, config, mode or triton.cudagraphs
  // option does: inductor's default mode (compile(), as torch.compile), or
  // TorchAir's default CompilerConfig (cache_compile, as the seed's).
  enum class Defaults { torch_compile, torchair };
  Defaults defaults = Defaults::torch_compile;
};

// How the program a call ran was obtained.
enum class Outcome {
  compiled,    // traced and compiled by this process
  hit,         // served from the cache
  fetched,     // received from another rank (dist::cache_compile)
  recompiled,  // a later call matched no compiled entry and was compiled again
  eager,       // CompileOptions::disable: the method ran eagerly
  none,        // nothing yet: no call or prepare() on this thread
  // prepare() of a method split at graph breaks stopped at a host read
  // whose value it cannot know: only the pieces before it were obtained
  // (CallStatus::pieces, CallStatus::stopped_at).
  partial,
};
NPUCACHE_API std::string_view outcome_name(Outcome o);

// What happened on the latest call of a compiled or cached method.
struct CallStatus {
  Outcome outcome = Outcome::none;
  // The program is stored in the cache or was served from it (false for
  // compile(), a refused or unwritable cache, a failed save, a recompile).
  bool cached = false;
  // Why it was not a hit, in words: "absent", "stale (runtime_version:
  // stored 'a', now 'b')", "the computation differs (node mul_3 (full):
  // constant 1 stored, 3 now)", "recompiled: input arg0 ...".
  std::string reason;
  std::string entry;         // the method's cache entry (the seed's path), or ""
  std::size_t compiles = 0;  // compiles this process did for the method so far
  // Graph breaks of the call (fullgraph=false): one line each, "graph break
  // in Model.decode at op item: reason".
  std::vector<std::string> graph_breaks;
  // A split method: the pieces the call ran (prepare(): obtained -- loaded
  // or compiled, and stored -- without running them).
  std::size_t pieces = 0;
  // Outcome::partial: the break prepare() stopped at and why ("graph break
  // 1 in Model.decode at op sum (sum_2): item() reads ...; no value for
  // item() of sum (sum_2) (f32[]) (a hint gives it): the pieces after it
  // are not prepared");
  // "" otherwise.
  std::string stopped_at;
  // Dims automatic dynamic made symbolic so far ("arg0 dim 0").
  std::vector<std::string> dynamic_dims;
  // reduce-overhead: captures made for the method so far, and whether this
  // call replayed a capture (false past the capture limit, or in a mode
  // that does not capture).
  std::size_t captures = 0;
  bool replayed = false;
  // Capture templates (reduce-overhead with cache_compile): captures this
  // process recorded, captures it restored from stored templates instead
  // (no capture), and stored templates it could not use, with the latest
  // reason ("recaptured: device memory: stored '...', now '...'").
  std::size_t recorded = 0, restored = 0, recaptured = 0;
  std::string recapture_reason;
};

// prepare() of a method split at graph breaks (fullgraph=false) obtains
// its pieces without running them, so a host read in the method's code of
// a value no piece computed (or of a meta argument) cannot be answered from
// the tensors. Such a read, as the hints see it:
struct HostRead {
  std::size_t index = 0;  // such reads of this prepare() so far: 0 for the first
  std::string access;     // "item", "to_vector", "to_vector_i64" or "bool" (a truth value)
  // The op that computed the tensor in a piece ("sum (sum_2)"); "" for
  // another tensor (a meta argument, or an eager tensor a prepared piece
  // updates in place, whose values are then stale).
  std::string op;
  TensorType type;  // the tensor's type (a value gives one number per element)
};

// The values host reads see during prepare(), so that a warmup goes past
// them: the pieces after a read are the ones the hinted value leads to
// (prepare() once per side of a branch covers both). Pieces are found by
// their content, so a hint the real calls later do not see only costs them
// a compile; it never changes a result.
struct PrepareHints {
  // The value of the i-th read (HostRead::index), one number per element
  // (a truth value: nonzero is true); a value of another size is a
  // ConfigError.
  std::vector<std::vector<double>> values;
  // Asked for a read `values` has no entry for; nullopt: unknown.
  std::function<std::optional<std::vector<double>>(const HostRead&)> value;
};

namespace detail {

// The type-erased engine behind CompiledMethod (src/compiler/engine.h):
// compiled entries with their input signatures, and where they persist.
class CompiledFunction;
// Traces the method with the call's arguments under the given options (the
// engine passes its current ones: automatic dynamic changes them).
using TraceFn = std::function<TraceResult(const TraceOptions&)>;

// Called with the selected entry's index, under the engine's lock, when the
// call traced the method (so the caller keeps the traced result as the
// entry's result template before any other thread can use the entry).
using KeepFn = std::function<void(std::size_t entry)>;
// Runs the compiled entry matching `args`, tracing (`trace`) and compiling a
// new one when none matches. `entry` receives the entry's index.
NPUCACHE_API std::vector<Tensor> call(CompiledFunction& f, const FlatArgs& args, const TraceFn& trace,
                                      std::size_t& entry, const KeepFn& keep);
// Obtains the entry matching `args` exactly as call does (from the entry
// source on the first call, else traced and compiled), without running it.
NPUCACHE_API void prepare(CompiledFunction& f, const FlatArgs& args, const TraceFn& trace, std::size_t& entry,
                          const KeepFn& keep);
// Whether CompiledMethod::select runs the entry it obtains.
enum class CallKind { run, prepare_only };
NPUCACHE_API const TraceOptions& trace_options(const CompiledFunction& f);
// CompileOptions::disable: calls run the method eagerly; note_eager_call
// records such a call in the calling thread's status.
NPUCACHE_API bool runs_eagerly(const CompiledFunction& f);
NPUCACHE_API void note_eager_call(CompiledFunction& f);
// Graph breaks (fullgraph=false): whether the method runs split into
// compiled pieces; graph_break records the first break and splits the
// method from now on, or (fullgraph=true) throws `e` naming the method.
NPUCACHE_API bool is_segmented(const CompiledFunction& f);
NPUCACHE_API void graph_break(CompiledFunction& f, const GraphBreakError& e);
// One call of a split method on the calling thread: ops record into pieces
// that run (compiled, cached, replayed) at each graph break; finish() runs
// the last one and records the call's status. Given `hints`, the call is a
// prepare(): each piece is obtained (loaded, or compiled and stored, as a
// call does) and not run, its outputs are meta tensors, and a host read of
// one sees its hint; without one the method stops with a MetaTensorError
// and stopped() is true (record the status with stop()). `hints` must
// outlive the call.
class NPUCACHE_API SegmentedCall {
 public:
  SegmentedCall(CompiledFunction& f, const nn::Module& module, const PrepareHints* hints = nullptr);
  ~SegmentedCall();
  SegmentedCall(const SegmentedCall&) = delete;
  SegmentedCall& operator=(const SegmentedCall&) = delete;
  void finish();
  bool stopped() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
NPUCACHE_API std::size_t compiles(const CompiledFunction& f);
NPUCACHE_API const CallStatus& status(const CompiledFunction& f);
// The output paths of entry `i` ("out.logits", "out.kv[0]").
NPUCACHE_API const std::vector<std::string>& output_paths(const CompiledFunction& f, std::size_t i);
// `options.method_name`, or the name of `method` from the code.
NPUCACHE_API std::string default_method_name(const std::string& given, const MemberFunctionName& derived,
                                             const std::string& model_type);

// A result of type R built from output paths and tensors, for a program
// served without a trace in this process: vectors sized from the paths,
// tensors placed by path, plain fields default-initialised.
template <class R>
R build_result(const std::vector<std::string>& paths, const std::vector<Tensor>& outs) {
  struct Build : FlattenVisitor {
    const std::vector<std::string>& paths;
    const std::vector<Tensor>& outs;
    Build(const std::vector<std::string>& p, const std::vector<Tensor>& o) : paths(p), outs(o) {}
    std::size_t sequence_size(const std::string& path, std::size_t) override {
      std::size_t n = 0;
      const std::string prefix = path + "[";
      for (const auto& p : paths)
        if (p.compare(0, prefix.size(), prefix) == 0) {
          const std::size_t i = std::stoul(p.substr(prefix.size()));
          n = std::max(n, i + 1);
        }
      return n;
    }
    void tensor(const std::string& path, Tensor& t) override {
      for (std::size_t i = 0; i < paths.size() && i < outs.size(); ++i)
        if (paths[i] == path) {
          t = outs[i];
          return;
        }
      throw TraceError("result '" + path + "' is not among the stored program's outputs");
    }
    void value(const std::string&, const std::string&) override {}
  } b(paths, outs);
  R result{};
  flatten(std::string("out"), result, b);
  return result;
}
// The engine of npucache::compile (results in memory only).
NPUCACHE_API std::shared_ptr<CompiledFunction> make_compiled_function(const nn::Module& module, CompileOptions options);

}  // namespace detail

// A compiled or cached method: compile(), cache_compile() and
// dist::cache_compile() return one; calling it runs the method's program.
//
// A default-constructed CompiledMethod is empty: a model can keep its cached
// callables as members and assign them once its layers exist (TorchAir's
// pattern, `self.cached_prompt = cache_compile(self.prompt)` in __init__).
// Calling an empty one, or asking its status, throws ConfigError; compiles()
// is 0. Copies share the compiled entries (and the cache entry source).
//
// Thread safety: one CompiledMethod (or copies of it) may be called from
// many threads at once, first call included: the first call obtains the
// program once (cache, coordinator or compile) while the other callers
// wait, a recompile likewise; then calls run concurrently, each with its
// own arguments and results. status() is the calling thread's latest call.
// In reduce-overhead mode each thread's outputs live in that thread's pool
// of captured graphs (ReplayOutputs). Called from inside another compiled
// method (its trace, or the piece a split method is recording), the method
// runs as part of that code, recorded into it; its own entries and status
// are left as they were. Assigning a CompiledMethod while
// another thread calls it is a data race, as for any C++ object. The module
// must not be changed (parameters replaced) while calls run.
template <class M, class R, class... P>
class CompiledMethod {
 public:
  CompiledMethod() = default;
  CompiledMethod(M& module, R (M::*method)(P...), std::shared_ptr<detail::CompiledFunction> engine)
      : module_(&module), method_(method), fn_(std::move(engine)), results_(std::make_shared<Results>()) {}
  CompiledMethod(M& module, R (M::*method)(P...) const, std::shared_ptr<detail::CompiledFunction> engine)
      : module_(&module), const_method_(method), fn_(std::move(engine)), results_(std::make_shared<Results>()) {}

  // False while empty (default-constructed and not yet assigned).
  explicit operator bool() const { return fn_ != nullptr; }

  R operator()(P... args) {
    if (!fn_) throw_empty();
    // Called from compiled code -- the trace of another compiled method, or
    // a split method recording its next piece: the method runs as part of
    // that code (as torch.compile inlines a compiled function it reaches).
    if (detail::trace_active()) return call_method(args...);
    if (detail::runs_eagerly(*fn_)) {
      detail::note_eager_call(*fn_);
      return call_method(args...);
    }
    if (!detail::is_segmented(*fn_)) {
      try {
        return run_compiled(args...);
      } catch (const GraphBreakError& e) {
        detail::graph_break(*fn_, e);  // throws under fullgraph=true
      }
    }
    detail::SegmentedCall call(*fn_, *module_);
    R result = call_method(args...);
    call.finish();
    return result;
  }

 private:
  R run_compiled(P... args) {
    auto [entry, outs] = select(detail::CallKind::run, args...);
    std::optional<R> result;
    {
      std::lock_guard lock(results_->mu);
      if (entry < results_->templates.size() && results_->templates[entry]) result = *results_->templates[entry];
    }
    if (!result) {
      // A program served from the cache without a trace (the code_version
      // fast path): the result's structure comes from the stored output
      // paths.
      if constexpr (std::is_same_v<R, Tensor>) {
        return outs.at(0);
      } else if constexpr (std::is_default_constructible_v<R>) {
        return detail::build_result<R>(detail::output_paths(*fn_, entry), outs);
      } else {
        throw TraceError(
            "a cached method served without a trace must return Tensor or a default-constructible "
            "type; trace it once (the default hit check) or give the result type a default constructor");
      }
    }
    unflatten(*result, outs);
    return std::move(*result);
  }

 public:
  // Obtains the program a call with `args` would run -- loaded from the
  // cache, received from another rank or traced and compiled here, exactly
  // as a call does -- without running it, and returns the status. The
  // module's parameters and the arguments may be meta tensors
  // (Tensor::meta, nn::MetaScope): this is how a model whose weights are
  // not materialised is compiled and cached (npucache warmup). A later call
  // whose arguments match runs the prepared program (it then needs real
  // tensors: a meta one is a MetaTensorError naming it).
  //
  // A method split at graph breaks (fullgraph=false) is run lazily without
  // computing anything: each piece the code reaches is obtained as a call
  // would obtain it (loaded, or compiled and stored) and not run. At a host
  // read of a value no piece computed (`item()` deciding a branch) prepare()
  // stops, unless `hints` give the value: the status is then
  // Outcome::partial, with the pieces obtained (`pieces`) and the break it
  // stopped at (`stopped_at`). Covering both sides of a branch takes one
  // prepare() per side, each with its hint. Meta weights are never read.
  const CallStatus& prepare(P... args) { return prepare(PrepareHints{}, args...); }
  const CallStatus& prepare(const PrepareHints& hints, P... args) {
    if (!fn_) throw_empty();
    if (detail::runs_eagerly(*fn_)) {
      detail::note_eager_call(*fn_);
      return status();
    }
    if (!detail::is_segmented(*fn_)) {
      try {
        select(detail::CallKind::prepare_only, args...);
        return status();
      } catch (const GraphBreakError& e) {
        detail::graph_break(*fn_, e);  // throws under fullgraph=true
      }
    }
    detail::SegmentedCall call(*fn_, *module_, &hints);
    std::optional<R> result;  // alive until finish(): the last piece's outputs are what it prepares
    try {
      result.emplace(call_method(args...));
    } catch (const MetaTensorError&) {
      if (!call.stopped()) throw;
      call.stop();
      return status();
    }
    call.finish();
    return status();
  }

  // Compiles this process did for the method (0 after a cache hit, 0 while
  // empty).
  std::size_t compiles() const { return fn_ ? detail::compiles(*fn_) : 0; }
  // What happened on the calling thread's latest call.
  const CallStatus& status() const { return detail::status(engine()); }
  const detail::CompiledFunction& engine() const {
    if (!fn_) throw_empty();
    return *fn_;
  }

 private:
  // The traced results of each entry: the structure later results are
  // rebuilt in (shared by copies, guarded for concurrent callers).
  struct Results {
    std::mutex mu;
    std::vector<std::optional<R>> templates;
  };

  // Obtains the entry matching the call (and runs it for CallKind::run);
  // keeps the traced result of a new entry as the template of its results.
  std::pair<std::size_t, std::vector<Tensor>> select(detail::CallKind kind, P... args) {
    const TraceOptions& topts = detail::trace_options(*fn_);
    FlatArgs flat = flatten_args(topts, args...);
    std::optional<R> traced;
    auto tracer = [&](const TraceOptions& current) {
      auto [tr, res] = method_ ? trace_method_with_result(*module_, method_, current, args...)
                               : trace_method_with_result(*module_, const_method_, current, args...);
      traced = std::move(res);
      return std::move(tr);
    };
    auto keep = [&](std::size_t e) {
      if (!traced) return;
      std::lock_guard lock(results_->mu);
      if (results_->templates.size() <= e) results_->templates.resize(e + 1);
      results_->templates[e] = std::move(traced);
    };
    std::size_t entry = 0;
    std::vector<Tensor> outs;
    if (kind == detail::CallKind::run)
      outs = detail::call(*fn_, flat, tracer, entry, keep);
    else
      detail::prepare(*fn_, flat, tracer, entry, keep);
    return {entry, std::move(outs)};
  }

  [[noreturn]] static void throw_empty() {
    throw ConfigError(
        "this CompiledMethod is empty (default-constructed): assign it the result of compile(), "
        "cache_compile() or dist::cache_compile() before calling it");
  }

  // Runs the method itself (eagerly, or recorded into the code tracing it).
  R call_method(P... args) { return method_ ? (module_->*method_)(args...) : (module_->*const_method_)(args...); }

  M* module_ = nullptr;
  R (M::*method_)(P...) = nullptr;              // the method, or
  R (M::*const_method_)(P...) const = nullptr;  // the const method
  std::shared_ptr<detail::CompiledFunction> fn_;
  std::shared_ptr<Results> results_;
};

template <class M, class R, class... P>
CompiledMethod<M, R, P...> compile(M& module, R (M::*method)(P...), CompileOptions options = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>, "compile accepts only methods of an nn::Module instance");
  options.method_name =
      detail::default_method_name(options.method_name, method_name(module, method), module.type_name());
  return CompiledMethod<M, R, P...>(module, method, detail::make_compiled_function(module, std::move(options)));
}
// A const method compiles the same way.
template <class M, class R, class... P>
CompiledMethod<M, R, P...> compile(M& module, R (M::*method)(P...) const, CompileOptions options = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>, "compile accepts only methods of an nn::Module instance");
  options.method_name =
      detail::default_method_name(options.method_name, method_name(module, method), module.type_name());
  return CompiledMethod<M, R, P...>(module, method, detail::make_compiled_function(module, std::move(options)));
}

}  // namespace npucache
