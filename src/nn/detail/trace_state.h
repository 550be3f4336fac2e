// The state of the trace active on a thread: the graph being built, the
// shape environment, and the placeholders of the module's parameters.
#pragma once

#include <npucache/trace.h>

#include <npucache/error.h>

#include "nn/detail/tensor_impl.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

namespace npucache::detail {

// Symbols of a dynamic trace with their concrete (hint) values; equates or
// specialises them when ops require it, recording each decision as a guard.
class ShapeEnv final : public DimUnifier {
 public:
  SymExpr fresh(int64_t hint);
  SymExpr resolve(const SymExpr& e) const;
  Shape resolve(const Shape& s) const;
  bool unify(const SymExpr& a, const SymExpr& b) override;
  std::optional<int64_t> specialize(const SymExpr& e) override;
  // True when a <= b under the concrete sizes; records the bound as a guard
  // unless it holds for every size. In a re-trace of a verified graph (no
  // sizes), true unless known not to hold.
  bool require_le(const SymExpr& a, const SymExpr& b) override;
  // The recorded bounds (as recorded: resolve them before use).
  const std::vector<DimBound>& bounds() const { return bounds_; }
  // Every substituted symbol mapped to its final expression, and the
  // remaining symbols renamed s0, s1, ... in order of first appearance in
  // `appearance` (the input shapes).
  std::map<std::string, SymExpr> final_substitutions(const std::vector<Shape>& appearance) const;
  const std::vector<std::string>& guards() const { return guards_; }
  // The symbols equated or specialised so far, each to its expression.
  const std::map<std::string, SymExpr>& substitutions() const { return subst_; }

  // Undoing decisions without copying the environment: between
  // begin_undo() and end_undo(), unify, specialize and require_le log what
  // they change; end_undo(true) puts it all back, end_undo(false) keeps it.
  // (Symbols are not created meanwhile.) Not nested.
  void begin_undo();
  void end_undo(bool rollback);

 private:
  void set_subst(const std::string& sym, SymExpr e);
  std::optional<int64_t> hint(const SymExpr& e) const;
  std::map<std::string, int64_t> hints_;
  std::map<std::string, std::size_t> order_;  // creation order of symbols
  std::map<std::string, SymExpr> subst_;
  std::vector<std::string> guards_;
  std::vector<DimBound> bounds_;
  bool logging_ = false;
  std::vector<std::pair<std::string, std::optional<SymExpr>>> undo_;  // symbol, its earlier substitution
  std::size_t undo_guards_ = 0, undo_bounds_ = 0;
};

// A compile region's body traced in a trace (nn/region.h, region.cpp).
struct RegionBody {
  std::string id;    // "p<k>" while the trace runs; finish() names it by its hash
  std::string name;  // "DecoderLayer.forward"
  Graph graph;
  std::vector<std::string> params;  // its parameter and buffer placeholders' targets, in order
  std::size_t num_args = 0;
  std::vector<int64_t> mutates;  // call operands it updates in place
  std::string collectives;       // "all_reduce:tp all_reduce:tp"
  // The symbols of the call that traced it, in the order its signature
  // numbers them; a later call of the same signature binds its own.
  std::vector<SymExpr> arg_symbols;
  // What the body decided about sizes, over those numbers ("c0", "c1",
  // ...): symbols equated or specialised, and bounds. A later call replays
  // them on its own symbols (when `replayable`: every decision is over the
  // arguments' symbols) instead of tracing the body again.
  bool replayable = false;
  std::vector<std::pair<SymExpr, SymExpr>> decisions;
  std::vector<DimBound> bounds;
  TensorType out;           // its result's type
  TensorType out_numbered;  // the same over the numbers (when replayable)
};

struct TraceState {
  TraceState(const nn::Module* module, const TraceOptions& options);

  // The graph value of an operand: its traced value, or the placeholder of a
  // module parameter/buffer (created on first use). Throws TraceError for
  // other eager tensors and tensors of another trace.
  ValueId value_of(const Tensor& t, const std::string& what);
  Tensor record(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs);
  Tensor wrap(ValueId v);

  uint64_t id;
  const nn::Module* module;  // null: a re-trace of a graph (the compiler's decompositions)
  TraceOptions options;
  Graph graph;
  ShapeEnv shapes;
  InputSignature signature;
  std::unordered_map<const TensorImpl*, std::pair<std::string, PlaceholderKind>> module_tensors;
  std::unordered_map<const TensorImpl*, ValueId> bound;

  // Why `op` cannot be lowered by the compile this trace is for ("" when it
  // can); unset: every op can. Recording such an op is a graph break.
  std::function<std::string(Op)> unlowerable;

  // Compile regions: the bodies traced so far by the signature of their
  // calls, in creation order; `region` names the region whose body this
  // state traces (empty for a method's trace).
  std::map<std::string, std::shared_ptr<RegionBody>> region_bodies;
  std::vector<std::shared_ptr<RegionBody>> region_list;
  // Signatures whose body returned a view of an operand: traced inline.
  std::set<std::string> inline_signatures;
  std::string region;

  // Lazy recording (graph breaks, nn/lazy.h): ops on eager tensors record
  // too, each eager tensor becoming an input of the pending piece, and a
  // graph break runs the pending piece (on_break) instead of failing.
  bool lazy = false;
  std::function<void(GraphBreakError::Kind kind, const std::string& op, const std::string& reason)> on_break;
  // Lazy: every tensor recorded (to materialise the live ones), and the
  // eager tensors the pending piece reads, in placeholder order.
  std::vector<std::pair<std::weak_ptr<TensorImpl>, ValueId>> lazy_values;
  std::vector<std::pair<ValueId, Tensor>> lazy_inputs;
  // Lazy, prepare() (LazySession::prepare_only): pieces are obtained, not
  // run, so their outputs are meta tensors and the eager tensors they update
  // in place keep stale values: `unknown` tells such a tensor (meta, or
  // stale). A meta tensor may then be an input of the pending piece, an op
  // run eagerly on an unknown one gives a meta result, and a host read of
  // one returns what `host_value` gives (which throws when the value cannot
  // be known). Unset: meta tensors are refused.
  std::function<std::vector<double>(const TensorImpl& impl, const char* access)> host_value;
  std::function<bool(const TensorImpl& impl)> unknown;

  // Lazy: whether the pending piece reads (or, with `writes_only`, updates
  // in place) the storage of the eager tensor `impl` -- an input of the
  // piece or a module parameter it uses, or a view of either.
  bool pending_uses(const TensorImpl& impl, bool writes_only) const;
};

// How the host touches an eager tensor's values.
enum class HostAccess { read, write };

// Before the host reads (or writes) the values of the eager tensor `impl`
// while a lazy trace is recording on this thread: runs the pending piece
// when it updates that storage in place (or, for a write, reads or updates
// it), so the host sees and changes values in eager order. `what` names
// the access ("to_vector").
void settle_pending(const TensorImpl& impl, HostAccess access, const char* what);

// While a prepare() session records on this thread (TraceState::host_value
// set): the values the host read `access` of `impl` sees when its value is
// unknown (meta, or stale: TraceState::unknown); nullopt otherwise (the
// storage holds them, or there is no such session and a meta tensor is
// refused by the caller).
std::optional<std::vector<double>> prepared_read(const TensorImpl& impl, const char* access);
// Whether a prepare() session records on this thread and `impl`'s value is
// unknown to it.
bool prepared_unknown(const TensorImpl& impl);

// A graph break at a traced tensor `impl` of the thread's trace: in a lazy
// trace the pending piece runs (`impl` is eager afterwards); otherwise
// throws GraphBreakError naming the op that produced `impl` and `reason`.
void graph_break(const TensorImpl& impl, GraphBreakError::Kind kind, const std::string& reason);

// The trace active on this thread, or nullptr.
TraceState* current_trace();
void set_current_trace(TraceState* t);

// Makes `t` the thread's active trace for a scope (compiler passes that
// re-trace graphs use it).
class ActiveTrace {
 public:
  explicit ActiveTrace(TraceState& t) : previous_(current_trace()) { set_current_trace(&t); }
  ~ActiveTrace() { set_current_trace(previous_); }
  ActiveTrace(const ActiveTrace&) = delete;
  ActiveTrace& operator=(const ActiveTrace&) = delete;

 private:
  TraceState* previous_;
};

}  // namespace npucache::detail
