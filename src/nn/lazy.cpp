// LazySession (interop.h): recording a method between graph breaks and
// running each piece.
#include <npucache/error.h>

#include "nn/detail/tensor_impl.h"
#include "nn/detail/trace_state.h"
#include "nn/interop.h"

#include <algorithm>
#include <map>
#include <vector>

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

void LazySession::prepare_only(ReadValue read) {
  read_ = std::move(read);
  state_->host_value = [this](const detail::TensorImpl& impl, const char* access) { return read_meta(impl, access); };
  state_->unknown = [this](const detail::TensorImpl& impl) {
    return impl.meta || (impl.block && std::find(stale_.begin(), stale_.end(), impl.block) != stale_.end());
  };
}

std::vector<double> LazySession::read_meta(const detail::TensorImpl& impl, const char* access) {
  MetaOutput* out = nullptr;
  for (auto& o : meta_outputs_)
    if (o.impl.lock().get() == &impl) out = &o;
  if (out != nullptr && out->values) return *out->values;
  MetaRead r{access, out != nullptr ? out->op : "", impl.type, ""};
  r.of = !r.op.empty() ? r.op : impl.meta ? "a meta tensor" : "a tensor a prepared piece updates in place";
  std::optional<std::vector<double>> v = read_ ? read_(r) : std::nullopt;
  const std::string what = std::string(access) + "() of " + r.of + " (" + type_str(impl.type) + ")";
  if (!v) {
    stopped_ = r;
    throw MetaTensorError("prepare(): " + what +
                          " needs a value prepare() does not compute (its pieces are not run, the weights may be "
                          "meta); the pieces after it are not prepared: give the value as a hint to prepare beyond it");
  }
  int64_t n = 1;
  for (const auto& d : impl.type.shape) n *= d.try_constant().value_or(1);
  if (static_cast<int64_t>(v->size()) != n)
    throw ConfigError("prepare(): the value given for " + what + " has " + std::to_string(v->size()) +
                      " element(s); the tensor has " + std::to_string(n));
  if (out != nullptr) out->values = *v;
  return *v;
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
  std::erase_if(meta_outputs_, [](const MetaOutput& o) { return o.impl.expired(); });
  if (!outs.empty() && read_) {
    // prepare(): the piece is not run, so the eager tensors it updates in
    // place keep stale values from now on.
    for (const auto& [impl, v] : s.bound)
      if (impl->block && s.pending_uses(*impl, true)) stale_.push_back(impl->block);
  }
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
      if (r.meta) {
        const Node& n = piece.trace.graph.node(impl->value);
        meta_outputs_.push_back({impl, std::string(op_name(n.op)) + " (" + n.name + ")", std::nullopt});
      }
      impl->meta = r.meta;
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
  auto host_value = std::move(s.host_value);
  auto unknown = std::move(s.unknown);
  *state_ = detail::TraceState(nullptr, options);
  state_->module_tensors = std::move(module_tensors);
  state_->lazy = true;
  state_->unlowerable = std::move(unlowerable);
  state_->on_break = std::move(on_break);
  state_->host_value = std::move(host_value);
  state_->unknown = std::move(unknown);
}

}  // namespace npucache::nn
