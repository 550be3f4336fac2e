// What the compiler needs from the front end beyond the public API: the
// device memory behind eager tensors (the executor binds it to programs and
// wraps program outputs), and re-tracing functions over Tensors into a new
// graph (the decompose pass).
#pragma once

#include <npucache/ir/graph.h>
#include <npucache/runtime/memory.h>
#include <npucache/runtime/pool.h>
#include <npucache/tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace npucache::detail {
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

}  // namespace npucache::nn
