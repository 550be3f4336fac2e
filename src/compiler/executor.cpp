#include "compiler/executor.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/runtime/communicator.h>

#include "compiler/capture_template.h"
#include "log/log.h"
#include "nn/interop.h"
#include "process/context.h"
#include "process/once.h"
#include "runtime/pool.h"

namespace npucache::compiler {

struct ProgramRunner::Prepared {
  std::vector<std::vector<int64_t>> dims;  // per buffer
  std::vector<std::size_t> bytes;          // per buffer
  MemoryPlan plan;
  std::vector<std::shared_ptr<const Attrs>> attrs;  // per step, SymExprs evaluated
  std::vector<bool> needs_event;                    // per step: a consumer on another stream
  std::vector<bool> used;                           // per buffer root: some step touches it
  std::vector<int64_t> key;                         // binding_key() of the binding it was made for
  // Per patched step (patched_): the first patched step whose attributes
  // (evaluated and as written) equal its own, so that a call evaluates the
  // patched attributes once for all of them (a decoder's layers share one).
  std::vector<std::size_t> patch_same;
};

// A captured graph of one binding: immutable once made, replayed by any
// thread into that thread's pool.
struct ProgramRunner::Captured {
  SymBindings binding;  // what it was captured for (update-only symbols left out)
  // Its lifetime, for the pools it reserved memory in (pool.h: reclaimed
  // when the capture is gone).
  std::shared_ptr<const void> alive = runtime::MemoryPool::owner_token();
  std::unique_ptr<runtime::TaskGraph> graph;
  std::size_t footprint = 0;         // pool bytes written: [0, footprint)
  std::vector<int64_t> pool_offset;  // per buffer root in the pool, else -1
  std::vector<bool> input_updated;   // per input index: written in place
};

namespace {

// Slots of a captured graph: the pool, then each input, then each parameter.
constexpr uint32_t kPoolSlot = 0;
uint32_t input_slot(int index) { return 1 + static_cast<uint32_t>(index); }
uint32_t param_slot(const DeviceProgram& p, int index) {
  return 1 + static_cast<uint32_t>(p.num_inputs) + static_cast<uint32_t>(index);
}
// Alignment of buffers laid out in the pool after the arena.
constexpr std::size_t kPoolAlign = 256;

template <class What>
nn::EagerRef eager_impl(const Tensor& t, What&& what) {
  if (!t.defined()) throw ShapeError(what() + " is an undefined tensor");
  if (t.is_traced()) throw TraceError(what() + " is a traced tensor; compiled programs run on eager tensors");
  if (t.is_meta()) throw MetaTensorError(nn::meta_tensor_message(what(), t.type()));
  if (nn::replay_ticket(t)) nn::check_live(t, what());
  return nn::eager_ref(t);
}

// Whether dim `e` is the constant `want`; read from the terms in place (a
// call checks every dim of every input and parameter).
bool is_dim(const SymExpr& e, int64_t want) {
  const auto& terms = e.terms();
  if (terms.empty()) return want == 0;
  return terms.size() == 1 && terms.begin()->first.empty() && terms.begin()->second == want;
}

bool same_type(const TensorType& t, DType dtype, const std::vector<int64_t>& dims) {
  if (t.dtype != dtype || t.shape.size() != dims.size()) return false;
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (!is_dim(t.shape[i], dims[i])) return false;
  return true;
}

bool overlaps(std::size_t a0, std::size_t a1, std::size_t b0, std::size_t b1) { return a0 < b1 && b0 < a1; }

}  // namespace

ProgramRunner::ProgramRunner(std::shared_ptr<const DeviceProgram> program, int device)
    : program_(std::move(program)), device_(device), hb_(std::make_unique<HappensBefore>(*program_)) {
  Device& d = Platform::get().device(device_);
  streams_.push_back(&d.default_stream());
  for (int s = 1; s < program_->num_streams; ++s) streams_.push_back(&d.create_stream());
  for (std::size_t i = 0; i < program_->steps.size() && rng_step_ < 0; ++i)
    if (op_info(program_->steps[i].op).rng) rng_step_ = static_cast<int>(i);
  // Symbols of updatable attributes that nothing else uses.
  std::set<std::string> other, updatable;
  auto collect = [](const AttrValue& v, std::set<std::string>& into) {
    if (const auto* e = std::get_if<std::vector<SymExpr>>(&v))
      for (const auto& x : *e)
        for (const auto& sym : x.symbols()) into.insert(sym);
  };
  for (const auto& buf : program_->buffers)
    for (const auto& dim : buf.type.shape)
      for (const auto& sym : dim.symbols()) other.insert(sym);
  for (const auto& st : program_->steps) {
    const char* up = op_info(st.op).updatable;
    for (const auto& [k, v] : st.attrs.items()) collect(v, up && k == up ? updatable : other);
  }
  for (const auto& sym : updatable)
    if (!other.count(sym)) update_only_.insert(sym);
  if (!update_only_.empty())
    for (std::size_t i = 0; i < program_->steps.size(); ++i) {
      const auto& st = program_->steps[i];
      const char* up = op_info(st.op).updatable;
      if (const AttrValue* v = up ? st.attrs.find(up) : nullptr) {
        std::set<std::string> used;
        collect(*v, used);
        for (const auto& sym : used)
          if (update_only_.count(sym)) {
            patched_.push_back(i);
            break;
          }
      }
    }
}

std::vector<int64_t> ProgramRunner::binding_key(const SymBindings& b) const {
  std::vector<int64_t> k;
  for (const auto& [s, v] : b)
    if (!update_only_.count(s)) k.push_back(v);
  return k;
}

std::shared_ptr<const Attrs> ProgramRunner::patched_attrs(const Prepared& prep, std::size_t step,
                                                          const SymBindings& b) const {
  // The preparation evaluated every other attribute already (they use no
  // update-only symbol): only the updatable one is evaluated again, and a
  // single dim is patched as a plain integer (the kernels of updatable ops
  // read both forms).
  const ProgramStep& s = program_->steps[step];
  const char* up = op_info(s.op).updatable;
  const auto* dims = std::get_if<std::vector<SymExpr>>(s.attrs.find(up));
  if (dims == nullptr || dims->size() != 1) return std::make_shared<const Attrs>(evaluate_attrs(s.attrs, b));
  const int64_t value = dims->front().evaluate(b);
  return std::make_shared<const Attrs>(prep.attrs[step]->with(up, value));
}

std::vector<runtime::TaskGraph::Patch> ProgramRunner::patches(const Prepared& prep, const SymBindings& b) const {
  std::vector<runtime::TaskGraph::Patch> out;
  out.reserve(patched_.size());
  for (std::size_t k = 0; k < patched_.size(); ++k) {
    const std::size_t same = prep.patch_same[k];
    out.push_back({patched_[k], same < k ? out[same].attrs : patched_attrs(prep, patched_[k], b)});
  }
  return out;
}

ProgramRunner::~ProgramRunner() = default;

ProgramRunner::Prepared& ProgramRunner::prepare(const SymBindings& b) {
  auto key = binding_key(b);
  std::lock_guard lock(mu_);
  auto it = prepared_.find(key);
  if (it != prepared_.end()) return *it->second;
  auto prep = std::make_unique<Prepared>();
  prep->key = key;
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
  for (std::size_t i = 0; i < p.buffers.size(); ++i) {
    const auto r = static_cast<std::size_t>(p.root(static_cast<int>(i)));
    if (p.buffers[i].kind == BufferKind::view && prep->bytes[i] > prep->bytes[r])
      throw ShapeError("buffer " + std::to_string(i) + " of the compiled program views " +
                       std::to_string(prep->bytes[i]) + " bytes of a buffer of " + std::to_string(prep->bytes[r]) +
                       ": the program is invalid");
  }
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
  // Patched steps with equal attributes get one evaluation per call.
  for (std::size_t k = 0; k < patched_.size(); ++k) {
    std::size_t same = k;
    for (std::size_t j = 0; j < k && same == k; ++j)
      if (p.steps[patched_[j]].op == p.steps[patched_[k]].op &&
          p.steps[patched_[j]].attrs == p.steps[patched_[k]].attrs &&
          *prep->attrs[patched_[j]] == *prep->attrs[patched_[k]])
        same = j;
    prep->patch_same.push_back(same);
  }
  return *prepared_.emplace(std::move(key), std::move(prep)).first->second;
}

const MemoryPlan& ProgramRunner::memory_plan(const SymBindings& b) { return prepare(b).plan; }

std::size_t ProgramRunner::captured_graphs() const {
  std::lock_guard lock(mu_);
  return captured_.size();
}

std::vector<SymBindings> ProgramRunner::captured_bindings() const {
  std::lock_guard lock(mu_);
  std::vector<SymBindings> out;
  for (const auto& [key, cap] : captured_) out.push_back(cap->binding);
  return out;
}

std::size_t ProgramRunner::capture_footprint(const SymBindings& b) const {
  std::lock_guard lock(mu_);
  auto it = captured_.find(binding_key(b));
  return it == captured_.end() ? 0 : it->second->footprint;
}

std::vector<ProgramRunner::Bound> ProgramRunner::bind(Prepared& prep, const std::vector<Tensor>& inputs,
                                                      const std::vector<Tensor>& params, bool intermediates) {
  const DeviceProgram& p = *program_;
  if (static_cast<int>(inputs.size()) != p.num_inputs)
    throw TraceError("compiled program takes " + std::to_string(p.num_inputs) + " tensor inputs, got " +
                     std::to_string(inputs.size()));
  if (params.size() != p.parameters.size())
    throw Error("compiled program needs " + std::to_string(p.parameters.size()) + " parameters, got " +
                std::to_string(params.size()));
  Device& dev = Platform::get().device(device_);
  std::vector<Bound> roots(p.buffers.size());
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
        roots[i] = {impl.block, impl.offset};
        break;
      }
      case BufferKind::parameter: {
        const auto& ref = p.parameters[static_cast<std::size_t>(d.index)];
        const auto impl =
            eager_impl(params[static_cast<std::size_t>(d.index)], [&] { return "parameter '" + ref.name + "'"; });
        if (!same_type(impl.type, d.type.dtype, prep.dims[i]))
          throw TraceError("parameter '" + ref.name + "' is " + type_str(impl.type) + ", the program expects " +
                           type_str(d.type));
        if (impl.device != device_)
          throw DeviceError("parameter '" + ref.name + "' is on device " + std::to_string(impl.device) +
                            ", the program runs on device " + std::to_string(device_));
        roots[i] = {impl.block, impl.offset};
        break;
      }
      case BufferKind::arena:
        if (intermediates) roots[i] = {arena, static_cast<std::size_t>(prep.plan.offsets[i])};
        break;
      case BufferKind::output:
      case BufferKind::temp:
        if (intermediates) roots[i] = {dev.allocate(std::max<std::size_t>(prep.bytes[i], 1)), 0};
        break;
      case BufferKind::view: break;
    }
  }
  return roots;
}

void ProgramRunner::launch_all(Prepared& prep, const std::vector<Bound>& roots, Communicator& comm,
                               const SymBindings& b) {
  std::size_t next_patched = 0;
  const DeviceProgram& p = *program_;
  auto arg = [&](int buf) {
    const auto r = static_cast<std::size_t>(p.root(buf));
    return runtime::TensorArg{roots[r].block, roots[r].offset, p.buffers[static_cast<std::size_t>(buf)].type.dtype,
                              prep.dims[static_cast<std::size_t>(buf)]};
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
    if (next_patched < patched_.size() && patched_[next_patched] == i) {
      l.attrs = patched_attrs(prep, i, b);  // this call's value
      ++next_patched;
    }
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

std::vector<Tensor> ProgramRunner::make_outputs(const Prepared& prep, const std::vector<Bound>& roots) const {
  const DeviceProgram& p = *program_;
  std::vector<Tensor> out;
  for (int o : p.outputs) {
    const auto r = static_cast<std::size_t>(p.root(o));
    out.push_back(nn::wrap_eager(
        roots[r].block, roots[r].offset,
        {p.buffers[static_cast<std::size_t>(o)].type.dtype, shape_of(prep.dims[static_cast<std::size_t>(o)])},
        device_));
  }
  return out;
}

std::vector<Tensor> ProgramRunner::run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& params,
                                       const SymBindings& b, Communicator& comm) {
  Prepared& prep = prepare(b);
  std::vector<Bound> roots = bind(prep, inputs, params, true);
  launch_all(prep, roots, comm, b);
  return make_outputs(prep, roots);
}

std::unique_ptr<ProgramRunner::Captured> ProgramRunner::pool_plan(const Prepared& prep, const SymBindings& b) const {
  const DeviceProgram& p = *program_;
  auto cap = std::make_unique<Captured>();
  for (const auto& [sym, v] : b)
    if (!update_only_.count(sym)) cap->binding.emplace(sym, v);
  // Pool plan: the arena as planned, then temporaries and outputs.
  cap->pool_offset.assign(p.buffers.size(), -1);
  std::size_t end = prep.plan.arena_bytes;
  for (std::size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferKind k = p.buffers[i].kind;
    if (k == BufferKind::arena) {
      cap->pool_offset[i] = prep.plan.offsets[i];
    } else if (k == BufferKind::temp || k == BufferKind::output) {
      end = (end + kPoolAlign - 1) / kPoolAlign * kPoolAlign;
      cap->pool_offset[i] = static_cast<int64_t>(end);
      end += std::max<std::size_t>(prep.bytes[i], 1);
    }
  }
  cap->footprint = end;
  cap->input_updated.assign(static_cast<std::size_t>(p.num_inputs), false);
  for (const auto& st : p.steps) {
    if (st.op != Op::buffer_update) continue;
    const BufferDesc& r = p.buffers[static_cast<std::size_t>(p.root(st.operands[0]))];
    if (r.kind == BufferKind::input) cap->input_updated[static_cast<std::size_t>(r.index)] = true;
  }
  return cap;
}

CaptureTemplate ProgramRunner::make_template(const Prepared& prep, const Captured& cap) const {
  const DeviceProgram& p = *program_;
  CaptureTemplate t;
  t.binding = cap.binding;
  t.footprint = cap.footprint;
  t.pool_offset = cap.pool_offset;
  t.tasks.reserve(p.steps.size());
  for (const auto& st : p.steps) {
    CaptureTemplate::Task task;
    task.op = op_number(st.op);
    for (std::size_t a = 0; a <= st.operands.size(); ++a) {
      const int buf = a < st.operands.size() ? st.operands[a] : st.result;
      const auto r = static_cast<std::size_t>(p.root(buf));
      const BufferDesc& d = p.buffers[r];
      CaptureTemplate::Operand o;
      if (cap.pool_offset[r] >= 0) {
        o.slot = kPoolSlot;
        o.offset = static_cast<uint64_t>(cap.pool_offset[r]);
      } else if (d.kind == BufferKind::input) {
        o.slot = input_slot(d.index);
      } else if (d.kind == BufferKind::parameter) {
        o.slot = param_slot(p, d.index);
      } else {
        throw Error("captured operand of a step has no storage class");
      }
      o.dtype = static_cast<uint32_t>(p.buffers[static_cast<std::size_t>(buf)].type.dtype);
      o.dims = prep.dims[static_cast<std::size_t>(buf)];
      task.operands.push_back(std::move(o));
    }
    t.tasks.push_back(std::move(task));
  }
  return t;
}

void ProgramRunner::set_slots(Captured& cap, const CaptureTemplate& t) const {
  for (std::size_t i = 0; i < t.tasks.size(); ++i)
    for (std::size_t a = 0; a < t.tasks[i].operands.size(); ++a)
      cap.graph->set_slot(i, a, t.tasks[i].operands[a].slot, t.tasks[i].operands[a].offset);
}

ProgramRunner::Captured& ProgramRunner::capture(Prepared& prep, const std::vector<Bound>& io, Communicator& comm,
                                                const std::vector<int64_t>& key, const SymBindings& b, bool phantom) {
  const DeviceProgram& p = *program_;
  auto cap = pool_plan(prep, b);
  // Record with the calling thread's pool (nothing runs while capturing),
  // or, for a capture that only makes a template (no call: meta weights), a
  // block that is never read.
  runtime::BlockPtr pool =
      phantom ? std::make_shared<runtime::Block>(nullptr, std::max<std::size_t>(cap->footprint, 1), device_)
              : runtime::MemoryPool::of_this_thread(device_)->reserve(cap->footprint, cap->alive);
  std::vector<Bound> roots = io;
  for (std::size_t i = 0; i < p.buffers.size(); ++i)
    if (cap->pool_offset[i] >= 0) roots[i] = {pool, static_cast<std::size_t>(cap->pool_offset[i])};
  runtime::Stream& s = *streams_[0];
  s.begin_capture();
  try {
    launch_all(prep, roots, comm, b);
  } catch (...) {
    s.end_capture();
    throw;
  }
  cap->graph = s.end_capture();
  if (cap->graph->size() != p.steps.size())
    throw Error("capture recorded " + std::to_string(cap->graph->size()) + " launches for a program of " +
                std::to_string(p.steps.size()) + " steps");
  // Every operand becomes a slot: the pool, an input or a parameter.
  const CaptureTemplate t = make_template(prep, *cap);
  set_slots(*cap, t);
  ++captures_;
  if (templates_) templates_->save(cap->binding, settings(), encode_template(t));
  return *captured_.emplace(key, std::move(cap)).first->second;
}

ProgramRunner::Captured* ProgramRunner::restore(Prepared& prep, Communicator& comm, const std::vector<int64_t>& key,
                                                const SymBindings& b) {
  std::string why;
  auto cap = pool_plan(prep, b);
  std::optional<std::string> bytes = templates_->load(cap->binding, settings(), why);
  if (!bytes) {
    if (!why.empty()) note_recapture(why);
    return nullptr;
  }
  try {
    const CaptureTemplate t = decode_template(*bytes);
    const CaptureTemplate expected = make_template(prep, *cap);
    // Only a template equal to what a capture would make here is replayed.
    if (t.binding != expected.binding)
      throw Error("captured for sizes " + binding_text(t.binding) + ", not " + binding_text(expected.binding));
    if (t.footprint != expected.footprint || t.pool_offset != expected.pool_offset)
      throw Error("its pool plan differs (footprint " + std::to_string(t.footprint) + " bytes, a capture here lays " +
                  std::to_string(expected.footprint) + ")");
    if (t.tasks.size() != expected.tasks.size())
      throw Error("it has " + std::to_string(t.tasks.size()) + " tasks, the program " +
                  std::to_string(expected.tasks.size()));
    for (std::size_t i = 0; i < t.tasks.size(); ++i)
      if (!(t.tasks[i] == expected.tasks[i]))
        throw Error("task " + std::to_string(i) + " (" + std::string(op_name(program_->steps[i].op)) +
                    ") differs from the program's step");
    std::vector<runtime::KernelLaunch> launches;
    launches.reserve(program_->steps.size());
    for (std::size_t i = 0; i < program_->steps.size(); ++i) {
      runtime::KernelLaunch l;
      l.op = program_->steps[i].op;
      l.attrs = prep.attrs[i];
      for (const auto& o : t.tasks[i].operands) l.args.push_back({nullptr, 0, static_cast<DType>(o.dtype), o.dims});
      l.comm = &comm;
      launches.push_back(std::move(l));
    }
    cap->graph = runtime::TaskGraph::from_launches(std::move(launches));
    set_slots(*cap, t);
  } catch (const Error& e) {
    note_recapture(std::string("the stored capture template cannot be used: ") + e.what());
    return nullptr;
  }
  ++restores_;
  templates_->note(true, false);
  return captured_.emplace(key, std::move(cap)).first->second.get();
}

TemplateSettings ProgramRunner::settings() const {
  return {Platform::get().device(device_).properties().memory_capacity, kPoolAlign};
}

void ProgramRunner::note_recapture(const std::string& why) {
  ++recaptures_;
  const std::string cause = recapture_cause(why);
  if (templates_) templates_->note(false, true, cause);
  // Said once per process and cause: another device's or runtime's
  // template is expected (INFO); a damaged or foreign one is not (WARN).
  if (process::Context::current().get<process::Once>().first("recapture|" + cause)) {
    if (cause == "damaged" || cause == "mismatch" || cause == "other")
      log::warn(
          "recaptured a captured graph: {} (later recaptures for this reason are not logged; npucache stats "
          "counts them)",
          why);
    else
      log::info(
          "recaptured a captured graph: {} (later recaptures for this reason are not logged; npucache stats "
          "counts them)",
          why);
  }
  std::lock_guard lock(reason_mu_);
  recapture_reason_ = why;
}

std::string ProgramRunner::recapture_reason() const {
  std::lock_guard lock(reason_mu_);
  return recapture_reason_;
}

bool ProgramRunner::has_capture(const SymBindings& b) const {
  const auto key = binding_key(b);
  std::lock_guard lock(mu_);
  return captured_.count(key) > 0;
}

void ProgramRunner::capture_template(const SymBindings& b, Communicator& comm) {
  if (streams_.size() != 1) throw ConfigError("reduce-overhead programs run on a single stream");
  Prepared& prep = prepare(b);
  const DeviceProgram& p = *program_;
  // Phantom storage for the inputs and parameters: a capture records
  // addresses, never values, and every operand becomes a slot.
  std::vector<Bound> io(p.buffers.size());
  for (std::size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferKind k = p.buffers[i].kind;
    if (k == BufferKind::input || k == BufferKind::parameter)
      io[i] = {std::make_shared<runtime::Block>(nullptr, std::max<std::size_t>(prep.bytes[i], 1), device_), 0};
  }
  const auto key = binding_key(b);
  std::lock_guard lock(mu_);
  if (captured_.count(key)) return;
  if (templates_ && restore(prep, comm, key, b)) return;
  capture(prep, io, comm, key, b, /*phantom=*/true);
}

bool CaptureBudget::take() {
  std::size_t n = made_.load();
  while (n < limit_)
    if (made_.compare_exchange_weak(n, n + 1)) return true;
  if (!warned_.exchange(true))
    log::warn(
        "{} reached its capture limit ({} captured shapes, CompileOptions::capture_limit): calls with new "
        "shapes run without capture from now on",
        method_ ? *method_ : std::string("a method"), limit_);
  return false;
}

std::vector<Tensor> ProgramRunner::replay(const std::vector<Tensor>& inputs, const std::vector<Tensor>& params,
                                          const SymBindings& b, Communicator& comm, const ReplayOptions& options,
                                          bool* replayed) {
  if (streams_.size() != 1) throw ConfigError("reduce-overhead programs run on a single stream");
  const DeviceProgram& p = *program_;
  if (rng_step_ >= 0)
    throw ConfigError("op '" + std::string(op_name(p.steps[static_cast<std::size_t>(rng_step_)].op)) +
                      "' cannot be captured in reduce-overhead mode: every replay would repeat the "
                      "same random numbers; use max-autotune");
  Prepared& prep = prepare(b);
  const std::vector<Bound> io = bind(prep, inputs, params, false);
  const Captured* cap = nullptr;
  {
    const auto& key = prep.key;
    std::lock_guard lock(mu_);
    auto it = captured_.find(key);
    if (it != captured_.end())
      cap = it->second.get();
    else if (!options.budget || options.budget->take()) {
      if (templates_) cap = restore(prep, comm, key, b);
      if (!cap) cap = &capture(prep, io, comm, key, b);
    }
  }
  if (replayed) *replayed = cap != nullptr;
  if (cap == nullptr) {  // past the capture limit: launched as run() does
    std::vector<Bound> roots = bind(prep, inputs, params, true);
    launch_all(prep, roots, comm, b);
    return make_outputs(prep, roots);
  }
  const bool fresh = options.fresh_outputs || options.scratch_pool;
  const auto pool = options.scratch_pool ? runtime::MemoryPool::scratch_of_this_thread(device_)
                                         : runtime::MemoryPool::of_this_thread(device_);
  const runtime::BlockPtr pool_block = pool->reserve(cap->footprint, cap->alive);
  Device& dev = Platform::get().device(device_);

  std::vector<runtime::TaskGraph::SlotBinding> slots(1 + static_cast<std::size_t>(p.num_inputs) + p.parameters.size());
  std::vector<runtime::TaskGraph::Copy> before, after;
  // Per input: its staged copy when it lay in this replay's footprint.
  std::vector<runtime::BlockPtr> staged_from_pool(static_cast<std::size_t>(p.num_inputs));
  slots[kPoolSlot] = {pool_block, 0};
  std::vector<bool> returned(p.buffers.size(), false);  // roots of outputs
  for (int o : p.outputs) returned[static_cast<std::size_t>(p.root(o))] = true;
  for (std::size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferDesc& d = p.buffers[i];
    // An input no step reads: only its shape is taken, or it is returned as
    // it came (staged below when the replay overwrites it).
    if (!prep.used[i] && !(d.kind == BufferKind::input && returned[i])) continue;
    if (d.kind == BufferKind::parameter) {
      slots[param_slot(p, d.index)] = {io[i].block, io[i].offset};
      continue;
    }
    if (d.kind != BufferKind::input) continue;
    const auto idx = static_cast<std::size_t>(d.index);
    const Bound& in = io[i];
    const std::size_t n = prep.bytes[i];
    // An input in the memory this replay writes (an earlier output fed
    // back) is staged first; so is every input in copy mode.
    const bool in_pool = in.block == pool_block && overlaps(in.offset, in.offset + n, 0, cap->footprint);
    if ((options.inputs == InputHandling::copy && prep.used[i]) || in_pool) {
      if (in_pool && cap->input_updated[idx])
        throw DeviceError("input " + std::to_string(d.index) + " of " +
                          (options.method ? *options.method : std::string("the captured graph")) +
                          " is an output of an earlier call still living in the pool of captured graphs, and the "
                          "program updates it in place, which would overwrite this call's own results; pass a "
                          "copy (Tensor::clone()) or compile with CompileOptions::replay_outputs = "
                          "ReplayOutputs::fresh");
      runtime::BlockPtr stage = dev.allocate(std::max<std::size_t>(n, 1));
      before.push_back({stage, 0, in.block, in.offset, n});
      if (cap->input_updated[idx]) after.push_back({in.block, in.offset, stage, 0, n});
      if (in_pool) staged_from_pool[idx] = stage;
      if (prep.used[i]) slots[input_slot(d.index)] = {std::move(stage), 0};
    } else if (prep.used[i]) {
      slots[input_slot(d.index)] = {in.block, in.offset};
    }
  }
  // Outputs: the pool's memory (with the replay's ticket), or copies.
  std::vector<Tensor> outs;
  outs.reserve(p.outputs.size());
  std::vector<std::pair<std::size_t, std::size_t>> pooled;  // output index, pool offset
  for (int o : p.outputs) {
    const auto r = static_cast<std::size_t>(p.root(o));
    const TensorType type{p.buffers[static_cast<std::size_t>(o)].type.dtype,
                          shape_of(prep.dims[static_cast<std::size_t>(o)])};
    if (cap->pool_offset[r] >= 0) {
      pooled.emplace_back(outs.size(), static_cast<std::size_t>(cap->pool_offset[r]));
      outs.emplace_back();
      if (fresh) {
        const std::size_t n = prep.bytes[static_cast<std::size_t>(o)];
        runtime::BlockPtr copy = dev.allocate(std::max<std::size_t>(n, 1));
        after.push_back({copy, 0, pool_block, pooled.back().second, n});
        outs.back() = nn::wrap_eager(std::move(copy), 0, type, device_);
      }
      continue;
    }
    // A view of an input or parameter (an in-place updated KV cache): the
    // caller's own tensor, written back already if it was staged. An input
    // that was an earlier output in this replay's footprint is overwritten
    // by the replay: the output is its staged copy, which holds its values.
    const std::size_t which = p.buffers[r].kind == BufferKind::input ? static_cast<std::size_t>(p.buffers[r].index)
                                                                     : static_cast<std::size_t>(-1);
    if (which < staged_from_pool.size() && staged_from_pool[which]) {
      outs.push_back(nn::wrap_eager(staged_from_pool[which], 0, type, device_));
      continue;
    }
    outs.push_back(nn::wrap_eager(io[r].block, io[r].offset, type, device_,
                                  which < inputs.size() ? nn::replay_ticket(inputs[which]) : nullptr));
  }
  // Logged before the submission: outputs of earlier replays in this
  // footprint are overwritten from now on.
  const auto ticket = pool->record_write(cap->footprint, options.method, options.call);
  cap->graph->replay(*streams_[0], slots, std::move(before), std::move(after), patches(prep, b));
  if (!fresh)
    for (const auto& [i, off] : pooled) {
      const int o = p.outputs[i];
      outs[i] = nn::wrap_eager(
          pool_block, off,
          {p.buffers[static_cast<std::size_t>(o)].type.dtype, shape_of(prep.dims[static_cast<std::size_t>(o)])},
          device_, ticket);
    }
  return outs;
}

}  // namespace npucache::compiler
