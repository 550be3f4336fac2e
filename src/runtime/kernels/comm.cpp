// Communication kernels: they run on the stream's worker, in stream order,
// and call the launch's Communicator (as collective kernels on a real NPU
// run on its stream).
#include <npucache/runtime/communicator.h>

#include "runtime/kernels/kernel_util.h"
#include "runtime/process.h"

namespace npucache::runtime::kernels {
namespace {

Communicator& comm_of(const KernelLaunch& l) {
  if (l.comm == nullptr) kernel_fail(l, "needs a communicator; run distributed models with one bound to the thread");
  check_communicator_set(l.comm, op_name(l.op));
  return *l.comm;
}

GroupRole group_of(const KernelLaunch& l) { return group_role_from_name(l.attrs->get<std::string>("group")); }

PipelinePeer peer_of(const KernelLaunch& l) {
  return l.attrs->get<std::string>("peer") == "next" ? PipelinePeer::next : PipelinePeer::prev;
}

// all_gather along `dim`: gather whole slices, then interleave them so that
// the gathered dim is `dim` (a no-op reorder for dim 0).
void all_gather(const KernelLaunch& l) {
  Communicator& c = comm_of(l);
  const TensorArg& in = l.args[0];
  const TensorArg& out = l.args[1];
  const GroupRole g = group_of(l);
  const int64_t size = c.size(g);
  if (out.numel() != in.numel() * size)
    kernel_fail(l, "output size does not match the group size " + std::to_string(size));
  std::vector<char> gathered(out.bytes());
  c.all_gather(g, in.data(), gathered.data(), in.bytes());
  int64_t dim = l.attrs->get_int("dim");
  if (dim < 0) dim += static_cast<int64_t>(in.dims.size());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= in.dims[static_cast<std::size_t>(i)];
  for (std::size_t i = static_cast<std::size_t>(dim); i < in.dims.size(); ++i) inner *= in.dims[i];
  const std::size_t chunk = static_cast<std::size_t>(inner) * dtype_size(in.dtype);
  auto* dst = static_cast<char*>(out.data());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < size; ++r)
      std::memcpy(dst + static_cast<std::size_t>(o * size + r) * chunk,
                  gathered.data() + static_cast<std::size_t>(r * outer + o) * chunk, chunk);
}

}  // namespace

void comm_kernel(const KernelLaunch& l) {
  switch (l.op) {
    case Op::all_reduce: {
      const TensorArg& in = l.args[0];
      const TensorArg& out = l.args[1];
      if (in.dtype != DType::f32) kernel_fail(l, "supports f32 only");
      if (out.data() != in.data()) std::memcpy(out.data(), in.data(), in.bytes());
      comm_of(l).all_reduce_sum(group_of(l), static_cast<float*>(out.data()), static_cast<std::size_t>(out.numel()));
      return;
    }
    case Op::all_gather: return all_gather(l);
    case Op::group_rank: *static_cast<int64_t*>(l.args.back().data()) = comm_of(l).rank(group_of(l)); return;
    case Op::send: {
      const TensorArg& in = l.args[0];
      comm_of(l).send(peer_of(l), in.data(), in.bytes());
      const TensorArg& out = l.args[1];
      if (out.data() != in.data()) std::memcpy(out.data(), in.data(), in.bytes());
      return;
    }
    case Op::recv: {
      const TensorArg& out = l.args.back();
      comm_of(l).recv(peer_of(l), out.data(), out.bytes());
      return;
    }
    default: kernel_fail(l, "not a communication op");
  }
}

}  // namespace npucache::runtime::kernels
