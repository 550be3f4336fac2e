// The compiled function behind CompiledMethod and nn::compile (private to
// the compiler layer): its entries (one per traced signature), the
// pieces of a method split at graph breaks, the shape profile and
// capture budget. engine.cpp holds the call path (select, compile or
// load, run); engine_pieces.cpp the pieces (add, prepare, run, replay
// padded). Contracts: compiler/engine.h.
#pragma once

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
inline constexpr std::string_view kPieceMark = "piece#";

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

}  // namespace detail
}  // namespace npucache
