// Tensor: one type, three modes.
//
// Eager: the tensor holds device memory on the simulated NPU and every op
// launches a kernel on the current stream of its device right away.
// Tracing: while a method is being traced (trace.h) the tensor stands for a
// value of the graph being built, and ops record nodes instead of running.
// Meta: a type and a device but no memory (Tensor::meta). A meta tensor can
// be a parameter of a traced module or an input of a trace (it becomes a
// graph placeholder, which needs only its type), so a model whose weights
// are not materialised can be traced, compiled and cached. Running an op on
// it, reading or writing its values, or running a compiled program with it
// throws MetaTensorError naming the tensor.
//
// Tensors are cheap handles: copies share the same storage or value. Ops on
// tensors are the functions of namespace ops (ops.h). Reading values
// (to_vector, item, a truth value) while tracing is data-dependent control
// flow: a graph break (GraphBreakError under fullgraph=true; with
// fullgraph=false compile() splits the method there).
#pragma once

#include <npucache/export.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <npucache/ir/graph.h>
#include <npucache/runtime/memory.h>

namespace npucache {

namespace detail {
struct TensorImpl;
}

class NPUCACHE_API Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  bool is_traced() const;
  bool is_meta() const;
  DType dtype() const;
  // Dims; symbolic while tracing with dynamic shapes.
  Shape shape() const;
  std::size_t rank() const;
  SymExpr size(int64_t dim) const;
  TensorType type() const;
  // Device of an eager or meta tensor; -1 while tracing.
  int device() const;

  // Eager tensors from host data, on the current device.
  static Tensor from_vector(const std::vector<float>& data, const std::vector<int64_t>& dims, DType dtype = DType::f32);
  static Tensor from_vector_i64(const std::vector<int64_t>& data, const std::vector<int64_t>& dims);
  // A meta tensor of this type on the current device: no memory is allocated.
  static Tensor meta(const std::vector<int64_t>& dims, DType dtype = DType::f32);
  // Overwrites an eager tensor's elements (converted to its dtype).
  void copy_from(const std::vector<float>& data);
  // Waits for pending work on the tensor's device and reads the values.
  std::vector<float> to_vector() const;
  std::vector<int64_t> to_vector_i64() const;
  float item() const;
  // The truth value of a one-element tensor (nonzero), as Python's
  // bool(tensor): `if (ops::gt(ops::sum(x, {0}), 0.0f))`. While tracing it
  // is a data-dependent branch: a graph break (CompileOptions::fullgraph).
  explicit operator bool() const;
  // Concrete dims of an eager tensor.
  std::vector<int64_t> dims() const;

  // Shortcuts for ops in ops.h.
  Tensor reshape(Shape shape) const;
  Tensor permute(std::vector<int64_t> perm) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor slice(int64_t dim, SymExpr start, SymExpr end) const;
  Tensor to(DType dtype) const;
  // A copy with storage of its own (eager: a device copy on the tensor's
  // device; tracing: a copy node). Keeps a reduce-overhead output across
  // later calls of the method (compile.h).
  Tensor clone() const;

  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }

 private:
  NPUCACHE_LOCAL const detail::TensorImpl& checked() const;
  std::shared_ptr<detail::TensorImpl> impl_;
};

}  // namespace npucache
