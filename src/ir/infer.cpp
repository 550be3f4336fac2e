// Dispatch of shape/dtype inference and the shared helpers.
#include "ir/infer_util.h"

namespace npucache {
namespace ir {

void InferCtx::fail(const std::string& what) const {
  std::string ops;
  for (std::size_t i = 0; i < in.size(); ++i) ops += (i ? ", " : "") + type_str(*in[i]);
  throw ShapeError(std::string(op_name(op)) + ": " + what + " (operands: " + ops + ")");
}

void InferCtx::require_dtype_equal(std::size_t a, std::size_t b) const {
  if (operand(a).dtype != operand(b).dtype)
    fail("operand dtypes differ (" + std::string(dtype_name(operand(a).dtype)) + " vs " +
         std::string(dtype_name(operand(b).dtype)) + "); cast one of them first");
}

void InferCtx::require_floating(std::size_t i) const {
  if (!is_floating(operand(i).dtype))
    fail("operand " + std::to_string(i) + " must be a floating dtype, not " +
         std::string(dtype_name(operand(i).dtype)));
}

void InferCtx::require_integral(std::size_t i) const {
  if (!is_integral(operand(i).dtype))
    fail("operand " + std::to_string(i) + " must be an integer dtype (i32/i64), not " +
         std::string(dtype_name(operand(i).dtype)));
}

void InferCtx::require_rank(std::size_t i, std::size_t r) const {
  if (rank(i) != r)
    fail("operand " + std::to_string(i) + " must have rank " + std::to_string(r) + ", not " + std::to_string(rank(i)));
}

void InferCtx::require_dim_equal(const SymExpr& a, const SymExpr& b, const std::string& what) const {
  if (!unifier.unify(a, b)) fail(what + ": " + a.str() + " != " + b.str());
}

void InferCtx::require_le(const SymExpr& a, const SymExpr& b, const std::string& what) const {
  if (!unifier.require_le(a, b)) fail(what + ": " + a.str() + " > " + b.str());
}

int64_t InferCtx::require_constant(const SymExpr& d, const std::string& what) const {
  auto v = unifier.specialize(d);
  if (!v) fail(what + " must be a known constant, not '" + d.str() + "'");
  return *v;
}

int64_t InferCtx::norm_dim(int64_t dim, std::size_t r) const {
  auto n = static_cast<int64_t>(r);
  int64_t d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) fail("dim " + std::to_string(dim) + " out of range for rank " + std::to_string(r));
  return d;
}

Shape InferCtx::broadcast(const Shape& a, const Shape& b) const {
  std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const SymExpr one(1);
    const SymExpr& da = i < n - a.size() ? one : a[i - (n - a.size())];
    const SymExpr& db = i < n - b.size() ? one : b[i - (n - b.size())];
    if (da == db || db == one)
      out[i] = da;
    else if (da == one)
      out[i] = db;
    else if (unifier.unify(da, db))
      out[i] = da;
    else
      fail("shapes " + shape_str(a) + " and " + shape_str(b) + " are not broadcastable");
  }
  return out;
}

}  // namespace ir

TensorType infer_type(Op op, const std::vector<const TensorType*>& inputs, const Attrs& attrs, DimUnifier& unifier) {
  const OpInfo& info = op_info(op);
  ir::InferCtx c{op, inputs, attrs, unifier};
  auto n = static_cast<int>(inputs.size());
  if (n < info.min_inputs || n > info.max_inputs) {
    std::string want = info.min_inputs == info.max_inputs
                           ? std::to_string(info.min_inputs)
                           : std::to_string(info.min_inputs) + ".." + std::to_string(info.max_inputs);
    c.fail("expects " + want + " inputs, got " + std::to_string(n));
  }
  switch (info.cls) {
    case OpClass::input: c.fail("placeholders have no inferred type");
    case OpClass::unary:
    case OpClass::binary:
    case OpClass::comparison:
    case OpClass::select:
    case OpClass::cast: return ir::infer_elementwise(c);
    case OpClass::linalg:
    case OpClass::reduction: return ir::infer_linalg(c);
    case OpClass::layout: return ir::infer_layout(c);
    case OpClass::creation:
    case OpClass::comm:
    case OpClass::random:
    case OpClass::special: return ir::infer_special(c);
  }
  c.fail("invalid op");
}

}  // namespace npucache
