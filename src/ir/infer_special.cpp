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
  if (buf.size() < 2 || val.size() != buf.size()) c.fail("buffer and values must have equal rank >= 2");
  c.require_dim_equal(buf[0], val[0], "batch of buffer and values differs");
  c.require_dim_equal(pos[0], val[0], "batch of positions and values differs");
  c.require_dim_equal(pos[1], val[1], "positions and values differ in length");
  for (std::size_t i = 2; i < buf.size(); ++i)
    c.require_dim_equal(buf[i], val[i], "trailing dims of buffer and values differ");
  return c.operand(0);
}

// A region call's type is its body's result type, carried in attributes
// (the body is linked in by the compiler, which checks that they agree).
TensorType region_call_type(const InferCtx& c) {
  const auto& region = c.attrs.get<std::string>("region");
  if (region.empty() || region.size() > 64) c.fail("region name must have 1 to 64 characters");
  for (char ch : region)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z')))
      c.fail("region name must be lowercase letters and digits");
  const int64_t args = c.attrs.get_int("num_args");
  if (args < 0 || args > static_cast<int64_t>(c.in.size()))
    c.fail("num_args " + std::to_string(args) + " is outside 0.." + std::to_string(c.in.size()));
  int64_t last = -1;
  for (int64_t m : c.attrs.get<std::vector<int64_t>>("mutates")) {
    if (m <= last || m >= static_cast<int64_t>(c.in.size()))
      c.fail("mutates must list operand indices in increasing order, below " + std::to_string(c.in.size()));
    last = m;
  }
  c.attrs.get<std::string>("collectives");
  c.attrs.get<std::vector<SymExpr>>("bind");
  return {c.attrs.get<DType>("out_dtype"), c.attrs.get<std::vector<SymExpr>>("out_shape")};
}

}  // namespace

TensorType infer_special(const InferCtx& c) {
  switch (c.op) {
    case Op::full: return {c.attrs.get<DType>("dtype"), c.attrs.get<std::vector<SymExpr>>("shape")};
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
    case Op::group_rank: check_group(c); return {DType::i64, {}};
    case Op::send: check_peer(c); return c.operand(0);
    case Op::recv: check_peer(c); return {c.attrs.get<DType>("dtype"), c.attrs.get<std::vector<SymExpr>>("shape")};
    case Op::randn: {
      DType t = c.attrs.get<DType>("dtype");
      if (!is_floating(t)) c.fail("randn needs a floating dtype");
      return {t, c.attrs.get<std::vector<SymExpr>>("shape")};
    }
    case Op::bernoulli:
    case Op::dropout: c.require_floating(0); return c.operand(0);
    case Op::fused: return infer_fused(c);
    case Op::region_call: return region_call_type(c);
    default: c.fail("not a special op");
  }
}

TensorType infer_fused(const InferCtx& c) {
  // The encoding of compiler/fusion.h: instructions [op, a, b, c] over
  // registers (0..k-1 the inputs, k+j instruction j's result).
  const auto& code = c.attrs.get<std::vector<int64_t>>("code");
  if (code.empty() || code.size() % 4 != 0) c.fail("malformed code (not a list of [op, a, b, c])");
  const int64_t k = static_cast<int64_t>(c.in.size());
  const int64_t consts = c.attrs.get_int_or("num_consts", 0);
  if (consts < 0 || consts > 1 << 20) c.fail("num_consts is out of range");
  for (int64_t i = 0; i < consts; ++i) c.attrs.get<double>("c" + std::to_string(i));
  for (std::size_t j = 0; j < code.size(); j += 4) {
    const int64_t reg = k + static_cast<int64_t>(j / 4);  // registers below this one exist
    if (code[j] < 0 || !is_op_number(static_cast<uint64_t>(code[j]))) c.fail("instruction op out of range");
    const Op op = static_cast<Op>(code[j]);
    auto operand = [&](int64_t r, bool required) {
      if (r == -1 && !required) return;
      if (r < 0 || r >= reg)
        c.fail("instruction " + std::to_string(j / 4) + " reads register " + std::to_string(r) +
               ", which does not exist yet");
    };
    // Slots an op does not use hold -1 (the kernel reads no others).
    auto unused = [&](std::size_t slot) {
      if (code[j + slot] != -1)
        c.fail("instruction " + std::to_string(j / 4) + " (" + std::string(op_name(op)) + ") has operand " +
               std::to_string(slot) + " set to " + std::to_string(code[j + slot]) + "; an unused operand must be -1");
    };
    if (op == Op::full) {
      if (code[j + 1] < 0 || code[j + 1] >= consts) c.fail("instruction loads a constant that does not exist");
      unused(2);
      unused(3);
      continue;
    }
    const OpInfo& info = op_info(op);
    if (!info.fusible) c.fail("op " + std::string(op_name(op)) + " cannot be fused");
    operand(code[j + 1], true);
    if (info.max_inputs >= 2)
      operand(code[j + 2], info.min_inputs >= 2);
    else
      unused(2);
    if (info.max_inputs >= 3)
      operand(code[j + 3], info.min_inputs >= 3);
    else
      unused(3);
  }
  const Shape iter = c.attrs.get<std::vector<SymExpr>>("iter_shape");
  for (std::size_t i = 0; i < c.in.size(); ++i) {
    const Shape& s = c.operand(i).shape;
    if (s.size() > iter.size()) c.fail("operand " + std::to_string(i) + " has a higher rank than the iteration space");
    for (std::size_t d = 0; d < s.size(); ++d) {
      const SymExpr& it = iter[iter.size() - s.size() + d];
      if (!(s[d] == it) && !(s[d] == SymExpr(1)))
        c.fail("operand " + std::to_string(i) + " does not broadcast to the iteration space");
    }
  }
  const Shape shape = c.attrs.get<std::vector<SymExpr>>("shape");
  const int64_t reduce = c.attrs.get_int_or("reduce", -1);
  if (reduce == -1) {
    if (!(shape == iter)) c.fail("the result shape differs from the iteration space");
  } else {
    const Op rop = static_cast<Op>(reduce);
    if (reduce < 0 || !is_op_number(static_cast<uint64_t>(reduce)) ||
        (rop != Op::sum && rop != Op::mean && rop != Op::max))
      c.fail("reduce is not sum, mean or max");
    if (iter.empty()) c.fail("a reduction needs an iteration space of rank >= 1");
    Shape want(iter.begin(), iter.end() - 1);
    if (c.attrs.get_bool_or("keepdim", false)) want.push_back(SymExpr(1));
    if (!(shape == want)) c.fail("the result shape does not match the reduction of the iteration space");
  }
  const int64_t block = c.attrs.get_int_or("block", 1024);
  if (block < 1 || block > (int64_t{1} << 24)) c.fail("block is out of range");
  return {c.attrs.get<DType>("dtype"), shape};
}

}  // namespace npucache::ir
