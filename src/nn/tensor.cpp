#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/ops.h>
#include <npucache/tensor.h>

#include "nn/detail/tensor_impl.h"
#include "nn/detail/trace_state.h"
#include "nn/interop.h"
#include "runtime/stream.h"

#include <algorithm>
#include <cstring>

namespace npucache {

namespace detail {
// Sizes a tensor may have: every dim and the element count at most 2^40 (a
// trillion elements, far beyond any device), so that no size computed from
// them overflows; checked before anything is allocated or traced.
constexpr int64_t kMaxElements = int64_t{1} << 40;

void check_dims(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw ShapeError("negative dim in " + shape_str(shape_of(dims)));
    if (d > kMaxElements || __builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      throw ShapeError("a tensor of shape " + shape_str(shape_of(dims)) + " has more than 2^40 elements, more than " +
                       "any device holds: the sizes are wrong (a config or computation out of range)");
  }
}

void check_live(const TensorImpl& impl, const std::string& what) {
  if (!impl.ticket) return;
  int64_t n = 1;
  for (const auto& d : impl.type.shape) n *= d.try_constant().value_or(0);
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(impl.type.dtype);
  impl.ticket->pool->check(*impl.ticket, impl.offset, impl.offset + bytes, what);
}
}  // namespace detail

const detail::TensorImpl& Tensor::checked() const {
  if (!impl_) throw ShapeError("use of an undefined tensor");
  return *impl_;
}

bool Tensor::is_traced() const { return checked().traced(); }
bool Tensor::is_meta() const { return checked().meta; }
DType Tensor::dtype() const { return checked().type.dtype; }

Shape Tensor::shape() const {
  const auto& impl = checked();
  if (impl.traced()) {
    detail::TraceState* t = detail::current_trace();
    if (t != nullptr && t->id == impl.trace_id) return t->shapes.resolve(impl.type.shape);
  }
  return impl.type.shape;
}

std::size_t Tensor::rank() const { return checked().type.shape.size(); }

SymExpr Tensor::size(int64_t dim) const {
  Shape s = shape();
  auto r = static_cast<int64_t>(s.size());
  int64_t d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r)
    throw ShapeError("size(" + std::to_string(dim) + ") out of range for a tensor of rank " + std::to_string(r));
  return s[static_cast<std::size_t>(d)];
}

TensorType Tensor::type() const { return {dtype(), shape()}; }
int Tensor::device() const { return checked().device; }

std::vector<int64_t> Tensor::dims() const {
  const auto& impl = checked();
  if (impl.traced()) {
    const detail::TraceState* t = detail::current_trace();
    const bool concrete =
        std::all_of(impl.type.shape.begin(), impl.type.shape.end(), [](const SymExpr& d) { return d.is_constant(); });
    if (!(t && t->lazy && t->id == impl.trace_id && concrete))
      throw TraceError("dims(): concrete sizes are unknown while tracing; use shape()");
  }
  return concrete_dims(impl.type.shape);
}

namespace {

using detail::check_dims;

std::shared_ptr<detail::TensorImpl> new_eager(DType dtype, const std::vector<int64_t>& dims) {
  check_dims(dims);
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->type = {dtype, shape_of(dims)};
  impl->device = current_device();
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  impl->block = Platform::get().device(impl->device).allocate(static_cast<std::size_t>(n) * dtype_size(dtype));
  return impl;
}

runtime::TensorArg arg_of(const detail::TensorImpl& impl) {
  return runtime::TensorArg{impl.block, impl.offset, impl.type.dtype, concrete_dims(impl.type.shape)};
}

// Settles what a host access needs (a pending piece run first) and checks
// that the tensor's values can be read. Returns the values a read of a meta
// tensor sees in a prepare() session (detail::prepared_read), else nullopt:
// the storage holds them.
std::optional<std::vector<double>> require_eager(const detail::TensorImpl& impl, const char* what,
                                                 detail::HostAccess access = detail::HostAccess::read) {
  if (impl.traced())  // runs the pending piece of a lazy trace, else GraphBreakError
    detail::graph_break(impl, GraphBreakError::Kind::host_read,
                        std::string(what) + "() reads the tensor's value on the host (data-dependent control flow)");
  else  // an eager tensor compiled code pending in a lazy trace updates (or, for a write, uses)
    detail::settle_pending(impl, access, what);
  if (impl.traced())
    throw TraceError(std::string(what) +
                     ": reading a tensor's values while tracing is data-dependent control flow; "
                     "a cached method must trace to one full graph without reading values");
  detail::check_live(impl, what);
  if (access == detail::HostAccess::read)
    if (auto v = detail::prepared_read(impl, what)) return v;
  if (impl.meta) throw MetaTensorError(nn::meta_tensor_message(std::string(what) + ": the tensor", impl.type));
  return std::nullopt;
}

}  // namespace

Tensor::operator bool() const {
  const auto& impl = checked();
  if (impl.traced())
    detail::graph_break(impl, GraphBreakError::Kind::data_dependent_branch,
                        "the tensor's truth value decides a branch (data-dependent control flow)");
  const auto hinted = require_eager(impl, "bool");
  const std::vector<float> v = hinted ? std::vector<float>(hinted->begin(), hinted->end()) : to_vector();
  if (v.size() != 1) throw ShapeError("the truth value of a tensor needs one element, not " + type_str(impl.type));
  return v[0] != 0.0f;
}

Tensor Tensor::meta(const std::vector<int64_t>& dims, DType dtype) {
  check_dims(dims);
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->type = {dtype, shape_of(dims)};
  impl->device = current_device();
  impl->meta = true;
  return Tensor(std::move(impl));
}

Tensor Tensor::from_vector(const std::vector<float>& data, const std::vector<int64_t>& dims, DType dtype) {
  Tensor t(new_eager(dtype, dims));
  t.copy_from(data);
  return t;
}

Tensor Tensor::from_vector_i64(const std::vector<int64_t>& data, const std::vector<int64_t>& dims) {
  Tensor t(new_eager(DType::i64, dims));
  if (static_cast<int64_t>(data.size()) != arg_of(*t.impl_).numel())
    throw ShapeError("from_vector_i64: " + std::to_string(data.size()) + " values for shape " +
                     shape_str(shape_of(dims)));
  if (!data.empty())  // memcpy's pointers must not be null, even for no bytes
    std::memcpy(t.impl_->block->data(), data.data(), data.size() * sizeof(int64_t));
  return t;
}

void Tensor::copy_from(const std::vector<float>& data) {
  const auto& impl = checked();
  require_eager(impl, "copy_from", detail::HostAccess::write);
  runtime::TensorArg a = arg_of(impl);
  if (static_cast<int64_t>(data.size()) != a.numel())
    throw ShapeError("copy_from: " + std::to_string(data.size()) + " values for a tensor of type " +
                     type_str(impl.type));
  // Pending kernels may still use the storage: order the write after them.
  Platform::get().device(impl.device).synchronize();
  if (a.dtype == DType::f32) {  // model weights: a plain copy
    if (!data.empty()) std::memcpy(a.data(), data.data(), data.size() * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < a.numel(); ++i) a.store(i, data[static_cast<std::size_t>(i)]);
}

std::vector<float> Tensor::to_vector() const {
  const auto& impl = checked();
  if (auto v = require_eager(impl, "to_vector")) return std::vector<float>(v->begin(), v->end());
  Platform::get().device(impl.device).synchronize();
  runtime::TensorArg a = arg_of(impl);
  std::vector<float> out(static_cast<std::size_t>(a.numel()));
  if (a.dtype == DType::f32) {
    if (!out.empty()) std::memcpy(out.data(), a.data(), out.size() * sizeof(float));
    return out;
  }
  for (int64_t i = 0; i < a.numel(); ++i) out[static_cast<std::size_t>(i)] = static_cast<float>(a.load(i));
  return out;
}

std::vector<int64_t> Tensor::to_vector_i64() const {
  const auto& impl = checked();
  if (auto v = require_eager(impl, "to_vector_i64")) {
    std::vector<int64_t> out;
    for (double x : *v) out.push_back(static_cast<int64_t>(x));
    return out;
  }
  Platform::get().device(impl.device).synchronize();
  runtime::TensorArg a = arg_of(impl);
  std::vector<int64_t> out(static_cast<std::size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) out[static_cast<std::size_t>(i)] = static_cast<int64_t>(a.load(i));
  return out;
}

float Tensor::item() const {
  const auto& impl = checked();
  const auto hinted = require_eager(impl, "item");
  const std::vector<float> v = hinted ? std::vector<float>(hinted->begin(), hinted->end()) : to_vector();
  if (v.size() != 1) throw ShapeError("item() needs a one-element tensor, not " + type_str(impl.type));
  return v[0];
}

Tensor Tensor::reshape(Shape shape) const { return ops::reshape(*this, std::move(shape)); }
Tensor Tensor::permute(std::vector<int64_t> perm) const { return ops::permute(*this, std::move(perm)); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return ops::transpose(*this, d0, d1); }
Tensor Tensor::slice(int64_t dim, SymExpr start, SymExpr end) const {
  return ops::slice(*this, dim, std::move(start), std::move(end));
}
Tensor Tensor::to(DType dtype) const { return ops::cast(*this, dtype); }

Tensor Tensor::clone() const {
  const auto& impl = checked();
  if (impl.traced()) return ops::cast(*this, impl.type.dtype);
  if (detail::prepared_unknown(impl)) return meta(concrete_dims(impl.type.shape), impl.type.dtype);
  require_eager(impl, "clone");
  runtime::TensorArg a = arg_of(impl);
  Tensor out(new_eager(a.dtype, a.dims));
  Platform::get().device(impl.device).default_stream().copy(out.impl_->block, 0, impl.block, impl.offset, a.bytes());
  return out;
}

}  // namespace npucache
