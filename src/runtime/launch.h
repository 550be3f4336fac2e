// A kernel launch: one primitive op, its attributes and its operands.
//
// Building a KernelLaunch is the "argument packing" part of a launch's host
// cost; Stream::launch validates it and queues it. Operands are TensorArgs:
// a device block, a byte offset, a dtype and concrete dims. By convention
// args[0..n-1] are the op's inputs and args.back() is its output.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <npucache/ir/attrs.h>
#include <npucache/ir/op.h>
#include <npucache/runtime/memory.h>

namespace npucache {
class Communicator;
}

namespace npucache::runtime {

struct TensorArg {
  BlockPtr block;
  std::size_t offset = 0;
  DType dtype = DType::f32;
  std::vector<int64_t> dims;

  void* data() const { return static_cast<char*>(block->data()) + offset; }
  int64_t numel() const;
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
  // Element i converted to or from double (any dtype); host-side access
  // for filling and reading tensors, not for kernels' inner loops.
  double load(int64_t i) const;
  void store(int64_t i, double v) const;
};

struct KernelLaunch {
  Op op = Op::placeholder;
  std::shared_ptr<const Attrs> attrs;
  std::vector<TensorArg> args;   // inputs..., output
  Communicator* comm = nullptr;  // for collective and point-to-point ops
  uint64_t rng_seed = 0;         // for rng ops: the stream's seed and
  uint64_t rng_offset = 0;       // the launch's offset in its sequence
};

// Runs the kernel of `launch` on the calling thread. Throws DeviceError for
// an op without a kernel (composite ops) or invalid operands.
void run_kernel(const KernelLaunch& launch);

}  // namespace npucache::runtime
