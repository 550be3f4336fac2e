// Inference for constants, in-place buffer updates, communication and RNG.
#include "ir/infer_util.h"

namespace npucache::ir {
namespace {

void check_group(const InferCtx& c) {
  const auto& g = c.attrs.get<std::string>("group");
  if (g != "tp" && g != "pp" && g != "dp" && g != "world")
    c.fail("unknown group role '" + g + "'; expected tp, pp, dp or world");
}

void check_peer(const InferCtx& c) {
  const auto& p = c.attrs.get<std::string>("peer");
  if (p != "next" && p != "prev") c.fail("peer must be 'next' or 'prev', not '" + p + "'");
}

// buffer [B, Smax, ...], positions [B, S], values [B, S, ...].
TensorType buffer_update_type(const InferCtx& c) {
  c.require_dtype_equal(0, 2);
  c.require_integral(1);
  c.require_rank(1, 2);
  const Shape& buf = c.operand(0).shape;
  const Shape& pos = c.operand(1).shape;
  const Shape& val = c.operand(2).shape;
  if (buf.size() < 2 || val.size() != buf.size())
    c.fail("buffer and values must have equal rank >= 2");
  c.require_dim_equal(buf[0], val[0], "batch of buffer and values differs");
  c.require_dim_equal(pos[0], val[0], "batch of positions and values differs");
  c.require_dim_equal(pos[1], val[1], "positions and values differ in length");
  for (std::size_t i = 2; i < buf.size(); ++i)
    c.require_dim_equal(buf[i], val[i], "trailing dims of buffer and values differ");
  return c.operand(0);
}

}  // namespace

TensorType infer_special(const InferCtx& c) {
  switch (c.op) {
    case Op::full:
      return {c.attrs.get<DType>("dtype"), c.attrs.get<std::vector<SymExpr>>("shape")};
    case Op::arange: {
      const auto& shape = c.attrs.get<std::vector<SymExpr>>("shape");
      if (shape.size() != 1) c.fail("arange shape must have one dim");
      return {c.attrs.get<DType>("dtype"), shape};
    }
    case Op::buffer_update: return buffer_update_type(c);
    case Op::all_reduce:
      check_group(c);
      c.require_floating(0);
      return c.operand(0);
    case Op::all_gather: {
      check_group(c);
      Shape out = c.operand(0).shape;
      auto d = static_cast<std::size_t>(c.norm_dim(c.attrs.get_int("dim"), out.size()));
      int64_t size = c.attrs.get_int("size");
      if (size < 1) c.fail("group size must be >= 1");
      out[d] = out[d] * SymExpr(size);
      return {c.operand(0).dtype, out};
    }
    case Op::group_rank:
      check_group(c);
      return {DType::i64, {}};
    case Op::send:
      check_peer(c);
      return c.operand(0);
    case Op::recv:
      check_peer(c);
      return {c.attrs.get<DType>("dtype"), c.attrs.get<std::vector<SymExpr>>("shape")};
    case Op::randn: {
      DType t = c.attrs.get<DType>("dtype");
      if (!is_floating(t)) c.fail("randn needs a floating dtype");
      return {t, c.attrs.get<std::vector<SymExpr>>("shape")};
    }
    case Op::bernoulli: case Op::dropout:
      c.require_floating(0);
      return c.operand(0);
    case Op::fused:
      return {c.attrs.get<DType>("dtype"), c.attrs.get<std::vector<SymExpr>>("shape")};
    default: c.fail("not a special op");
  }
}

}  // namespace npucache::ir
