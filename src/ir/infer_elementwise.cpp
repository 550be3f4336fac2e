// Inference for the elementwise classes (OpClass in op.h): broadcasting
// binary arithmetic and comparisons, where, unary functions and cast, by
// the op's class and traits alone.
#include "ir/infer_util.h"

namespace npucache::ir {

TensorType infer_elementwise(const InferCtx& c) {
  const OpInfo& info = op_info(c.op);
  // Unary and binary ops: floating-only ones need a floating operand; the
  // others take every dtype but bool.
  auto check_operand_dtype = [&] {
    if (info.floating_only)
      c.require_floating(0);
    else if (c.operand(0).dtype == DType::boolean)
      c.fail(info.cls == OpClass::unary ? "operand must not be bool" : "arithmetic on bool tensors; cast first");
  };
  switch (info.cls) {
    case OpClass::binary:
      c.require_dtype_equal(0, 1);
      check_operand_dtype();
      return {c.operand(0).dtype, c.broadcast(c.operand(0).shape, c.operand(1).shape)};
    case OpClass::comparison:
      c.require_dtype_equal(0, 1);
      return {DType::boolean, c.broadcast(c.operand(0).shape, c.operand(1).shape)};
    case OpClass::select:
      if (c.operand(0).dtype != DType::boolean) c.fail("condition must be bool");
      c.require_dtype_equal(1, 2);
      return {c.operand(1).dtype, c.broadcast(c.operand(0).shape, c.broadcast(c.operand(1).shape, c.operand(2).shape))};
    case OpClass::unary: check_operand_dtype(); return c.operand(0);
    case OpClass::cast: return {c.attrs.get<DType>("dtype"), c.operand(0).shape};
    default: c.fail("not an elementwise op");
  }
}

}  // namespace npucache::ir
