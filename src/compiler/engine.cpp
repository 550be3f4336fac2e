#include "compiler/engine.h"
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

// The profile marks of pieces: input "piece#<place>:<site>", dim the
// site's index (nn/piece_shapes.h).
constexpr std::string_view kPieceMark = "piece#";

class CompiledFunction {
 public:
  struct Entry {
    std::shared_ptr<compiler::CompiledGraph> graph;
    // Binds a call against graph->trace.signature (which never changes
    // once the graph is added).
    std::shared_ptr<const nn::BindPlan> bind_plan;
    std::shared_ptr<compiler::TemplateStore> templates;  // reduce-overhead with a cache
    std::shared_ptr<const compiler::DeviceProgram> program;
    std::map<int, std::unique_ptr<compiler::ProgramRunner>> runners;  // per device
    std::vector<Tensor> params;
    CallStatus status;  // how this entry was obtained
    // enable_shape_handling: the symbols a call may be padded along (found
    // on the entry's first call).
    std::optional<std::set<std::string>> paddable;
  };

  CompiledFunction(const nn::Module& module, CompileOptions options, std::shared_ptr<compiler::EntrySource> source)
      : module_(module),
        options_(std::move(options)),
        surface_(compiler::resolve_surface(options_)),
        config_(surface_.config),
        source_(std::move(source)),
        label_(std::make_shared<const std::string>(module.type_name() + "." + options_.method_name)),
        profile_(options_.mark_dynamic, options_.mark_static),
        budget_(std::make_shared<compiler::CaptureBudget>(surface_.capture_limit, label_)),
        cached_(source_ != nullptr) {
    base_trace_.dynamic = surface_.dynamic == compiler::DynamicPolicy::all;
    base_trace_.method_name = options_.method_name;
    base_trace_.arg_names = options_.arg_names;
    base_trace_.regions = options_.regions;
    if (!surface_.fullgraph) base_trace_.unlowerable = unlowerable();
  }

  std::vector<Tensor> call(const FlatArgs& args, const TraceFn& trace, std::size_t& entry, const KeepFn& keep);
  // The entry matching `args` (obtained from the source on the first call,
  // else traced and compiled when none matches) and the call's bindings;
  // `keep` is called under the lock when the method was traced.
  // Templates of shapes captured earlier, for newer programs, are made
  // after the lock is released (cover()).
  SymBindings select(const FlatArgs& args, const TraceFn& given_trace, std::size_t& entry, const KeepFn& keep);

  // The options a call's arguments are flattened and traced with (the
  // caller holds mu_ when the profile may change under it).
  const TraceOptions& trace_options() const { return base_trace_; }
  bool runs_eagerly() const { return surface_.disable; }

  // --- graph breaks ---------------------------------------------------------
  // Why an op cannot be part of a compiled piece: random numbers in a
  // captured or cached graph would repeat.
  std::function<std::string(Op)> unlowerable() const {
    const bool capture = config_.captures(), cached = cached_;
    return [capture, cached](Op op) -> std::string {
      if (!op_info(op).rng) return "";
      if (capture)
        return "it draws random numbers, which a captured graph would repeat on every replay; it runs eagerly";
      if (cached)
        return "it draws random numbers, which a cached program would repeat in every process; it runs eagerly";
      return "";
    };
  }
  bool is_segmented() const {
    std::lock_guard lock(mu_);
    return segmented_;
  }
  void graph_break(const GraphBreakError& e) {
    if (surface_.fullgraph)
      throw GraphBreakError(e.kind(), e.op(),
                            e.reason() +
                                "; fullgraph=true needs the method to trace to one graph: remove it, "
                                "or compile with fullgraph=false to split the method there",
                            *label_);
    std::lock_guard lock(mu_);
    if (!segmented_)
      log::info("graph break in {} at op {}: {}; the method runs as compiled pieces with eager code between them",
                *label_, e.op(), e.reason());
    segmented_ = true;
  }
  // The pieces one call of a split method used: how many, and how their
  // entries were obtained (by this call or an earlier one).
  struct PieceCounts {
    std::size_t pieces = 0;
    std::size_t compiled = 0, loaded = 0;  // obtained by this call
    bool any_compiled = false;             // a piece whose entry was compiled here, not loaded
    bool any_loaded = false;               // a piece whose entry was loaded from the cache
  };
  // Runs one piece of a split method: found by its content, else obtained
  // (the piece's cache source, or a compile) once.
  std::vector<Tensor> run_piece(nn::Piece& piece, PieceCounts& counts);
  // prepare(): obtains the piece as run_piece does (and, capturing with a
  // cache, keeps its capture template) without running it; returns meta
  // tensors of its outputs' types.
  std::vector<Tensor> prepare_piece(nn::Piece& piece, PieceCounts& counts);
  // Records the call's status: `prepared` for a prepare(), `stopped_at`
  // non-empty when it stopped at a host read (Outcome::partial).
  void note_segmented_call(const std::vector<nn::GraphBreak>& breaks, const PieceCounts& c, bool prepared,
                           const std::string& stopped_at) {
    std::lock_guard lock(mu_);
    CallStatus& s = statuses_[std::this_thread::get_id()];
    s = CallStatus{};
    // How the programs it ran were obtained; nothing is "compiled" that was
    // not: a call of no piece obtained nothing.
    s.outcome = !stopped_at.empty() ? Outcome::partial
                : c.any_compiled    ? Outcome::compiled
                : c.any_loaded      ? Outcome::hit
                                    : Outcome::none;
    s.cached = cached_ && source_ != nullptr;
    s.compiles = compiles_;
    s.captures = budget_->made();
    s.replayed = config_.captures() && !prepared;
    s.dynamic_dims = learned_dims();
    s.pieces = c.pieces;
    s.stopped_at = stopped_at;
    for (const auto& b : breaks)
      s.graph_breaks.push_back("graph break in " + *label_ + " at op " + b.op + ": " + b.reason);
    const std::string breaks_text = std::to_string(breaks.size()) + " graph break" + (breaks.size() == 1 ? "" : "s");
    if (prepared)
      s.reason = "prepared " + std::to_string(c.pieces) + " piece" + (c.pieces == 1 ? "" : "s") +
                 " without running them (" + std::to_string(c.compiled) + " compiled, " + std::to_string(c.loaded) +
                 " from the cache), " + breaks_text + (stopped_at.empty() ? "" : "; stopped at a host read");
    else
      s.reason = breaks_text + ", " + std::to_string(breaks.size() + 1) + " pieces at most";
    if (config_.captures()) note_templates(s);
  }
  std::string label() const { return *label_; }
  const nn::Module& module() const { return module_; }

  // The capture counts of every runner of the method (caller holds mu_).
  void note_templates(CallStatus& s) const {
    s.captures = budget_->made();
    s.recorded = s.restored = s.recaptured = 0;
    auto add = [&s](const compiler::ProgramRunner& r) {
      s.recorded += r.captures();
      s.restored += r.restores();
      s.recaptured += r.recaptures();
      if (r.recaptures()) s.recapture_reason = "recaptured: " + r.recapture_reason();
    };
    for (const auto& e : entries_)
      for (const auto& [dev, r] : e.runners) add(*r);
    for (const auto& [key, e] : pieces_)  // a split method's pieces
      for (const auto& [dev, r] : e.runners) add(*r);
  }
  // prepare() of a captured method: the call's binding captured without
  // running (no values needed) so that its template is kept.
  void prepare_capture(std::size_t entry, const SymBindings& b, int device, const FlatArgs& args) {
    if (!config_.captures()) return;
    compiler::ProgramRunner* runner = nullptr;
    {
      std::lock_guard lock(mu_);
      Entry& e = entries_[entry];
      if (!e.templates) return;  // nothing would keep it
      auto& r = e.runners[device];
      if (!r) {
        r = std::make_unique<compiler::ProgramRunner>(e.program, device);
        r->set_templates(e.templates);
      }
      runner = r.get();
    }
    if (!budget_->take()) return;
    runner->capture_template(b, current_communicator());
    std::vector<CoverTask> covers;
    {
      std::lock_guard lock(mu_);
      note_captured_shape(args, device, entry);
      covers = take_covers(device);
    }
    cover(covers);
    std::lock_guard lock(mu_);
    note_templates(statuses_[std::this_thread::get_id()]);
  }

  // --- templates of every captured shape (reduce-overhead with a cache) ----
  // A start with the final dynamic-shape profile runs every shape on the
  // newest program, so a shape captured on an earlier one (a request thread
  // that finished its calls before automatic dynamic compiled the general
  // program) has its template made for the newest as well: when the newest
  // is added, or when the shape is captured after it was. Under the lock
  // the work is only noted (pending per device); a thread of that device
  // takes its device's part (take_covers) and captures it after the lock is
  // released (cover): a capture stores the calling thread's communicator,
  // so a device's templates are made by a thread of that device. These
  // captures are not the user's (capture_limit, status().captures): they
  // are bounded by the shapes remembered (kMaxCapturedShapes), each made at
  // most once per newer program.
  struct CapturedShape {
    std::vector<std::pair<std::string, TensorType>> tensors;
    std::vector<GuardSpec> values;
    std::vector<std::pair<std::string, int64_t>> symints;
    int device = 0;
  };
  // Shape `shape` on the newest entry in [from, to) that it binds to.
  struct PendingCover {
    std::size_t shape = 0, from = 0, to = 0;
  };
  struct CoverTask {
    compiler::ProgramRunner* runner = nullptr;
    SymBindings binding;
  };
  // Caller holds mu_.
  void note_captured_shape(const FlatArgs& args, int device, std::size_t entry) {
    if (!config_.captures()) return;
    CapturedShape shape;
    shape.device = device;
    std::string key = std::to_string(device);
    for (const auto& [path, t] : args.tensors) {
      shape.tensors.emplace_back(path, t.type());
      key += "|" + path + ":" + type_str(shape.tensors.back().second);
    }
    shape.values = args.values;
    for (const auto& v : args.values) key += "|" + v.path + "=" + v.value;
    shape.symints = args.symints;
    for (const auto& [path, v] : args.symints) key += "|" + path + "=" + std::to_string(v);
    if (captured_shapes_.size() >= kMaxCapturedShapes || !captured_shape_keys_.insert(key).second) return;
    captured_shapes_.push_back(std::move(shape));
    if (entry + 1 < entries_.size())
      pending_covers_[device].push_back({captured_shapes_.size() - 1, entry + 1, entries_.size()});
  }
  // Notes every shape captured before for entry `entry`, just added (caller
  // holds mu_).
  void cover_captured_shapes(std::size_t entry) {
    if (!config_.captures() || !entries_[entry].templates) return;
    for (std::size_t k = 0; k < captured_shapes_.size(); ++k)
      pending_covers_[captured_shapes_[k].device].push_back({k, entry, entry + 1});
  }
  // The pending templates of `device`'s shapes, with their runners (caller
  // holds mu_).
  std::vector<CoverTask> take_covers(int device) {
    std::vector<CoverTask> out;
    const auto it = pending_covers_.find(device);
    if (it == pending_covers_.end()) return out;
    for (const PendingCover& p : it->second) {
      const CapturedShape& shape = captured_shapes_[p.shape];
      for (std::size_t i = p.to; i-- > p.from;) {
        Entry& e = entries_[i];
        if (!e.templates) continue;
        SymBindings b;
        try {
          b = e.graph->trace.signature.bind(shape.tensors, shape.values, shape.symints);
        } catch (const TraceError&) {
          continue;
        }
        auto& r = e.runners[device];
        if (!r) {
          r = std::make_unique<compiler::ProgramRunner>(e.program, device);
          r->set_templates(e.templates);
        }
        out.push_back({r.get(), std::move(b)});
        break;
      }
    }
    pending_covers_.erase(it);
    return out;
  }
  // Makes the templates (no call: a capture without values); the caller
  // does not hold mu_.
  void cover(const std::vector<CoverTask>& tasks) {
    for (const CoverTask& t : tasks) {
      if (t.runner->has_capture(t.binding)) continue;
      try {
        t.runner->capture_template(t.binding, current_communicator());
      } catch (const Error& err) {
        log::debug("{}: no template of a shape captured earlier for its newer program: {}", *label_, err.what());
      }
    }
  }
  static constexpr std::size_t kMaxCapturedShapes = 1024;

  compiler::ReplayOptions replay_options() {
    compiler::ReplayOptions ro;
    ro.inputs = config_.input_handling;
    ro.fresh_outputs = options_.replay_outputs == ReplayOutputs::fresh;
    ro.method = label_;
    ro.call = ++calls_;
    ro.budget = budget_;
    return ro;
  }
  // enable_shape_handling: the call padded up to the nearest captured size
  // and replayed, the padding sliced off; nullopt when no capture fits (or
  // padding was found to change results).
  std::optional<std::vector<Tensor>> replay_padded(const compiler::DeviceProgram& p,
                                                   const std::set<std::string>& paddable,
                                                   compiler::ProgramRunner& runner, const std::vector<Tensor>& inputs,
                                                   const std::vector<Tensor>& params, const SymBindings& b,
                                                   const compiler::ReplayOptions& ro);
  void note_eager_call() {
    std::lock_guard lock(mu_);
    CallStatus& s = statuses_[std::this_thread::get_id()];
    s = CallStatus{};
    s.outcome = Outcome::eager;
    s.reason = "disabled (CompileOptions::disable): the method ran eagerly";
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
  // The first call's end, for its source (EntrySource::first_call_end):
  // taken once, by the thread that made the first call.
  struct FirstEnd {
    std::shared_ptr<compiler::EntrySource> source;
    compiler::EntrySource::FirstCallEnd end;
  };
  std::optional<FirstEnd> take_first_end() {
    std::lock_guard lock(mu_);
    if (!first_end_ || first_end_thread_ != std::this_thread::get_id()) return std::nullopt;
    std::optional<FirstEnd> e = std::move(first_end_);
    first_end_.reset();
    return e;
  }

 private:
  // select() under the lock; `covers` are the templates the caller makes
  // once it is released.
  SymBindings select_locked(const FlatArgs& args, const TraceFn& given_trace, std::size_t& entry, const KeepFn& keep,
                            std::vector<CoverTask>& covers);
  // The engine's one compile call. Hints of a stored graph-only artifact
  // (`optimized`) make it a lowering, not a compile: only full compiles
  // (regions compiled before taken or not) are counted.
  std::shared_ptr<compiler::CompiledGraph> compile(TraceResult tr, const SymBindings& example, int device,
                                                   const compiler::CompileHints* hints = nullptr,
                                                   bool symbolic = false) {
    const bool dynamic = symbolic || surface_.dynamic == compiler::DynamicPolicy::all || profile_.has_learned() ||
                         !options_.mark_dynamic.empty();
    auto g = std::make_shared<compiler::CompiledGraph>(compiler::compile_graph(
        std::move(tr), config_, options_.custom_decompositions, example, dynamic, device, hints));
    if (hints == nullptr || hints->optimized == nullptr) ++compiles_;
    if (surface_.trace_enabled) {
      const std::string folder = compiler::write_debug_trace(surface_.debug_dir, *label_, ++traced_compiles_, *g);
      log::info("trace.enabled: {} compile {} written to {}", *label_, traced_compiles_, folder);
    }
    return g;
  }

  void add(std::shared_ptr<compiler::CompiledGraph> g, CallStatus status,
           std::shared_ptr<compiler::TemplateStore> templates = nullptr) {
    Entry e;
    e.graph = std::move(g);
    e.bind_plan = std::make_shared<const nn::BindPlan>(e.graph->trace.signature);
    e.templates = std::move(templates);
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

  // Traces with the current profile; when a dim learned dynamic has size 0
  // or 1 in this call and the graph traced with it symbolic does not fit
  // the call, traces again with that dim static.
  TraceResult trace_current(const FlatArgs& args, const TraceFn& given) {
    TraceOptions t = trace_options();
    profile_.apply(t);
    if (!profile_.has_learned()) return given(t);
    TraceOptions fallback = trace_options();
    profile_.apply(fallback, &args);
    if (fallback.dynamic_dims == t.dynamic_dims) return given(t);
    try {
      TraceResult tr = given(t);
      (void)tr.signature.bind(args);
      return tr;
    } catch (const Error&) {
      return given(fallback);
    }
  }

  const std::vector<std::string>& learned_dims() {
    if (learned_text_.size() != profile_.learned().size()) {
      learned_text_.clear();
      for (const auto& m : profile_.learned()) learned_text_.push_back(compiler::dim_text(m));
    }
    return learned_text_;
  }

  const nn::Module& module_;
  CompileOptions options_;
  compiler::Surface surface_;
  CompilerConfig config_;
  // Guards everything below but the call counter: a call selects its entry
  // (and obtains or compiles it) under the lock, then runs outside it.
  mutable std::mutex mu_;
  std::deque<Entry> entries_;  // a deque: entries never move once added
  std::shared_ptr<compiler::EntrySource> source_;
  bool first_call_done_ = false;
  double first_call_seconds_ = 0;
  std::optional<FirstEnd> first_end_;  // until the first call's thread takes it
  std::thread::id first_end_thread_;
  std::size_t compiles_ = 0;
  mutable std::map<std::thread::id, CallStatus> statuses_;  // per calling thread
  std::shared_ptr<const std::string> label_;                // "Model.decode"
  std::atomic<uint64_t> calls_{0};
  compiler::DynamicProfile profile_;
  std::shared_ptr<compiler::CaptureBudget> budget_;
  std::size_t traced_compiles_ = 0;
  // Graph breaks: whether the method is split, and its pieces by content.
  bool cached_ = false;
  bool segmented_ = false;
  struct PieceEntry;
  // The entry of `piece` (found by its content, else obtained once) and its
  // runner on `device`, counted in `counts`; the caller holds mu_.
  std::pair<PieceEntry*, compiler::ProgramRunner*> piece_entry(nn::Piece& piece, PieceCounts& counts, SymBindings& b);
  struct PieceEntry {
    std::shared_ptr<compiler::CompiledGraph> graph;
    std::shared_ptr<compiler::TemplateStore> templates;
    std::shared_ptr<const compiler::DeviceProgram> program;
    std::map<int, std::unique_ptr<compiler::ProgramRunner>> runners;
    std::vector<Tensor> params;
    bool loaded = false;  // from the cache
    // A general piece (automatic dynamic): the graph a recording must
    // match (nn::match) to run it; null for a piece of static shapes.
    std::shared_ptr<const TraceResult> general;
  };
  std::map<std::string, PieceEntry> pieces_;
  // Automatic dynamic of pieces, per place in a call (nn/piece_shapes.h).
  struct PiecePlace {
    // The static piece that served this place last and its graph: a
    // recording equal to it (every node, the parameters read, the outputs)
    // has its key, so it runs without hashing.
    std::optional<Graph> served_graph;
    std::map<std::string, PieceEntry>::iterator served;
    std::optional<Graph> last;              // the last recording no piece served
    std::vector<nn::PieceSite> sites;       // the sites made dynamic, sorted
    std::vector<std::string> general_keys;  // its general pieces, newest first
    bool static_only = false;               // a general form failed to compile: static pieces
  };
  std::map<std::size_t, PiecePlace> places_;
  bool piece_profile_loaded_ = false;
  using PieceIt = std::map<std::string, PieceEntry>::iterator;
  // The piece under `key` for the recording `trace` (caller holds mu_):
  // the source's (stored or compiled and kept), else compiled here.
  PieceIt add_piece(const std::string& key, const TraceResult& trace, const FlatArgs& args, int device, bool symbolic,
                    std::size_t& compiled, std::size_t& loaded);
  // Automatic dynamic (caller holds mu_): a general piece of the
  // recording's place that matches it (`b`, `args.symints` set), made
  // after its sites changed; end() when the piece runs static.
  PieceIt general_piece(const nn::Piece& piece, FlatArgs& args, int device, SymBindings& b, std::size_t& compiled,
                        std::size_t& loaded);
  // The options calls are flattened and traced with (the profile's marks
  // are added per trace).
  TraceOptions base_trace_;
  // learned_dims() as of the last change of the profile.
  std::vector<std::string> learned_text_;
  // enable_shape_handling: (bucket, size) pairs checked against an unpadded
  // run, and whether padding still holds for the method.
  std::set<std::string> padding_checked_;
  bool padding_ok_ = true;
  // note_captured_shape: the shapes of calls that captured or restored.
  std::vector<CapturedShape> captured_shapes_;
  std::set<std::string> captured_shape_keys_;
  std::map<int, std::vector<PendingCover>> pending_covers_;  // by device
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

namespace {

// A piece's key: its computation (graph), its input types, its SymInt
// inputs and the parameters it reads (bound_names: same-shaped layers split
// at host reads have one structure and are other programs).
std::string piece_key(const TraceResult& t) {
  std::string key = canonical_hash(t.graph).hex();
  for (const auto& in : t.signature.inputs) key += "|" + type_str(in.type);
  for (const auto& si : t.signature.sym_inputs) key += "|" + si.path + "=" + si.expr.str();
  key += "|reads";
  for (const auto& name : bound_names(t.graph)) key += "|" + name;
  return key;
}

std::string site_text(const std::vector<nn::PieceSite>& sites) {
  std::string out;
  for (const auto& s : sites) out += (out.empty() ? "" : ", ") + s.where + "[" + std::to_string(s.index) + "]";
  return out;
}

int piece_device(const nn::Piece& piece) {
  return piece.inputs.empty() ? current_device() : piece.inputs.front().device();
}

}  // namespace

CompiledFunction::PieceIt CompiledFunction::add_piece(const std::string& key, const TraceResult& trace,
                                                      const FlatArgs& args, int device, bool symbolic,
                                                      std::size_t& compiled, std::size_t& loaded) {
  // A recording is checked once, when its piece is made: a later one equal
  // to it (by key or graph) is the same graph.
  verify(trace.graph);
  PieceEntry e;
  const compiler::CompileStep compile_step = [&](TraceResult tr, const SymBindings& example,
                                                 const compiler::CompileHints* hints) {
    return compile(std::move(tr), example, device, hints, symbolic);
  };
  std::shared_ptr<compiler::EntrySource> src;
  if (source_) {
    XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
    src = source_->piece_source(options_.method_name + ".piece-" + Hash128{h.high64, h.low64}.hex().substr(0, 16));
  }
  if (src) {
    TraceResult named = trace;
    named.name = *label_ + " piece";
    compiler::FirstEntry first = src->first_call(
        args, [&] { return named; }, compile_step);
    e.graph = std::move(first.graph);
    e.templates = std::move(first.templates);
    e.loaded = first.status.outcome == Outcome::hit;
  } else {
    e.graph = compile(trace, trace.signature.bind(args), device, nullptr, symbolic);
  }
  e.program = std::shared_ptr<const compiler::DeviceProgram>(e.graph, &e.graph->program);
  e.params = resolve_params(*e.program);
  ++(e.loaded ? loaded : compiled);
  return pieces_.emplace(key, std::move(e)).first;
}

CompiledFunction::PieceIt CompiledFunction::general_piece(const nn::Piece& piece, FlatArgs& args, int device,
                                                          SymBindings& b, std::size_t& compiled, std::size_t& loaded) {
  if (surface_.dynamic == compiler::DynamicPolicy::none) return pieces_.end();
  if (!piece_profile_loaded_) {
    // The places' sites earlier processes made dynamic (the method's
    // profile); a profile that cannot be read is warned about by the source.
    piece_profile_loaded_ = true;
    std::vector<DimMark> stored;
    if (source_ && surface_.dynamic == compiler::DynamicPolicy::automatic) source_->load_profile(args, stored);
    for (const auto& m : stored) {
      if (!m.input.starts_with(kPieceMark)) continue;
      const std::string rest = m.input.substr(kPieceMark.size());
      const auto colon = rest.find(':');
      if (colon == std::string::npos || colon == 0 || colon > 6 || rest.find_first_not_of("0123456789") != colon)
        continue;
      PiecePlace& p = places_[std::stoul(rest.substr(0, colon))];
      const nn::PieceSite site{rest.substr(colon + 1), m.dim};
      if (std::find(p.sites.begin(), p.sites.end(), site) == p.sites.end())
        p.sites.insert(std::upper_bound(p.sites.begin(), p.sites.end(), site), site);
    }
  }
  PiecePlace& place = places_[piece.index];
  for (const auto& k : place.general_keys) {
    auto it = pieces_.find(k);
    if (auto m = nn::match(*it->second.general, piece.trace.graph, &args.symints)) {
      b = std::move(*m);
      return it;
    }
  }
  // No piece serves the recording: the sites that changed since the last
  // such recording of this place turn dynamic (dynamic=true: all of them).
  std::vector<nn::PieceSite> changed;
  if (surface_.dynamic == compiler::DynamicPolicy::all)
    changed = nn::all_sites(piece.trace.graph);
  else if (place.last)
    changed = nn::changed_sites(*place.last, piece.trace.graph).value_or(std::vector<nn::PieceSite>{});
  place.last = piece.trace.graph;
  std::vector<nn::PieceSite> added;
  for (const auto& site : changed)
    if (!std::binary_search(place.sites.begin(), place.sites.end(), site)) {
      place.sites.insert(std::upper_bound(place.sites.begin(), place.sites.end(), site), site);
      added.push_back(site);
    }
  if (!added.empty() && surface_.dynamic == compiler::DynamicPolicy::automatic) {
    log::info("{}: piece {} changed {}; compiling it again with them dynamic (automatic dynamic)", *label_, piece.index,
              site_text(added));
    if (source_) {
      std::vector<DimMark> marks;
      for (const auto& site : added)
        marks.push_back({std::string(kPieceMark) + std::to_string(piece.index) + ":" + site.where, site.index});
      source_->save_profile(marks);
    }
  }
  if (place.sites.empty()) return pieces_.end();
  std::optional<TraceResult> general = nn::generalize(piece.trace, place.sites);
  if (!general) return pieces_.end();
  std::optional<SymBindings> m = nn::match(*general, piece.trace.graph, &args.symints);
  if (!m) return pieces_.end();  // not expected: the recording is the general graph at its own sizes
  const std::string key = piece_key(*general);
  auto it = pieces_.find(key);
  if (it == pieces_.end()) {
    it = add_piece(key, *general, args, device, true, compiled, loaded);
    it->second.general = std::make_shared<const TraceResult>(std::move(*general));
  }
  if (!it->second.general) return pieces_.end();
  if (std::find(place.general_keys.begin(), place.general_keys.end(), key) == place.general_keys.end())
    place.general_keys.insert(place.general_keys.begin(), key);
  b = std::move(*m);
  return it;
}

std::pair<CompiledFunction::PieceEntry*, compiler::ProgramRunner*> CompiledFunction::piece_entry(nn::Piece& piece,
                                                                                                 PieceCounts& counts,
                                                                                                 SymBindings& b) {
  const int device = piece_device(piece);
  FlatArgs args;
  for (std::size_t i = 0; i < piece.inputs.size(); ++i)
    args.tensors.emplace_back(piece.trace.signature.inputs[i].path, piece.inputs[i]);
  PiecePlace& place = places_[piece.index];
  auto it = pieces_.end();
  if (place.served_graph && *place.served_graph == piece.trace.graph) it = place.served;
  if (it == pieces_.end()) {
    const std::string key = piece_key(piece.trace);
    it = pieces_.find(key);
    if (it == pieces_.end()) {
      if (!place.static_only) {
        // The general form is beyond what symbolic shapes hold (an
        // expression past their bounds, a size a decomposition or pass
        // needs as a constant): the place runs static pieces from now on,
        // this call included. A static piece that fails too fails the call
        // with its own error, as eager code would.
        auto stay_static = [&](const Error& e) {
          place.static_only = true;
          b.clear();
          args.symints.clear();
          it = pieces_.end();
          log::info("{}: piece {} stays static: its general form cannot be compiled ({})", *label_, piece.index,
                    e.what());
        };
        try {
          it = general_piece(piece, args, device, b, counts.compiled, counts.loaded);
        } catch (const ShapeError& e) {
          stay_static(e);
        } catch (const VerifyError& e) {
          stay_static(e);
        } catch (const ConfigError& e) {
          stay_static(e);
        }
      }
      if (it == pieces_.end()) it = add_piece(key, piece.trace, args, device, false, counts.compiled, counts.loaded);
    }
    if (!it->second.general) {
      place.served_graph = piece.trace.graph;
      place.served = it;
    }
  }
  ++counts.pieces;
  (it->second.loaded ? counts.any_loaded : counts.any_compiled) = true;
  auto& r = it->second.runners[device];
  if (!r) {
    r = std::make_unique<compiler::ProgramRunner>(it->second.program, device);
    r->set_templates(it->second.templates);
  }
  return {&it->second, r.get()};
}

std::vector<Tensor> CompiledFunction::prepare_piece(nn::Piece& piece, PieceCounts& counts) {
  compiler::ProgramRunner* runner = nullptr;
  bool keep_template = false;
  SymBindings b;
  {
    std::lock_guard lock(mu_);
    auto [e, r] = piece_entry(piece, counts, b);
    runner = r;
    keep_template = config_.captures() && e->templates != nullptr;
  }
  // A capture records addresses, never values: it needs no real tensor.
  if (keep_template && budget_->take()) runner->capture_template(b, current_communicator());
  std::vector<Tensor> outs;
  const Graph& g = piece.trace.graph;
  for (const ValueId v : g.outputs()) {
    const TensorType& t = g.node(v).type;
    outs.push_back(Tensor::meta(concrete_dims(t.shape), t.dtype));
  }
  return outs;
}

std::vector<Tensor> CompiledFunction::run_piece(nn::Piece& piece, PieceCounts& counts) {
  compiler::ProgramRunner* runner = nullptr;
  const std::vector<Tensor>* params = nullptr;
  SymBindings b;
  {
    std::lock_guard lock(mu_);
    auto [e, r] = piece_entry(piece, counts, b);
    runner = r;
    params = &e->params;
  }
  if (config_.captures()) {
    // Every piece replays into the thread's scratch pool with outputs of
    // their own: code after it (later pieces included) reads its outputs,
    // and tensors of the thread's pool that its replay must not overwrite
    // -- arguments fed back from an earlier call, which the method's eager
    // code may read or return after any piece, the last one included
    // (a replay stages only the inputs it reads). So a split method never
    // writes the thread's pool, and its results are its own memory.
    compiler::ReplayOptions ro = replay_options();
    ro.scratch_pool = true;
    return runner->replay(piece.inputs, *params, b, current_communicator(), ro);
  }
  return runner->run(piece.inputs, *params, b, current_communicator());
}

std::optional<std::vector<Tensor>> CompiledFunction::replay_padded(
    const compiler::DeviceProgram& p, const std::set<std::string>& paddable, compiler::ProgramRunner& runner,
    const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, const SymBindings& b,
    const compiler::ReplayOptions& ro) {
  {
    std::lock_guard lock(mu_);
    if (!padding_ok_) return std::nullopt;
  }
  const auto bucket = compiler::nearest_bucket(b, runner.captured_bindings(), paddable);
  if (!bucket) return std::nullopt;
  Communicator& comm = current_communicator();
  const auto padded = compiler::pad_inputs(p, inputs, b, *bucket);
  std::vector<Tensor> outs = compiler::slice_outputs(p, runner.replay(padded, params, *bucket, comm, ro), b, *bucket);
  std::string key;
  for (const auto& [sym, v] : b) key += sym + "=" + std::to_string(v) + "->" + std::to_string(bucket->at(sym)) + ";";
  bool check = false;
  {
    // Marked checked only once a check passed: a thread that comes while
    // another one checks this pair checks it too rather than trusting it.
    std::lock_guard lock(mu_);
    check = !padding_checked_.count(key);
  }
  if (check) {  // the first time this size uses this bucket: compare with an unpadded run
    const std::vector<Tensor> ref = runner.run(inputs, params, b, comm);
    bool same = ref.size() == outs.size();
    for (std::size_t i = 0; same && i < ref.size(); ++i) {
      const auto x = ref[i].to_vector(), y = outs[i].to_vector();
      same = x.size() == y.size();
      for (std::size_t k = 0; same && k < x.size(); ++k)
        same = std::fabs(x[k] - y[k]) <= 1e-5f + 1e-5f * std::fabs(x[k]);
    }
    if (!same) {
      std::lock_guard lock(mu_);
      padding_ok_ = false;
      log::warn(
          "enable_shape_handling: padding {} up to a captured size changes its results (its dynamic dim is "
          "not computed row by row); the method is no longer padded",
          *label_);
      return ref;
    }
  }
  std::lock_guard lock(mu_);
  if (check) padding_checked_.insert(key);
  CallStatus& status = statuses_[std::this_thread::get_id()];
  status.replayed = true;
  status.captures = budget_->made();
  status.reason = "padded to a captured size (enable_shape_handling)";
  return outs;
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
