#include "compiler/executor.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/runtime/communicator.h>

#include "nn/interop.h"

namespace npucache::compiler {

struct ProgramRunner::Prepared {
  std::vector<std::vector<int64_t>> dims;  // per buffer
  std::vector<std::size_t> bytes;          // per buffer
  MemoryPlan plan;
  std::vector<std::shared_ptr<const Attrs>> attrs;  // per step, SymExprs evaluated
  std::vector<bool> needs_event;                    // per step: a consumer on another stream
  std::vector<bool> used;                           // per buffer root: some step touches it
};

struct ProgramRunner::Captured {
  std::unique_ptr<runtime::TaskGraph> graph;
  std::vector<const runtime::Block*> bound_inputs;   // per input index
  std::vector<const runtime::Block*> bound_params;   // per parameter index
  std::vector<const runtime::Block*> bound_outputs;  // per output buffer index
};

namespace {

std::vector<int64_t> binding_key(const SymBindings& b) {
  std::vector<int64_t> k;
  for (const auto& [s, v] : b) k.push_back(v);
  return k;
}

runtime::BlockPtr captured_block(const runtime::TaskGraph& g, const runtime::Block* b) {
  for (const auto& l : g.launches())
    for (const auto& a : l.args)
      if (a.block.get() == b) return a.block;
  return nullptr;
}

template <class What>
nn::EagerRef eager_impl(const Tensor& t, What&& what) {
  if (!t.defined()) throw ShapeError(what() + " is an undefined tensor");
  if (t.is_traced()) throw TraceError(what() + " is a traced tensor; compiled programs run on eager tensors");
  if (t.is_meta()) throw MetaTensorError(nn::meta_tensor_message(what(), t.type()));
  return nn::eager_ref(t);
}

bool same_type(const TensorType& t, DType dtype, const std::vector<int64_t>& dims) {
  if (t.dtype != dtype || t.shape.size() != dims.size()) return false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    auto c = t.shape[i].try_constant();
    if (!c || *c != dims[i]) return false;
  }
  return true;
}

}  // namespace

ProgramRunner::ProgramRunner(std::shared_ptr<const DeviceProgram> program, int device)
    : program_(std::move(program)), device_(device), hb_(std::make_unique<HappensBefore>(*program_)) {
  Device& d = Platform::get().device(device_);
  streams_.push_back(&d.default_stream());
  for (int s = 1; s < program_->num_streams; ++s) streams_.push_back(&d.create_stream());
}

ProgramRunner::~ProgramRunner() = default;

ProgramRunner::Prepared& ProgramRunner::prepare(const SymBindings& b) {
  auto key = binding_key(b);
  auto it = prepared_.find(key);
  if (it != prepared_.end()) return *it->second;
  auto prep = std::make_unique<Prepared>();
  const DeviceProgram& p = *program_;
  for (std::size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferDesc& buf = p.buffers[i];
    prep->dims.push_back(evaluate_dims(buf.type.shape, b));
    // Sizes under this binding: no negative dim, no product past 2^48 bytes
    // (checked here because dims are symbolic until a call binds them).
    int64_t n = 1;
    for (int64_t d : prep->dims.back())
      if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 48))
        throw ShapeError("buffer " + std::to_string(i) + " of the compiled program has shape " +
                         shape_str(shape_of(prep->dims.back())) +
                         " under this call's sizes: the program or the "
                         "call's sizes are invalid");
    prep->bytes.push_back(static_cast<std::size_t>(n) * dtype_size(buf.type.dtype));
  }
  // A view reads its root's storage: it may not be larger.
  for (std::size_t i = 0; i < p.buffers.size(); ++i)
    if (p.buffers[i].kind == BufferKind::view &&
        prep->bytes[i] > prep->bytes[static_cast<std::size_t>(p.root(static_cast<int>(i)))])
      throw ShapeError("buffer " + std::to_string(i) + " of the compiled program views " +
                       std::to_string(prep->bytes[i]) + " bytes of a buffer of " +
                       std::to_string(prep->bytes[static_cast<std::size_t>(p.root(static_cast<int>(i)))]) +
                       ": the program is invalid");
  prep->plan = plan_memory(p, *hb_, prep->bytes);
  prep->needs_event.assign(p.steps.size(), false);
  prep->used.assign(p.buffers.size(), false);
  for (const auto& s : p.steps) {
    prep->used[static_cast<std::size_t>(p.root(s.result))] = true;
    for (int o : s.operands) prep->used[static_cast<std::size_t>(p.root(o))] = true;
  }
  for (const auto& s : p.steps) {
    prep->attrs.push_back(std::make_shared<const Attrs>(evaluate_attrs(s.attrs, b)));
    for (int d : s.deps)
      if (p.steps[static_cast<std::size_t>(d)].stream != s.stream)
        prep->needs_event[static_cast<std::size_t>(d)] = true;
  }
  return *prepared_.emplace(std::move(key), std::move(prep)).first->second;
}

const MemoryPlan& ProgramRunner::memory_plan(const SymBindings& b) { return prepare(b).plan; }

std::vector<runtime::BlockPtr> ProgramRunner::bind_blocks(Prepared& prep, const std::vector<Tensor>& inputs,
                                                          const std::vector<Tensor>& params, bool intermediates) {
  const DeviceProgram& p = *program_;
  if (static_cast<int>(inputs.size()) != p.num_inputs)
    throw TraceError("compiled program takes " + std::to_string(p.num_inputs) + " tensor inputs, got " +
                     std::to_string(inputs.size()));
  if (params.size() != p.parameters.size())
    throw Error("compiled program needs " + std::to_string(p.parameters.size()) + " parameters, got " +
                std::to_string(params.size()));
  Device& dev = Platform::get().device(device_);
  std::vector<runtime::BlockPtr> blocks(p.buffers.size());
  runtime::BlockPtr arena = intermediates && prep.plan.arena_bytes ? dev.allocate(prep.plan.arena_bytes) : nullptr;
  for (std::size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferDesc& d = p.buffers[i];
    switch (d.kind) {
      case BufferKind::input: {
        const auto impl =
            eager_impl(inputs[static_cast<std::size_t>(d.index)], [&] { return "input " + std::to_string(d.index); });
        if (!same_type(impl.type, d.type.dtype, prep.dims[i]))
          throw TraceError("input " + std::to_string(d.index) + " is " + type_str(impl.type) +
                           ", the program was compiled for " + type_str({d.type.dtype, shape_of(prep.dims[i])}));
        if (impl.device != device_)
          throw DeviceError("input " + std::to_string(d.index) + " is on device " + std::to_string(impl.device) +
                            ", the program runs on device " + std::to_string(device_));
        blocks[i] = impl.block;
        break;
      }
      case BufferKind::parameter: {
        const auto& ref = p.parameters[static_cast<std::size_t>(d.index)];
        const auto impl =
            eager_impl(params[static_cast<std::size_t>(d.index)], [&] { return "parameter '" + ref.name + "'"; });
        if (!same_type(impl.type, d.type.dtype, prep.dims[i]))
          throw TraceError("parameter '" + ref.name + "' is " + type_str(impl.type) + ", the program expects " +
                           type_str(d.type));
        blocks[i] = impl.block;
        break;
      }
      case BufferKind::arena: blocks[i] = arena; break;
      case BufferKind::output: blocks[i] = dev.allocate(std::max<std::size_t>(prep.bytes[i], 1)); break;
      case BufferKind::temp:
        if (intermediates) blocks[i] = dev.allocate(std::max<std::size_t>(prep.bytes[i], 1));
        break;
      case BufferKind::view: break;
    }
  }
  return blocks;
}

void ProgramRunner::launch_all(Prepared& prep, std::vector<runtime::BlockPtr>& blocks, Communicator& comm) {
  const DeviceProgram& p = *program_;
  auto arg = [&](int b) {
    const int r = p.root(b);
    const auto ri = static_cast<std::size_t>(r);
    std::size_t offset = 0;
    if (p.buffers[ri].kind == BufferKind::arena)
      offset = static_cast<std::size_t>(prep.plan.offsets[ri]);
    else if (p.buffers[ri].kind == BufferKind::input || p.buffers[ri].kind == BufferKind::parameter)
      offset = 0;
    return runtime::TensorArg{blocks[ri], offset, p.buffers[static_cast<std::size_t>(b)].type.dtype,
                              prep.dims[static_cast<std::size_t>(b)]};
  };
  std::vector<runtime::Event> events(p.steps.size());
  const bool multi = streams_.size() > 1;
  runtime::Event start;
  if (multi) {
    streams_[0]->record(start);
    for (std::size_t s = 1; s < streams_.size(); ++s) streams_[s]->wait(start);
  }
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    const ProgramStep& s = p.steps[i];
    runtime::Stream& st = *streams_[static_cast<std::size_t>(s.stream)];
    for (int d : s.deps)
      if (p.steps[static_cast<std::size_t>(d)].stream != s.stream) st.wait(events[static_cast<std::size_t>(d)]);
    runtime::KernelLaunch l;
    l.op = s.op;
    l.attrs = prep.attrs[i];
    l.args.reserve(s.operands.size() + 1);
    for (int o : s.operands) l.args.push_back(arg(o));
    l.args.push_back(arg(s.result));
    l.comm = &comm;
    st.launch(std::move(l));
    if (prep.needs_event[i]) st.record(events[i]);
  }
  if (multi)
    for (std::size_t s = 1; s < streams_.size(); ++s) {
      runtime::Event done;
      streams_[s]->record(done);
      streams_[0]->wait(done);
    }
}

std::vector<Tensor> ProgramRunner::make_outputs(const Prepared& prep,
                                                const std::vector<runtime::BlockPtr>& blocks) const {
  const DeviceProgram& p = *program_;
  std::vector<Tensor> out;
  for (int o : p.outputs) {
    const auto r = static_cast<std::size_t>(p.root(o));
    out.push_back(nn::wrap_eager(
        blocks[r], p.buffers[r].kind == BufferKind::arena ? static_cast<std::size_t>(prep.plan.offsets[r]) : 0,
        {p.buffers[static_cast<std::size_t>(o)].type.dtype, shape_of(prep.dims[static_cast<std::size_t>(o)])},
        device_));
  }
  return out;
}

std::vector<Tensor> ProgramRunner::run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& params,
                                       const SymBindings& b, Communicator& comm) {
  Prepared& prep = prepare(b);
  std::vector<runtime::BlockPtr> blocks = bind_blocks(prep, inputs, params);
  launch_all(prep, blocks, comm);
  return make_outputs(prep, blocks);
}

std::vector<Tensor> ProgramRunner::replay(const std::vector<Tensor>& inputs, const std::vector<Tensor>& params,
                                          const SymBindings& b, Communicator& comm, InputHandling handling) {
  if (streams_.size() != 1) throw ConfigError("reduce-overhead programs run on a single stream");
  for (const auto& s : program_->steps)
    if (op_info(s.op).rng)
      throw ConfigError("op '" + std::string(op_name(s.op)) +
                        "' cannot be captured in reduce-overhead mode: every replay would repeat the "
                        "same random numbers; use max-autotune");
  Prepared& prep = prepare(b);
  const DeviceProgram& p = *program_;
  auto key = binding_key(b);
  auto it = captured_.find(key);
  std::vector<runtime::BlockPtr> blocks = bind_blocks(prep, inputs, params, it == captured_.end());
  if (it == captured_.end()) {
    auto cap = std::make_unique<Captured>();
    runtime::Stream& s = *streams_[0];
    s.begin_capture();
    try {
      launch_all(prep, blocks, comm);
    } catch (...) {
      s.end_capture();
      throw;
    }
    cap->graph = s.end_capture();
    cap->bound_inputs.assign(static_cast<std::size_t>(p.num_inputs), nullptr);
    cap->bound_params.assign(p.parameters.size(), nullptr);
    cap->bound_outputs.assign(static_cast<std::size_t>(p.num_output_buffers), nullptr);
    for (std::size_t i = 0; i < p.buffers.size(); ++i) {
      const BufferDesc& d = p.buffers[i];
      const auto idx = static_cast<std::size_t>(d.index);
      if (d.kind == BufferKind::input) cap->bound_inputs[idx] = blocks[i].get();
      if (d.kind == BufferKind::parameter) cap->bound_params[idx] = blocks[i].get();
      if (d.kind == BufferKind::output) cap->bound_outputs[idx] = blocks[i].get();
    }
    it = captured_.emplace(key, std::move(cap)).first;
    it->second->graph->replay(s);
    return make_outputs(prep, blocks);
  }
  Captured& cap = *it->second;
  std::vector<std::pair<const runtime::Block*, runtime::BlockPtr>> rebind, copy_in;
  for (std::size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferDesc& d = p.buffers[i];
    const auto idx = static_cast<std::size_t>(d.index);
    const runtime::Block* fresh = blocks[i].get();
    if (!prep.used[i]) continue;  // e.g. an input only its shape is taken from
    if (d.kind == BufferKind::input && cap.bound_inputs[idx] != fresh) {
      if (handling == InputHandling::copy) {
        copy_in.emplace_back(cap.bound_inputs[idx], blocks[i]);
      } else {
        rebind.emplace_back(cap.bound_inputs[idx], blocks[i]);
        cap.bound_inputs[idx] = fresh;
      }
    } else if (d.kind == BufferKind::parameter && cap.bound_params[idx] != fresh) {
      rebind.emplace_back(cap.bound_params[idx], blocks[i]);
      cap.bound_params[idx] = fresh;
    } else if (d.kind == BufferKind::output) {
      rebind.emplace_back(cap.bound_outputs[idx], blocks[i]);
      cap.bound_outputs[idx] = fresh;
    }
  }
  cap.graph->replay_with(*streams_[0], rebind, copy_in);
  if (!copy_in.empty()) {
    // In-place updates (KV caches) landed in the captured buffers: copy them
    // back into the caller's tensors, in stream order.
    for (const auto& st : p.steps) {
      if (st.op != Op::buffer_update) continue;
      const auto r = static_cast<std::size_t>(p.root(st.operands[0]));
      if (p.buffers[r].kind != BufferKind::input) continue;
      const runtime::Block* bound = cap.bound_inputs[static_cast<std::size_t>(p.buffers[r].index)];
      if (bound == blocks[r].get()) continue;
      if (runtime::BlockPtr captured = captured_block(*cap.graph, bound))
        streams_[0]->copy(blocks[r], 0, captured, 0, prep.bytes[r]);
    }
  }
  return make_outputs(prep, blocks);
}

}  // namespace npucache::compiler
