#include "nn/interop.h"

#include "nn/detail/tensor_impl.h"
#include "nn/detail/trace_state.h"

namespace npucache::nn {

std::string meta_tensor_message(const std::string& what, const TensorType& type) {
  return what + " is a meta tensor " + type_str(type) +
         " (a shape without memory): the weights were not materialised. A model built with meta "
         "weights (nn::MetaScope, models::Weights::meta) can be traced, compiled and cached "
         "(CompiledMethod::prepare, npucache warmup) but not run; build it with real weights to run it";
}

EagerRef eager_ref(const Tensor& t) {
  const detail::TensorImpl& i = *t.impl();
  return {i.type, i.block, i.offset, i.device};
}

void check_live(const Tensor& t, const std::string& what) { detail::check_live(*t.impl(), what); }

const std::shared_ptr<const runtime::ReplayTicket>& replay_ticket(const Tensor& t) { return t.impl()->ticket; }

Tensor wrap_eager(runtime::BlockPtr block, std::size_t offset, TensorType type, int device,
                  std::shared_ptr<const runtime::ReplayTicket> ticket) {
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->ticket = std::move(ticket);
  impl->type = std::move(type);
  impl->block = std::move(block);
  impl->offset = offset;
  impl->device = device;
  return Tensor(std::move(impl));
}

Retrace::Retrace()
    : state_(std::make_unique<detail::TraceState>(nullptr, TraceOptions{})),
      active_(std::make_unique<detail::ActiveTrace>(*state_)) {}

Retrace::~Retrace() = default;

Tensor Retrace::placeholder(PlaceholderKind kind, const std::string& target, const TensorType& type) {
  return state_->wrap(state_->graph.add_placeholder(kind, target, type));
}

Tensor Retrace::record(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return state_->record(op, inputs, attrs);
}

Graph Retrace::finish(const std::vector<Tensor>& outputs) {
  std::vector<ValueId> outs;
  for (const Tensor& o : outputs) outs.push_back(state_->value_of(o, "output"));
  state_->graph.set_outputs(outs);
  verify(state_->graph);
  return std::move(state_->graph);
}

}  // namespace npucache::nn
