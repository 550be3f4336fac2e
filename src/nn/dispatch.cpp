// ops::apply: the one place an op is either recorded (tracing) or run
// (eager: composite ops through their decomposition, primitive ops as a
// kernel launch on the current device's stream).
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/nn/decompositions.h>
#include <npucache/ops.h>
#include <npucache/runtime/communicator.h>

#include "nn/detail/tensor_impl.h"
#include "nn/detail/trace_state.h"
#include "nn/interop.h"
#include "runtime/stream.h"

#include <algorithm>

namespace npucache {
namespace {

// An op on meta tensors in prepare(): its result's type, no storage.
Tensor meta_result(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  std::vector<const TensorType*> types;
  types.reserve(inputs.size());
  for (const auto& t : inputs) types.push_back(&t.impl()->type);
  DimUnifier strict;
  const TensorType out = infer_type(op, types, attrs, strict);
  return Tensor::meta(concrete_dims(out.shape), out.dtype);
}

Tensor run_eager(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].impl()->meta)
      throw MetaTensorError(
          nn::meta_tensor_message(std::string(op_name(op)) + ": operand " + std::to_string(i), inputs[i].impl()->type));
    if (inputs[i].impl()->ticket)
      detail::check_live(*inputs[i].impl(), std::string(op_name(op)) + ": operand " + std::to_string(i));
  }
  if (op_info(op).composite) {
    const Decomposition* d = default_decomposition(op);
    if (d == nullptr) throw Error("composite op " + std::string(op_name(op)) + " has no decomposition");
    return (*d)(inputs, attrs);
  }
  std::vector<const TensorType*> types;
  types.reserve(inputs.size());
  for (const auto& t : inputs) types.push_back(&t.impl()->type);
  DimUnifier strict;
  TensorType out_type = infer_type(op, types, attrs, strict);
  std::vector<int64_t> dims = concrete_dims(out_type.shape);
  detail::check_dims(dims);

  const int dev = inputs.empty() ? current_device() : inputs.front().impl()->device;
  Device& device = Platform::get().device(dev);
  auto out = std::make_shared<detail::TensorImpl>();
  out->type = {out_type.dtype, shape_of(dims)};
  out->device = dev;
  if (op == Op::reshape) {  // a view: same storage, no launch
    out->block = inputs[0].impl()->block;
    out->offset = inputs[0].impl()->offset;
    out->ticket = inputs[0].impl()->ticket;
    return Tensor(std::move(out));
  }
  if (op == Op::buffer_update) {  // in place
    out->block = inputs[0].impl()->block;
    out->offset = inputs[0].impl()->offset;
    out->ticket = inputs[0].impl()->ticket;
  } else {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    out->block = device.allocate(static_cast<std::size_t>(n) * dtype_size(out_type.dtype));
  }
  runtime::KernelLaunch l;
  l.op = op;
  l.attrs = std::make_shared<const Attrs>(attrs);
  l.args.reserve(inputs.size() + 1);
  for (const auto& t : inputs) {
    const auto& impl = *t.impl();
    l.args.push_back({impl.block, impl.offset, impl.type.dtype, concrete_dims(impl.type.shape)});
  }
  l.args.push_back({out->block, out->offset, out->type.dtype, dims});
  l.comm = &current_communicator();
  device.default_stream().launch(std::move(l));
  return Tensor(std::move(out));
}

}  // namespace

namespace ops {

Tensor apply(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  bool traced = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw ShapeError(std::string(op_name(op)) + ": operand " + std::to_string(i) + " is undefined");
    traced = traced || inputs[i].impl()->traced();
  }
  detail::TraceState* trace = detail::current_trace();
  if (trace != nullptr) {
    Tensor r = trace->record(op, inputs, attrs);
    if (r.defined()) return r;
    // An op the compile cannot lower, in a lazy trace: the pending piece
    // ran (every live tensor of it is eager now); this op runs eagerly --
    // in prepare() on a tensor of unknown value, which gives a meta result.
    if (std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return detail::prepared_unknown(*t.impl()); }))
      return meta_result(op, inputs, attrs);
    return run_eager(op, inputs, attrs);
  }
  if (traced)
    throw TraceError(std::string(op_name(op)) +
                     ": a traced tensor is used after its trace ended; traced tensors exist only "
                     "while the method is being traced");
  return run_eager(op, inputs, attrs);
}

}  // namespace ops
}  // namespace npucache
