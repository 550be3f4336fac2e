// Inference for layout ops: reshape, permute, transpose, expand, slice,
// concat, gather, embedding.
#include "ir/infer_util.h"

#include <algorithm>

namespace npucache::ir {
namespace {

TensorType reshape_type(const InferCtx& c) {
  const Shape& in = c.operand(0).shape;
  Shape out = c.attrs.get<std::vector<SymExpr>>("shape");
  int infer_at = -1;
  SymExpr known(1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == SymExpr(-1)) {
      if (infer_at >= 0) c.fail("reshape allows only one -1 dim, got " + shape_str(out));
      infer_at = static_cast<int>(i);
    } else {
      if (auto v = out[i].try_constant(); v && *v < 0) c.fail("negative dim in target shape " + shape_str(out));
      known = known * out[i];
    }
  }
  SymExpr total = numel(in);
  if (infer_at >= 0) {
    auto q = total.div_exact(known);
    if (!q) {  // e.g. s0*6 / s1: known only through the concrete sizes
      SymExpr t(c.require_constant(total, "element count"));
      SymExpr k(c.require_constant(known, "known dims' product"));
      q = t.div_exact(k);
    }
    if (!q)
      c.fail("cannot infer -1 in " + shape_str(out) + ": " + total.str() + " elements are not divisible by " +
             known.str());
    out[static_cast<std::size_t>(infer_at)] = *q;
  } else if (!(known == total) && !c.unifier.unify(known, total)) {
    c.fail("target shape " + shape_str(out) + " has " + known.str() + " elements, input has " + total.str());
  }
  return {c.operand(0).dtype, out};
}

TensorType permute_type(const InferCtx& c, const std::vector<int64_t>& perm) {
  const Shape& in = c.operand(0).shape;
  if (perm.size() != in.size()) c.fail("permutation length differs from rank");
  std::vector<bool> seen(in.size(), false);
  Shape out;
  for (int64_t p : perm) {
    auto d = static_cast<std::size_t>(c.norm_dim(p, in.size()));
    if (seen[d]) c.fail("permutation repeats dim " + std::to_string(p));
    seen[d] = true;
    out.push_back(in[d]);
  }
  return {c.operand(0).dtype, out};
}

TensorType expand_type(const InferCtx& c) {
  const Shape& in = c.operand(0).shape;
  const Shape& target = c.attrs.get<std::vector<SymExpr>>("shape");
  if (target.size() < in.size()) c.fail("expand target " + shape_str(target) + " has lower rank");
  std::size_t off = target.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!(in[i] == SymExpr(1))) c.require_dim_equal(in[i], target[off + i], "expanded dim must be 1 or equal");
  return {c.operand(0).dtype, target};
}

TensorType slice_type(const InferCtx& c) {
  Shape out = c.operand(0).shape;
  auto d = static_cast<std::size_t>(c.norm_dim(c.attrs.get_int("dim"), out.size()));
  const auto& bounds = c.attrs.get<std::vector<SymExpr>>("bounds");
  if (bounds.size() != 2) c.fail("slice bounds must be [start, end]");
  // 0 <= start <= end <= size: checked now for constants, a guard of the
  // trace for symbolic sizes (a shorter input must not bind this graph).
  const std::string range =
      "slice [" + bounds[0].str() + ", " + bounds[1].str() + ") out of range for dim of size " + out[d].str();
  c.require_le(SymExpr(0), bounds[0], range);
  c.require_le(bounds[0], bounds[1], range);
  c.require_le(bounds[1], out[d], range);
  out[d] = bounds[1] - bounds[0];
  return {c.operand(0).dtype, out};
}

TensorType concat_type(const InferCtx& c) {
  Shape out = c.operand(0).shape;
  auto d = static_cast<std::size_t>(c.norm_dim(c.attrs.get_int("dim"), out.size()));
  for (std::size_t i = 1; i < c.in.size(); ++i) {
    c.require_dtype_equal(0, i);
    if (c.rank(i) != out.size()) c.fail("concat operands differ in rank");
    for (std::size_t j = 0; j < out.size(); ++j)
      if (j != d) c.require_dim_equal(out[j], c.operand(i).shape[j], "concat operands differ");
    out[d] = out[d] + c.operand(i).shape[d];
  }
  return {c.operand(0).dtype, out};
}

}  // namespace

TensorType infer_layout(const InferCtx& c) {
  switch (c.op) {
    case Op::reshape: return reshape_type(c);
    case Op::permute: return permute_type(c, c.attrs.get<std::vector<int64_t>>("perm"));
    case Op::transpose: {
      auto r = c.rank(0);
      std::vector<int64_t> perm(r);
      for (std::size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(i);
      std::swap(perm[static_cast<std::size_t>(c.norm_dim(c.attrs.get_int("dim0"), r))],
                perm[static_cast<std::size_t>(c.norm_dim(c.attrs.get_int("dim1"), r))]);
      return permute_type(c, perm);
    }
    case Op::expand: return expand_type(c);
    case Op::slice: return slice_type(c);
    case Op::concat: return concat_type(c);
    case Op::gather: {
      c.require_integral(1);
      if (c.rank(0) != c.rank(1)) c.fail("gather index must have the input's rank");
      const auto dim = static_cast<std::size_t>(c.norm_dim(c.attrs.get_int("dim"), c.rank(0)));
      // Beside the gathered dim the index reads the input in place: it may
      // not be larger than the input there.
      for (std::size_t k = 0; k < c.rank(0); ++k)
        if (k != dim)
          c.require_le(c.operand(1).shape[k], c.operand(0).shape[k],
                       "gather index dim " + std::to_string(k) + " is larger than the input's");
      return {c.operand(0).dtype, c.operand(1).shape};
    }
    case Op::embedding: {
      c.require_rank(0, 2);
      c.require_integral(1);
      Shape out = c.operand(1).shape;
      out.push_back(c.operand(0).shape[1]);
      return {c.operand(0).dtype, out};
    }
    default: c.fail("not a layout op");
  }
}

}  // namespace npucache::ir
