// The scratch bound of autotuning: the operands a tuned kernel is timed on
// are allocated on the device and filled, so a kernel of a large model's
// full shapes (a Llama-3-70B lm_head shard is 0.5 GiB, an unsharded MLP
// weight 0.9 GiB) would cost that much resident memory per compiling
// process. Instead each kernel is timed on operands of at most
// kAutotuneScratchBytes: a matmul with batch dims 1, at most half the
// budget of rows M, then a slice of its output columns N (the rows of a
// transposed weight); the slice keeps K and the memory layout, so tilings
// rank as on the full kernel (the sliced weight still streams from DRAM). A fused kernel above
// the bound is not timed: it keeps the default block size (fused kernels
// run over activations, which are far smaller than weights).
//
// Contract: these functions only compute sizes; they allocate nothing. The autotune pass allocates one kernel's scratch at a time and
// returns it to the host (Device::empty_cache) before the next kernel.
#pragma once

#include "runtime/launch.h"

#include <cstddef>
#include <string>
#include <vector>

namespace npucache::compiler {

// 64 MiB: 16x the largest last-level cache of common server CPUs, so a
// sliced weight is still timed from DRAM as the full one is; 32 ranks on
// one 24 GiB node each add at most this much while compiling.
inline constexpr std::size_t kAutotuneScratchBytes = std::size_t{64} << 20;

// Bytes of the operands (inputs and output) at their dims.
std::size_t scratch_bytes(const std::vector<runtime::TensorArg>& args);

// How a kernel is timed under the bound.
struct ScratchBound {
  bool timed = true;  // false: not timed, the default configuration is kept
  // "" at the full sizes; else what it was timed on ("timed on N 1984 of
  // 16032 (64 MiB autotune scratch bound)") or why it was not timed.
  std::string note;
};

// Shrinks the dims of a matmul's operands (args: a, b, out; `trans_b` as
// the kernel's attribute) until they fit `budget` bytes: batch dims to 1,
// rows M to half the budget, columns N, then M again. Not timed (dims left
// as they were) when even one row and column exceed the budget.
ScratchBound bound_matmul(std::vector<runtime::TensorArg>& args, bool trans_b, std::size_t budget);
// A fused kernel is timed at its full sizes or not at all.
ScratchBound bound_fused(const std::vector<runtime::TensorArg>& args, std::size_t budget);

}  // namespace npucache::compiler
