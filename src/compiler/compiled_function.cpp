#include <npucache/communicator.h>
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/ops.h>

#include "compiler/compiled_graph.h"
#include "compiler/executor.h"

#include <chrono>

namespace npucache::detail {

struct CompiledFunction::Impl {
  struct Entry {
    std::shared_ptr<compiler::CompiledGraph> graph;
    std::shared_ptr<const compiler::DeviceProgram> program;
    std::map<int, std::unique_ptr<compiler::ProgramRunner>> runners;  // per device
    std::vector<Tensor> params;
  };
  const nn::Module& module;
  CompileOptions options;
  CompilerConfig config;
  std::vector<Entry> entries;
  std::shared_ptr<EntrySource> source;
  bool load_attempted = false;
  double load_seconds = 0;

  void add(std::shared_ptr<compiler::CompiledGraph> g) {
    Entry e;
    e.graph = std::move(g);
    e.program = std::shared_ptr<const compiler::DeviceProgram>(e.graph, &e.graph->program);
    e.params = resolve_params(*e.program);
    entries.push_back(std::move(e));
  }

  std::vector<Tensor> resolve_params(const compiler::DeviceProgram& p) const {
    std::map<std::string, Tensor> by_name;
    for (auto& [n, t] : module.named_parameters()) by_name[n] = t;
    for (auto& [n, t] : module.named_buffers()) by_name[n] = t;
    std::vector<Tensor> out;
    for (const auto& ref : p.parameters) {
      auto it = by_name.find(ref.name);
      if (it == by_name.end())
        throw TraceError("the compiled graph uses " + std::string(placeholder_kind_name(ref.kind)) + " '" +
                         ref.name + "', which the module no longer has");
      out.push_back(it->second);
    }
    return out;
  }
};

CompiledFunction::CompiledFunction(const nn::Module& module, CompileOptions options,
                                   std::shared_ptr<EntrySource> source)
    : impl_(std::make_unique<Impl>(Impl{module, std::move(options), {}, {}, std::move(source)})) {
  if (!impl_->options.fullgraph)
    throw ConfigError("fullgraph=false is not supported: npucache compiles whole graphs only; a "
                      "method must trace to one full graph");
  impl_->config = resolve_config(impl_->options.config, impl_->options.backend);
}

CompiledFunction::~CompiledFunction() = default;

std::size_t CompiledFunction::compiles() const { return impl_->entries.size(); }
double CompiledFunction::load_seconds() const { return impl_->load_seconds; }
const compiler::CompiledGraph& CompiledFunction::entry(std::size_t i) const { return *impl_->entries.at(i).graph; }
const CompilerConfig& CompiledFunction::config() const { return impl_->config; }

TraceOptions CompiledFunction::trace_options() const {
  TraceOptions t;
  t.dynamic = impl_->options.dynamic;
  t.method_name = impl_->options.method_name;
  t.arg_names = impl_->options.arg_names;
  return t;
}

std::vector<Tensor> CompiledFunction::call(const FlatArgs& args, const std::function<TraceResult()>& trace,
                                           std::size_t& entry) {
  std::vector<Tensor> inputs;
  inputs.reserve(args.tensors.size());
  for (const auto& [path, t] : args.tensors) {
    if (!t.defined()) throw TraceError("input '" + path + "' is an undefined tensor");
    inputs.push_back(t);
  }
  const int device = inputs.empty() ? current_device() : inputs.front().device();
  if (impl_->source && !impl_->load_attempted) {
    impl_->load_attempted = true;
    auto t0 = std::chrono::steady_clock::now();
    if (auto g = impl_->source->load(args, trace)) impl_->add(std::move(g));
    impl_->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  SymBindings b;
  std::size_t found = impl_->entries.size();
  for (std::size_t i = 0; i < impl_->entries.size() && found == impl_->entries.size(); ++i) {
    try {
      b = impl_->entries[i].graph->trace.signature.bind(args);
      found = i;
    } catch (const TraceError&) {
    }
  }
  if (found == impl_->entries.size()) {
    TraceResult tr = trace();
    b = tr.signature.bind(args);
    if (impl_->source) impl_->source->traced(tr);
    const std::string name = tr.name;
    impl_->add(std::make_shared<compiler::CompiledGraph>(compiler::compile_graph(
        std::move(tr), impl_->config, impl_->options.custom_decompositions, b, impl_->options.dynamic, device)));
    if (impl_->source) {
      if (found == 0) {
        impl_->source->compiled(*impl_->entries.back().graph);
      } else {
        impl_->source->recompiled(name);
        impl_->source.reset();
      }
    }
  }
  entry = found;
  Impl::Entry& e = impl_->entries[found];
  auto& runner = e.runners[device];
  if (!runner) runner = std::make_unique<compiler::ProgramRunner>(e.program, device);
  if (impl_->config.mode == CompileMode::reduce_overhead)
    return runner->replay(inputs, e.params, b, current_communicator(), impl_->config.input_handling);
  return runner->run(inputs, e.params, b, current_communicator());
}

}  // namespace npucache::detail
