// The scalar math of the elementwise unary ops (OpClass::unary with a
// kernel): the one place it is written. The elementwise kernel, the fused
// kernel's evaluator and the compiler's constant folding all compute
// through this table, so they agree to the bit.
//
// Contract: every op of class unary that is not composite has exactly one
// row (a test checks it); `f32` is the function on floating operands
// (computed in f32, as every floating kernel), `map` applies it to n
// contiguous elements (a loop the compiler can vectorise), and `exact` is
// the function on integer operands for ops that are not floating-only
// (null for the others: inference refuses integer operands for them).
#pragma once

#include <npucache/ir/op.h>

#include <cstdint>

namespace npucache::runtime {

struct UnaryMath {
  Op op;
  float (*f32)(float);
  void (*map)(const float* x, float* y, int64_t n);
  double (*exact)(double);
};

// The row of `op`, or null when `op` is not an elementwise unary op with a
// kernel.
const UnaryMath* unary_math(Op op);

}  // namespace npucache::runtime
