#include "compiler/engine.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/ops.h>

#include "compiler/executor.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace npucache {
namespace detail {

class CompiledFunction {
 public:
  struct Entry {
    std::shared_ptr<compiler::CompiledGraph> graph;
    std::shared_ptr<const compiler::DeviceProgram> program;
    std::map<int, std::unique_ptr<compiler::ProgramRunner>> runners;  // per device
    std::vector<Tensor> params;
    CallStatus status;  // how this entry was obtained
  };

  CompiledFunction(const nn::Module& module, CompileOptions options, std::shared_ptr<compiler::EntrySource> source)
      : module_(module),
        options_(std::move(options)),
        source_(std::move(source)),
        label_(std::make_shared<const std::string>(module.type_name() + "." + options_.method_name)) {
    if (!options_.fullgraph)
      throw ConfigError(
          "fullgraph=false is not supported: npucache compiles whole graphs only; a "
          "method must trace to one full graph");
    config_ = resolve_config(options_.config, options_.backend);
  }

  std::vector<Tensor> call(const FlatArgs& args, const TraceFn& trace, std::size_t& entry, const KeepFn& keep);
  // The entry matching `args` (obtained from the source on the first call,
  // else traced and compiled when none matches) and the call's bindings;
  // `keep` is called under the lock when the method was traced.
  SymBindings select(const FlatArgs& args, const TraceFn& given_trace, std::size_t& entry, const KeepFn& keep);

  TraceOptions trace_options() const {
    TraceOptions t;
    t.dynamic = options_.dynamic;
    t.method_name = options_.method_name;
    t.arg_names = options_.arg_names;
    return t;
  }
  std::size_t compiles() const {
    std::lock_guard lock(mu_);
    return compiles_;
  }
  // The calling thread's latest call (a default status before its first).
  const CallStatus& status() const {
    std::lock_guard lock(mu_);
    return statuses_[std::this_thread::get_id()];
  }
  const compiler::CompiledGraph& entry(std::size_t i) const {
    std::lock_guard lock(mu_);
    return *entries_.at(i).graph;
  }
  const CompilerConfig& config() const { return config_; }
  double first_call_seconds() const {
    std::lock_guard lock(mu_);
    return first_call_seconds_;
  }

 private:
  // The engine's one compile call. Hints (a stored graph-only artifact)
  // make it a lowering, not a compile: only full compiles are counted.
  std::shared_ptr<compiler::CompiledGraph> compile(TraceResult tr, const SymBindings& example, int device,
                                                   const compiler::CompileHints* hints = nullptr) {
    auto g = std::make_shared<compiler::CompiledGraph>(compiler::compile_graph(
        std::move(tr), config_, options_.custom_decompositions, example, options_.dynamic, device, hints));
    if (hints == nullptr) ++compiles_;
    return g;
  }

  void add(std::shared_ptr<compiler::CompiledGraph> g, CallStatus status) {
    Entry e;
    e.graph = std::move(g);
    e.program = std::shared_ptr<const compiler::DeviceProgram>(e.graph, &e.graph->program);
    e.params = resolve_params(*e.program);
    e.status = std::move(status);
    entries_.push_back(std::move(e));
  }

  std::vector<Tensor> resolve_params(const compiler::DeviceProgram& p) const {
    std::map<std::string, Tensor> by_name;
    for (auto& [n, t] : module_.named_parameters()) by_name[n] = t;
    for (auto& [n, t] : module_.named_buffers()) by_name[n] = t;
    std::vector<Tensor> out;
    for (const auto& ref : p.parameters) {
      auto it = by_name.find(ref.name);
      if (it == by_name.end())
        throw TraceError("the compiled graph uses " + std::string(placeholder_kind_name(ref.kind)) + " '" + ref.name +
                         "', which the module no longer has");
      out.push_back(it->second);
    }
    return out;
  }

  const nn::Module& module_;
  CompileOptions options_;
  CompilerConfig config_;
  // Guards everything below but the call counter: a call selects its entry
  // (and obtains or compiles it) under the lock, then runs outside it.
  mutable std::mutex mu_;
  std::deque<Entry> entries_;  // a deque: entries never move once added
  std::shared_ptr<compiler::EntrySource> source_;
  bool first_call_done_ = false;
  double first_call_seconds_ = 0;
  std::size_t compiles_ = 0;
  mutable std::map<std::thread::id, CallStatus> statuses_;  // per calling thread
  std::shared_ptr<const std::string> label_;                // "Model.decode"
  std::atomic<uint64_t> calls_{0};
};

namespace {
int call_device(const FlatArgs& args) {
  for (const auto& [path, t] : args.tensors)
    if (!t.defined()) throw TraceError("input '" + path + "' is an undefined tensor");
  return args.tensors.empty() ? current_device() : args.tensors.front().second.device();
}
}  // namespace

SymBindings CompiledFunction::select(const FlatArgs& args, const TraceFn& given_trace, std::size_t& entry,
                                     const KeepFn& keep) {
  const int device = call_device(args);
  std::lock_guard lock(mu_);
  bool traced = false;
  const TraceFn trace = [&] {
    traced = true;
    return given_trace();
  };
  const compiler::CompileStep compile_step = [&](TraceResult tr, const SymBindings& example,
                                                 const compiler::CompileHints* hints) {
    return compile(std::move(tr), example, device, hints);
  };
  // A first call that fails (its trace fails as eager code does, a
  // refused compile) leaves no entry: the next call is the first call
  // again, through the entry source.
  if (!first_call_done_) {
    if (source_) {
      const auto t0 = std::chrono::steady_clock::now();
      compiler::FirstEntry first = source_->first_call(args, trace, compile_step);
      first_call_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      add(std::move(first.graph), std::move(first.status));
    } else {
      TraceResult tr = trace();
      const SymBindings b = tr.signature.bind(args);
      add(compile(std::move(tr), b, device), CallStatus{});
    }
    first_call_done_ = true;
  }
  SymBindings b;
  std::size_t found = entries_.size();
  std::string why;  // why the first entry did not bind
  for (std::size_t i = 0; i < entries_.size() && found == entries_.size(); ++i) {
    try {
      b = entries_[i].graph->trace.signature.bind(args);
      found = i;
    } catch (const TraceError& e) {
      if (i == 0) why = e.what();
    }
  }
  if (found == entries_.size()) {
    TraceResult tr = trace();
    b = tr.signature.bind(args);
    CallStatus s;
    s.outcome = Outcome::recompiled;
    s.reason = "recompiled: " + why;
    s.entry = entries_[0].status.entry;
    if (source_) {
      source_->recompiled(tr, why);
      source_.reset();
    }
    add(compile(tr, b, device), std::move(s));
  }
  entry = found;
  if (traced && keep) keep(found);
  CallStatus& status = statuses_[std::this_thread::get_id()];
  status = entries_[found].status;
  status.compiles = compiles_;
  return b;
}

std::vector<Tensor> CompiledFunction::call(const FlatArgs& args, const TraceFn& trace, std::size_t& entry,
                                           const KeepFn& keep) {
  const SymBindings b = select(args, trace, entry, keep);
  std::vector<Tensor> inputs;
  inputs.reserve(args.tensors.size());
  for (const auto& [path, t] : args.tensors) inputs.push_back(t);
  const int device = call_device(args);
  compiler::ProgramRunner* runner = nullptr;
  const std::vector<Tensor>* params = nullptr;
  {
    std::lock_guard lock(mu_);
    Entry& e = entries_[entry];
    auto& r = e.runners[device];
    if (!r) r = std::make_unique<compiler::ProgramRunner>(e.program, device);
    runner = r.get();
    params = &e.params;
  }
  if (config_.mode == CompileMode::reduce_overhead) {
    compiler::ReplayOptions ro;
    ro.inputs = config_.input_handling;
    ro.fresh_outputs = options_.replay_outputs == ReplayOutputs::fresh;
    ro.method = label_;
    ro.call = ++calls_;
    return runner->replay(inputs, *params, b, current_communicator(), ro);
  }
  return runner->run(inputs, *params, b, current_communicator());
}

std::vector<Tensor> call(CompiledFunction& f, const FlatArgs& args, const TraceFn& trace, std::size_t& entry,
                         const KeepFn& keep) {
  return f.call(args, trace, entry, keep);
}
void prepare(CompiledFunction& f, const FlatArgs& args, const TraceFn& trace, std::size_t& entry, const KeepFn& keep) {
  f.select(args, trace, entry, keep);
}
TraceOptions trace_options(const CompiledFunction& f) { return f.trace_options(); }
std::size_t compiles(const CompiledFunction& f) { return f.compiles(); }
const CallStatus& status(const CompiledFunction& f) { return f.status(); }
const std::vector<std::string>& output_paths(const CompiledFunction& f, std::size_t i) {
  return f.entry(i).trace.output_paths;
}
const compiler::CompiledGraph& entry(const CompiledFunction& f, std::size_t i) { return f.entry(i); }
const CompilerConfig& config(const CompiledFunction& f) { return f.config(); }
double first_call_seconds(const CompiledFunction& f) { return f.first_call_seconds(); }

std::string default_method_name(const std::string& given, const MemberFunctionName& derived,
                                const std::string& model_type) {
  if (!given.empty()) return given;
  if (!derived.name.empty()) return derived.name;
  throw ConfigError("cannot name the method of " + model_type +
                    " from the code: the binary has no symbol for it (stripped?); set method_name in the options");
}

std::shared_ptr<CompiledFunction> make_function(const nn::Module& module, CompileOptions options,
                                                std::shared_ptr<compiler::EntrySource> source) {
  return std::make_shared<CompiledFunction>(module, std::move(options), std::move(source));
}

std::shared_ptr<CompiledFunction> make_compiled_function(const nn::Module& module, CompileOptions options) {
  return make_function(module, std::move(options), nullptr);
}

}  // namespace detail

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::compiled: return "compiled";
    case Outcome::hit: return "hit";
    case Outcome::fetched: return "fetched";
    case Outcome::recompiled: return "recompiled";
  }
  return "unknown";
}

}  // namespace npucache
