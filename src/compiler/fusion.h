// The encoding of a `fused` node's attributes, shared by the fusion pass
// (which writes it) and the fused kernel (which runs it).
//
//   code   [op, a, b, c] per instruction; operands are register numbers:
//          registers 0..k-1 are the node's k inputs, instruction j writes
//          register k + j; op == Op::full loads constant a. The last
//          instruction's register is the result (or the reduced value).
//   num_consts, c0, c1, ...  the constants (doubles)
//   iter_shape  the iteration space (the result shape, or the input shape
//          of a trailing reduction)
//   reduce  optional: Op::sum / Op::mean / Op::max over the last dim of
//          iter_shape, with `keepdim`
//   block  elements per tile (autotuned)
//   shape, dtype  the node's result type
// All registers are f32; bool values are 0/1.
#pragma once

#include <npucache/ir/op.h>

#include <cstdint>

namespace npucache::compiler {

constexpr int64_t kFusedNoOperand = -1;
constexpr int64_t kFusedDefaultBlock = 1024;  // 4 KiB per register: L1-resident tiles

}  // namespace npucache::compiler
