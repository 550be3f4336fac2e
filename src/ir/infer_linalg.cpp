// Inference for matmul/linear, reductions, softmax, norms, rope, attention.
#include "ir/infer_util.h"

#include <algorithm>

namespace npucache::ir {
namespace {

TensorType matmul_type(const InferCtx& c) {
  c.require_dtype_equal(0, 1);
  c.require_floating(0);
  const Shape& a = c.operand(0).shape;
  const Shape& b = c.operand(1).shape;
  if (a.size() < 2 || b.size() < 2) c.fail("matmul operands need rank >= 2");
  // trans_b: b is given as [..., N, K] (the compiler folds a transpose in).
  const bool tb = c.attrs.get_bool_or("trans_b", false);
  c.require_dim_equal(a[a.size() - 1], b[b.size() - (tb ? 1 : 2)], "inner dimensions differ");
  Shape batch = c.broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  batch.push_back(a[a.size() - 2]);
  batch.push_back(b[b.size() - (tb ? 2 : 1)]);
  return {c.operand(0).dtype, batch};
}

TensorType linear_type(const InferCtx& c) {
  c.require_dtype_equal(0, 1);
  c.require_floating(0);
  const Shape& x = c.operand(0).shape;
  if (x.empty()) c.fail("input must have rank >= 1");
  c.require_rank(1, 2);
  const Shape& w = c.operand(1).shape;
  c.require_dim_equal(x.back(), w[1], "input features differ from weight's in_features");
  if (c.in.size() == 3) {
    c.require_dtype_equal(0, 2);
    c.require_rank(2, 1);
    c.require_dim_equal(c.operand(2).shape[0], w[0], "bias size differs from out_features");
  }
  Shape out = x;
  out.back() = w[0];
  return {c.operand(0).dtype, out};
}

TensorType reduce_type(const InferCtx& c, DType dtype, const std::vector<int64_t>& dims) {
  const Shape& x = c.operand(0).shape;
  bool keep = c.attrs.get_bool_or("keepdim", false);
  std::vector<bool> reduced(x.size(), false);
  for (int64_t d : dims) reduced[static_cast<std::size_t>(c.norm_dim(d, x.size()))] = true;
  Shape out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!reduced[i])
      out.push_back(x[i]);
    else if (keep)
      out.push_back(1);
  }
  return {dtype, out};
}

TensorType norm_type(const InferCtx& c) {
  c.require_floating(0);
  const Shape& x = c.operand(0).shape;
  if (x.empty()) c.fail("input must have rank >= 1");
  for (std::size_t i = 1; i < c.in.size(); ++i) {
    c.require_dtype_equal(0, i);
    c.require_rank(i, 1);
    c.require_dim_equal(c.operand(i).shape[0], x.back(), "weight size differs from last dim");
  }
  return c.operand(0);
}

TensorType rope_type(const InferCtx& c) {
  c.require_floating(0);
  c.require_integral(1);
  c.require_rank(0, 4);
  c.require_rank(1, 2);
  const Shape& x = c.operand(0).shape;
  const Shape& pos = c.operand(1).shape;
  c.require_dim_equal(x[0], pos[0], "batch of positions differs");
  c.require_dim_equal(x[1], pos[1], "sequence length of positions differs");
  if (c.require_constant(x[3], "head dim") % 2 != 0) c.fail("head dim must be even");
  Shape out = x;
  out[3] = c.require_constant(x[3], "head dim");
  return {c.operand(0).dtype, out};
}

// q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D], optional positions [B, Sq].
TensorType attention_type(const InferCtx& c) {
  c.require_floating(0);
  c.require_dtype_equal(0, 1);
  c.require_dtype_equal(0, 2);
  for (std::size_t i = 0; i < 3; ++i) c.require_rank(i, 4);
  const Shape& q = c.operand(0).shape;
  const Shape& k = c.operand(1).shape;
  const Shape& v = c.operand(2).shape;
  c.require_dim_equal(q[0], k[0], "batch of q and k differs");
  c.require_dim_equal(q[3], k[3], "head dim of q and k differs");
  for (std::size_t i = 0; i < 4; ++i) c.require_dim_equal(k[i], v[i], "k and v shapes differ");
  // The default decomposition (nn/decompositions.cpp) repeats k/v over the
  // heads and, at the default scale (0: 1/sqrt(head dim)), reads the head
  // dim: constants it needs, so a dynamic trace specialises them.
  int64_t hq = c.require_constant(q[1], "query heads");
  int64_t hkv = c.require_constant(k[1], "key/value heads");
  if (c.attrs.get_double_or("scale", 0.0) == 0.0) c.require_constant(q[3], "head dim (the default scale reads it)");
  if (hkv == 0 || hq % hkv != 0) c.fail("query heads must be a multiple of key/value heads");
  if (c.in.size() == 4) {
    c.require_integral(3);
    c.require_rank(3, 2);
    c.require_dim_equal(c.operand(3).shape[0], q[0], "batch of positions differs");
    c.require_dim_equal(c.operand(3).shape[1], q[2], "length of positions differs");
  }
  Shape out = q;
  out[1] = hq;
  return {c.operand(0).dtype, out};
}

}  // namespace

TensorType infer_linalg(const InferCtx& c) {
  switch (c.op) {
    case Op::matmul: return matmul_type(c);
    case Op::linear: return linear_type(c);
    case Op::sum:
    case Op::mean:
    case Op::max: {
      if (c.op != Op::max) c.require_floating(0);
      return reduce_type(c, c.operand(0).dtype, c.attrs.get<std::vector<int64_t>>("dims"));
    }
    case Op::argmax: return reduce_type(c, DType::i64, {c.attrs.get_int("dim")});
    case Op::softmax:
      c.require_floating(0);
      c.norm_dim(c.attrs.get_int("dim"), c.rank(0));
      return c.operand(0);
    case Op::rmsnorm:
    case Op::layernorm: return norm_type(c);
    case Op::rope: return rope_type(c);
    case Op::attention: return attention_type(c);
    case Op::fused_attention: {
      // kv_len: keys [0, kv_len) of the cache are attended (at most its length).
      const auto& bounds = c.attrs.get<std::vector<SymExpr>>("kv_len");
      if (bounds.size() != 1) c.fail("kv_len must be one length");
      c.require_le(SymExpr(1), bounds[0], "kv_len must be at least 1");
      c.require_le(bounds[0], c.operand(1).shape[2], "kv_len exceeds the cache length");
      return attention_type(c);
    }
    default: c.fail("not a linear-algebra op");
  }
}

}  // namespace npucache::ir
