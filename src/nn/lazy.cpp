// LazySession (interop.h): recording a method between graph breaks and
// running each piece.
#include <npucache/error.h>

#include "nn/detail/tensor_impl.h"
#include "nn/detail/trace_state.h"
#include "nn/interop.h"

#include <map>

namespace npucache::nn {

LazySession::LazySession(const Module& module, const TraceOptions& options, std::function<std::string(Op)> unlowerable,
                         RunPiece run)
    : state_(std::make_unique<detail::TraceState>(&module, options)), run_(std::move(run)) {
  if (detail::current_trace() != nullptr)
    throw TraceError("a trace is already active on this thread; a method with graph breaks cannot run inside one");
  state_->lazy = true;
  state_->unlowerable = std::move(unlowerable);
  state_->options.unlowerable = nullptr;
  state_->on_break = [this](GraphBreakError::Kind kind, const std::string& op, const std::string& reason) {
    breaks_.push_back({kind, op, reason});
    flush(false);
  };
  detail::set_current_trace(state_.get());
  active_ = true;
}

LazySession::~LazySession() {
  if (active_ && detail::current_trace() == state_.get()) detail::set_current_trace(nullptr);
}

void LazySession::finish() {
  flush(true);
  if (detail::current_trace() == state_.get()) detail::set_current_trace(nullptr);
  active_ = false;
}

void LazySession::flush(bool last) {
  detail::TraceState& s = *state_;
  // The live tensors of the pending piece become its outputs.
  std::vector<std::shared_ptr<detail::TensorImpl>> live;
  std::vector<ValueId> outs;
  std::map<ValueId, std::size_t> out_index;
  for (auto& [weak, v] : s.lazy_values) {
    auto impl = weak.lock();
    if (!impl || impl->trace_id != s.id) continue;
    if (s.graph.node(v).op == Op::placeholder) continue;  // an input or parameter: already eager
    live.push_back(impl);
    if (out_index.emplace(v, outs.size()).second) outs.push_back(v);
  }
  // Nothing live, but an update in place pending (a KV cache written, its
  // result dropped): the piece still runs, its update as its output.
  if (outs.empty())
    for (std::size_t i = 0; i < s.graph.nodes().size(); ++i)
      if (op_info(s.graph.nodes()[i].op).side_effect) outs.push_back(static_cast<ValueId>(i));
  if (!outs.empty()) {
    Piece piece;
    s.graph.set_outputs(outs);  // verified by `run` when it compiles the piece
    piece.trace.graph = std::move(s.graph);
    for (const auto& [v, t] : s.lazy_inputs) {
      piece.trace.signature.inputs.push_back({piece.trace.graph.node(v).target, t.type()});
      piece.inputs.push_back(t);
    }
    for (std::size_t i = 0; i < outs.size(); ++i) piece.trace.output_paths.push_back("out" + std::to_string(i));
    piece.trace.name = s.options.method_name + " piece";
    piece.last = last;
    piece.index = pieces_;
    const std::vector<Tensor> results = run_(piece);
    ++pieces_;
    if (results.size() != outs.size())
      throw Error("a piece of " + s.options.method_name + " returned " + std::to_string(results.size()) +
                  " outputs for " + std::to_string(outs.size()));
    for (const auto& impl : live) {
      const detail::TensorImpl& r = *results[out_index.at(impl->value)].impl();
      impl->block = r.block;
      impl->offset = r.offset;
      impl->device = r.device;
      impl->type = r.type;
      impl->ticket = r.ticket;
      impl->trace_id = 0;
      impl->value = -1;
    }
  }
  // A fresh pending piece; tensors of the old one that nobody holds are
  // gone, so none is left traced.
  const TraceOptions options = s.options;
  auto unlowerable = std::move(s.unlowerable);
  auto on_break = std::move(s.on_break);
  auto module_tensors = std::move(s.module_tensors);
  *state_ = detail::TraceState(nullptr, options);
  state_->module_tensors = std::move(module_tensors);
  state_->lazy = true;
  state_->unlowerable = std::move(unlowerable);
  state_->on_break = std::move(on_break);
}

}  // namespace npucache::nn
