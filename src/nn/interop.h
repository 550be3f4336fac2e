// What the compiler needs from the front end beyond the public API: the
// device memory behind eager tensors (the executor binds it to programs and
// wraps program outputs), and re-tracing functions over Tensors into a new
// graph (the decompose pass).
#pragma once

#include <npucache/ir/graph.h>
#include <npucache/runtime/memory.h>
#include <npucache/tensor.h>

#include "runtime/pool.h"

#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/trace.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npucache::detail {
struct TensorImpl;
struct TraceState;
class ActiveTrace;
}  // namespace npucache::detail

namespace npucache::nn {

// The message of the MetaTensorError for `what` (e.g. "parameter
// 'layers.0.q_proj.weight'"), a meta tensor of type `type`: what it is and
// what to do (materialise the weights).
std::string meta_tensor_message(const std::string& what, const TensorType& type);

// The storage of an eager tensor. References stay valid while `t` lives.
struct EagerRef {
  const TensorType& type;
  const runtime::BlockPtr& block;
  std::size_t offset;
  int device;
};
// Precondition: t is defined, eager and not meta (checked by the caller,
// who names it).
EagerRef eager_ref(const Tensor& t);
// Throws DeviceError naming `what` when `t` is a replay output that a later
// replay overwrote (runtime/pool.h); nothing for any other tensor.
void check_live(const Tensor& t, const std::string& what);
// Whether `t` is a replay output living in a pool of captured graphs, and
// its ticket (null otherwise).
const std::shared_ptr<const runtime::ReplayTicket>& replay_ticket(const Tensor& t);
// An eager tensor over `bytes` of `block` starting at `offset`; `ticket`
// marks an output living in a pool of captured graphs.
Tensor wrap_eager(runtime::BlockPtr block, std::size_t offset, TensorType type, int device,
                  std::shared_ptr<const runtime::ReplayTicket> ticket = nullptr);

// Ops called while a Retrace is alive on this thread record nodes into its
// graph (as during tracing, without a module).
class Retrace {
 public:
  Retrace();
  ~Retrace();
  Retrace(const Retrace&) = delete;
  Retrace& operator=(const Retrace&) = delete;

  Tensor placeholder(PlaceholderKind kind, const std::string& target, const TensorType& type);
  // Records `op` as it is, without running a decomposition.
  Tensor record(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs);
  // Sets the outputs, verifies and returns the graph.
  Graph finish(const std::vector<Tensor>& outputs);

 private:
  std::unique_ptr<detail::TraceState> state_;
  std::unique_ptr<detail::ActiveTrace> active_;
};

// A method split at graph breaks (CompileOptions::fullgraph=false) runs
// with a LazySession on the calling thread: ops record into a pending piece
// instead of running (eager tensors they read become its inputs, module
// parameters its parameters); a graph break -- a host read, a truth value,
// an op `unlowerable` names -- runs the pending piece through `run` and
// makes every live tensor of it eager, then recording goes on. finish() runs
// what is left. The piece's graph has static shapes and is not verified
// here; `run` compiles it (verifying it first) or finds it compiled, by its
// content, and returns its outputs in order.
struct Piece {
  TraceResult trace;           // inputs "in0", ...; outputs "out0", ...
  std::vector<Tensor> inputs;  // the eager tensors the inputs are
  // The call's last piece (run by finish()). The outputs of an earlier one
  // are read by code after it, later pieces included, so they must outlive
  // every later piece's run (a replay must not leave them in memory the
  // next piece's replay reuses).
  bool last = false;
  // Its place in the call (0 for the first piece): the pieces of one place
  // in successive calls are one computation at the call's sizes, which
  // automatic dynamic compares.
  std::size_t index = 0;
};
using RunPiece = std::function<std::vector<Tensor>(Piece& piece)>;
struct GraphBreak {
  GraphBreakError::Kind kind;
  std::string op, reason;
};

// prepare() (LazySession::prepare_only): a host read of a meta tensor --
// a piece's output that was obtained but not computed, a meta argument --
// as the session's reader is asked for it.
struct MetaRead {
  std::string access;  // "item", "to_vector", "to_vector_i64", "bool"
  std::string op;      // the op that computed the tensor in a piece ("sum (sum_2)"), "" for another tensor
  TensorType type;
  // What the tensor is, in words: the op, "a meta tensor" or "a tensor a
  // prepared piece updates in place".
  std::string of;
};
// The values the read sees (one per element); nullopt: unknown. A read of
// an eager tensor a prepared piece updates in place (its values are stale)
// is asked the same way.
using ReadValue = std::function<std::optional<std::vector<double>>(const MetaRead& read)>;

class LazySession {
 public:
  LazySession(const Module& module, const TraceOptions& options, std::function<std::string(Op)> unlowerable,
              RunPiece run);
  ~LazySession();
  LazySession(const LazySession&) = delete;
  LazySession& operator=(const LazySession&) = delete;

  // Runs what is pending and ends the session on this thread. Without it
  // (an exception unwinds the method), the destructor ends the session and
  // the pending tensors are left unusable (a TraceError names them).
  void finish();
  // The breaks of this call so far, in order.
  const std::vector<GraphBreak>& breaks() const { return breaks_; }
  // Pieces run so far.
  std::size_t pieces() const { return pieces_; }

  // Makes the session a prepare(): `run` obtains each piece without running
  // it and returns meta tensors of its outputs' types, so no value is ever
  // computed (meta weights are never read). Meta tensors may then be inputs
  // of later pieces, and a host read of one sees what `read` gives -- the
  // same values on every read of one piece output; a value of the wrong
  // size is a ConfigError. When `read` gives nothing, the session records
  // the read (stopped()) and throws MetaTensorError: the method stops there,
  // the pieces before the read obtained, none after it.
  void prepare_only(ReadValue read);
  // The read a prepare() stopped at, or nullopt.
  const std::optional<MetaRead>& stopped() const { return stopped_; }

 private:
  void flush(bool last);
  std::unique_ptr<detail::TraceState> state_;
  RunPiece run_;
  std::vector<GraphBreak> breaks_;
  std::size_t pieces_ = 0;
  bool active_ = false;
  // prepare(): the reader, the read it stopped at, and the piece outputs
  // made meta, with the op that computed each and the values read of it.
  ReadValue read_;
  std::optional<MetaRead> stopped_;
  struct MetaOutput {
    std::weak_ptr<detail::TensorImpl> impl;
    std::string op;
    std::optional<std::vector<double>> values;
  };
  std::vector<MetaOutput> meta_outputs_;
  std::vector<runtime::BlockPtr> stale_;  // storage prepared pieces update in place
  std::vector<double> read_meta(const detail::TensorImpl& impl, const char* access);
};

}  // namespace npucache::nn
