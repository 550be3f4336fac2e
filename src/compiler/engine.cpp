#include "compiler/engine.h"
#include "compiler/compiled_function.h"
#include "compiler/passes.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/ops.h>

#include "compiler/auto_dynamic.h"
#include "compiler/debug_trace.h"
#include "compiler/executor.h"
#include "compiler/shape_buckets.h"
#include "compiler/surface.h"
#include "log/log.h"
#include "nn/bind_plan.h"
#include "nn/interop.h"
#include "nn/piece_shapes.h"

#include <npucache/ir/hash.h>

#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace npucache {
namespace detail {

namespace {
int call_device(const FlatArgs& args) {
  for (const auto& [path, t] : args.tensors)
    if (!t.defined()) throw TraceError("input '" + path + "' is an undefined tensor");
  return args.tensors.empty() ? current_device() : args.tensors.front().second.device();
}
}  // namespace

SymBindings CompiledFunction::select(const FlatArgs& args, const TraceFn& given_trace, std::size_t& entry,
                                     const KeepFn& keep) {
  std::vector<CoverTask> covers;
  SymBindings b = select_locked(args, given_trace, entry, keep, covers);
  cover(covers);
  return b;
}

SymBindings CompiledFunction::select_locked(const FlatArgs& args, const TraceFn& given_trace, std::size_t& entry,
                                            const KeepFn& keep, std::vector<CoverTask>& covers) {
  const int device = call_device(args);
  std::lock_guard lock(mu_);
  bool traced = false;
  const TraceFn counted = [&](const TraceOptions& o) {
    traced = true;
    return given_trace(o);
  };
  const compiler::TraceStep trace = [&] { return trace_current(args, counted); };
  const compiler::CompileStep compile_step = [&](TraceResult tr, const SymBindings& example,
                                                 const compiler::CompileHints* hints) {
    return compile(std::move(tr), example, device, hints);
  };
  const bool automatic = surface_.dynamic == compiler::DynamicPolicy::automatic;
  if (!first_call_done_) {
    // A first call that fails (a bad argument, a graph break) leaves the
    // method as it was: the next call tries again.
    struct Reset {
      bool& done;
      bool ok = false;
      ~Reset() {
        if (!ok) done = false;
      }
    } reset{first_call_done_};
    first_call_done_ = true;
    if (automatic && source_) {
      std::vector<DimMark> stored;
      source_->load_profile(args, stored);
      std::erase_if(stored, [](const DimMark& m) { return m.input.starts_with(kPieceMark); });
      profile_.merge(stored);
    }
    if (source_) {
      const auto t0 = std::chrono::steady_clock::now();
      compiler::FirstEntry first = source_->first_call(args, trace, compile_step);
      const auto t1 = std::chrono::steady_clock::now();
      first_call_seconds_ = std::chrono::duration<double>(t1 - t0).count();
      add(std::move(first.graph), std::move(first.status), std::move(first.templates));
      const auto t2 = std::chrono::steady_clock::now();
      compiler::EntrySource::FirstCallEnd end;
      end.bind_s = std::chrono::duration<double>(t2 - t1).count();
      end.ready_s = std::chrono::duration<double>(t2 - t0).count();
      first_end_ = FirstEnd{source_, end};
      first_end_thread_ = std::this_thread::get_id();
    } else {
      TraceResult tr = trace();
      const SymBindings b = tr.signature.bind(args);
      CallStatus compiled;
      compiled.outcome = Outcome::compiled;
      add(compile(std::move(tr), b, device), std::move(compiled));
    }
    profile_.note_compiled(args);
    reset.ok = true;
  }
  SymBindings b;
  std::size_t found = entries_.size();
  std::string why;  // why the first entry did not bind
  for (std::size_t i = entries_.size(); i-- > 0 && found == entries_.size();) {
    // The newest entry first: after automatic dynamic it is the general one.
    try {
      b = entries_[i].bind_plan->bind(args);
      found = i;
    } catch (const TraceError& e) {
      if (why.empty() || i == 0) why = e.what();
    }
  }
  if (found == entries_.size()) {
    // Automatic dynamic: dims whose size changed since the last compile
    // turn dynamic, and the method is compiled once more with them.
    const std::vector<DimMark> changed = automatic ? profile_.changed_dims(args) : std::vector<DimMark>{};
    profile_.merge(changed);
    CallStatus s;
    s.outcome = Outcome::recompiled;
    s.entry = entries_[0].status.entry;
    std::string dims;
    for (const auto& m : changed) dims += (dims.empty() ? "" : ", ") + compiler::dim_text(m);
    if (!changed.empty()) {
      s.reason = "recompiled with " + dims + " dynamic (automatic dynamic: the size changed)";
      log::info("{}: {} changed size; compiling it again with them dynamic (automatic dynamic)", *label_, dims);
    } else {
      s.reason = "recompiled: " + why;
    }
    std::optional<compiler::FirstEntry> kept;
    if (source_ && !changed.empty()) kept = source_->recompile_dynamic(args, trace, compile_step, profile_.learned());
    if (kept) {
      // A hit, or (under MPI) another rank's compile: otherwise recompiled here.
      const Outcome o = kept->status.outcome;
      kept->status.outcome = o == Outcome::hit || o == Outcome::fetched ? o : Outcome::recompiled;
      if (kept->status.reason.empty() || kept->status.outcome == Outcome::recompiled) kept->status.reason = s.reason;
      b = kept->graph->trace.signature.bind(args);
      add(std::move(kept->graph), std::move(kept->status), std::move(kept->templates));
    } else {
      TraceResult tr = trace();
      b = tr.signature.bind(args);
      if (source_) {
        source_->recompiled(tr, why);
        source_.reset();
      }
      add(compile(std::move(tr), b, device), std::move(s));
    }
    found = entries_.size() - 1;
    profile_.note_compiled(args);
    cover_captured_shapes(found);
  }
  if (config_.captures()) covers = take_covers(device);
  entry = found;
  if (traced && keep) keep(found);
  CallStatus& status = statuses_[std::this_thread::get_id()];
  status = entries_[found].status;
  status.compiles = compiles_;
  status.dynamic_dims = learned_dims();
  status.captures = budget_->made();
  status.replayed = false;
  return b;
}

namespace {

// Times the first run of a first call served by a source, and tells the
// source when the run ends (ran: it returned; else it threw).
class FirstRun {
 public:
  explicit FirstRun(std::optional<CompiledFunction::FirstEnd> end) : end_(std::move(end)) {}
  FirstRun(const FirstRun&) = delete;
  FirstRun& operator=(const FirstRun&) = delete;
  ~FirstRun() {
    if (!end_) return;
    end_->end.run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    end_->end.ran = std::uncaught_exceptions() == exceptions_;
    end_->source->first_call_end(end_->end);
  }

 private:
  std::optional<CompiledFunction::FirstEnd> end_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  int exceptions_ = std::uncaught_exceptions();
};

}  // namespace

std::vector<Tensor> CompiledFunction::call(const FlatArgs& args, const TraceFn& trace, std::size_t& entry,
                                           const KeepFn& keep) {
  const SymBindings b = select(args, trace, entry, keep);
  const FirstRun first_run(take_first_end());
  std::vector<Tensor> inputs;
  inputs.reserve(args.tensors.size());
  for (const auto& [path, t] : args.tensors) inputs.push_back(t);
  const int device = call_device(args);
  compiler::ProgramRunner* runner = nullptr;
  const std::vector<Tensor>* params = nullptr;
  const std::set<std::string>* paddable = nullptr;
  std::shared_ptr<const compiler::DeviceProgram> program;
  {
    std::lock_guard lock(mu_);
    Entry& e = entries_[entry];
    program = e.program;
    auto& r = e.runners[device];
    if (!r) {
      r = std::make_unique<compiler::ProgramRunner>(e.program, device);
      r->set_templates(e.templates);
    }
    runner = r.get();
    params = &e.params;
    if (surface_.shape_handling && config_.captures()) {
      if (!e.paddable) {
        const TraceResult& t = e.graph->trace;  // rows are followed through region bodies linked in
        e.paddable = compiler::paddable_symbols(
            *e.program, t.regions.empty() ? t.graph : compiler::link_regions(t.graph, t.regions));
      }
      paddable = &*e.paddable;  // set once, never changed: read outside the lock
    }
  }
  if (config_.captures()) {
    const compiler::ReplayOptions ro = replay_options();
    if (paddable && !paddable->empty())
      if (auto padded = replay_padded(*program, *paddable, *runner, inputs, *params, b, ro)) return std::move(*padded);
    bool replayed = false;
    const std::size_t made = runner->captures() + runner->restores();
    auto outs = runner->replay(inputs, *params, b, current_communicator(), ro, &replayed);
    std::vector<CoverTask> covers;
    {
      std::lock_guard lock(mu_);
      if (runner->captures() + runner->restores() != made) {
        note_captured_shape(args, device, entry);
        covers = take_covers(device);
      }
    }
    cover(covers);
    std::lock_guard lock(mu_);
    CallStatus& status = statuses_[std::this_thread::get_id()];
    status.replayed = replayed;
    note_templates(status);
    return outs;
  }
  return runner->run(inputs, *params, b, current_communicator());
}

struct SegmentedCall::Impl {
  CompiledFunction& f;
  const PrepareHints* hints;  // a prepare(), or null
  CompiledFunction::PieceCounts counts;
  std::size_t reads = 0;  // host reads the hints were asked for
  nn::LazySession session;
  Impl(CompiledFunction& fn, const nn::Module& module, const PrepareHints* h)
      : f(fn), hints(h), session(module, fn.trace_options(), fn.unlowerable(), [this](nn::Piece& p) {
          return hints ? f.prepare_piece(p, counts) : f.run_piece(p, counts);
        }) {
    if (hints) session.prepare_only([this](const nn::MetaRead& r) { return hinted(r); });
  }
  std::optional<std::vector<double>> hinted(const nn::MetaRead& r) {
    const HostRead read{reads++, r.access, r.op, r.type};
    if (read.index < hints->values.size()) return hints->values[read.index];
    if (hints->value) return hints->value(read);
    return std::nullopt;
  }
  // Why a prepare() stopped: the break of the read (the one at the op that
  // computed the tensor read, else the latest) and the read.
  std::string stopped_at() const {
    const auto& r = session.stopped();
    if (!r) return "";
    const auto& breaks = session.breaks();
    std::string text;
    for (std::size_t i = breaks.size(); i-- > 0 && text.empty();)
      if (breaks[i].op == r->op || i == 0)
        text = "graph break " + std::to_string(i + 1) + " in " + f.label() + " at op " + breaks[i].op + ": " +
               breaks[i].reason + "; ";
    return text + "no value for " + r->access + "() of " + r->of + " (" + type_str(r->type) +
           ") (a hint gives it): the pieces after it are not prepared";
  }
};

SegmentedCall::SegmentedCall(CompiledFunction& f, const nn::Module& module, const PrepareHints* hints)
    : impl_(std::make_unique<Impl>(f, module, hints)) {}
SegmentedCall::~SegmentedCall() = default;
void SegmentedCall::finish() {
  impl_->session.finish();
  impl_->f.note_segmented_call(impl_->session.breaks(), impl_->counts, impl_->hints != nullptr,
                               impl_->stopped_at());  // a stop the method caught still stopped it
}
bool SegmentedCall::stopped() const { return impl_->session.stopped().has_value(); }
void SegmentedCall::stop() {
  impl_->f.note_segmented_call(impl_->session.breaks(), impl_->counts, impl_->hints != nullptr, impl_->stopped_at());
}

std::vector<Tensor> call(CompiledFunction& f, const FlatArgs& args, const TraceFn& trace, std::size_t& entry,
                         const KeepFn& keep) {
  return f.call(args, trace, entry, keep);
}
void prepare(CompiledFunction& f, const FlatArgs& args, const TraceFn& trace, std::size_t& entry, const KeepFn& keep) {
  const SymBindings b = f.select(args, trace, entry, keep);
  f.prepare_capture(entry, b, args.tensors.empty() ? current_device() : args.tensors.front().second.device(), args);
  if (auto first = f.take_first_end()) first->source->first_call_end(first->end);  // ready; nothing ran
}
const TraceOptions& trace_options(const CompiledFunction& f) { return f.trace_options(); }
bool runs_eagerly(const CompiledFunction& f) { return f.runs_eagerly(); }
bool is_segmented(const CompiledFunction& f) { return f.is_segmented(); }
void graph_break(CompiledFunction& f, const GraphBreakError& e) { f.graph_break(e); }
void note_eager_call(CompiledFunction& f) { f.note_eager_call(); }
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
    case Outcome::eager: return "eager";
    case Outcome::none: return "none";
    case Outcome::partial: return "partial";
  }
  return "unknown";
}

}  // namespace npucache
