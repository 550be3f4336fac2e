// Inference for elementwise ops: broadcasting binary arithmetic and
// comparisons, where, unary functions and cast.
#include "ir/infer_util.h"

namespace npucache::ir {

TensorType infer_elementwise(const InferCtx& c) {
  switch (c.op) {
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::maximum:
    case Op::minimum:
      c.require_dtype_equal(0, 1);
      if (c.operand(0).dtype == DType::boolean) c.fail("arithmetic on bool tensors; cast first");
      return {c.operand(0).dtype, c.broadcast(c.operand(0).shape, c.operand(1).shape)};
    case Op::pow:
      c.require_dtype_equal(0, 1);
      c.require_floating(0);
      return {c.operand(0).dtype, c.broadcast(c.operand(0).shape, c.operand(1).shape)};
    case Op::eq:
    case Op::ne:
    case Op::lt:
    case Op::le:
    case Op::gt:
    case Op::ge:
      c.require_dtype_equal(0, 1);
      return {DType::boolean, c.broadcast(c.operand(0).shape, c.operand(1).shape)};
    case Op::where:
      if (c.operand(0).dtype != DType::boolean) c.fail("condition must be bool");
      c.require_dtype_equal(1, 2);
      return {c.operand(1).dtype, c.broadcast(c.operand(0).shape, c.broadcast(c.operand(1).shape, c.operand(2).shape))};
    case Op::neg:
    case Op::abs:
    case Op::relu:
      if (c.operand(0).dtype == DType::boolean) c.fail("operand must not be bool");
      return c.operand(0);
    case Op::cast: return {c.attrs.get<DType>("dtype"), c.operand(0).shape};
    default:  // floating unary functions
      c.require_floating(0);
      return c.operand(0);
  }
}

}  // namespace npucache::ir
