// The default decompositions of composite ops into primitives.
#include <npucache/error.h>
#include <npucache/nn/decompositions.h>

#include <cmath>
#include <limits>

namespace npucache {
namespace {

using ops::scalar;

// The weight [out, in] is read in place (trans_b): eager never copies a
// transposed weight, and compiled graphs are what fold_transposes made of
// matmul(x, permute(w)).
Tensor linear(const std::vector<Tensor>& in, const Attrs&) {
  Tensor y = ops::apply(Op::matmul, {in[0], in[1]}, Attrs{{"trans_b", true}});
  return in.size() == 3 ? y + in[2] : y;
}

// tanh approximation of GELU.
Tensor gelu(const std::vector<Tensor>& in, const Attrs&) {
  const Tensor& x = in[0];
  const double k = std::sqrt(2.0 / M_PI);
  Tensor inner = (x + x * x * x * 0.044715) * k;
  return x * 0.5 * (ops::tanh(inner) + 1.0);
}

Tensor silu(const std::vector<Tensor>& in, const Attrs&) { return in[0] * ops::sigmoid(in[0]); }

Tensor transpose(const std::vector<Tensor>& in, const Attrs& a) {
  auto r = static_cast<int64_t>(in[0].rank());
  std::vector<int64_t> perm(static_cast<std::size_t>(r));
  for (int64_t i = 0; i < r; ++i) perm[static_cast<std::size_t>(i)] = i;
  auto norm = [&](int64_t d) { return static_cast<std::size_t>(d < 0 ? d + r : d); };
  if (norm(a.get_int("dim0")) >= perm.size() || norm(a.get_int("dim1")) >= perm.size())
    throw ShapeError("transpose: dims out of range for rank " + std::to_string(r));
  std::swap(perm[norm(a.get_int("dim0"))], perm[norm(a.get_int("dim1"))]);
  return ops::permute(in[0], perm);
}

Tensor rmsnorm(const std::vector<Tensor>& in, const Attrs& a) {
  const Tensor& x = in[0];
  Tensor ms = ops::mean(x * x, {-1}, true);
  return x * ops::rsqrt(ms + a.get<double>("eps")) * in[1];
}

Tensor layernorm(const std::vector<Tensor>& in, const Attrs& a) {
  const Tensor& x = in[0];
  Tensor xc = x - ops::mean(x, {-1}, true);
  Tensor var = ops::mean(xc * xc, {-1}, true);
  return xc * ops::rsqrt(var + a.get<double>("eps")) * in[1] + in[2];
}

// q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D], optional positions [B, Sq].
Tensor attention(const std::vector<Tensor>& in, const Attrs& a) {
  Tensor q = in[0], k = in[1], v = in[2];
  Shape ks = k.shape();
  const int64_t hq = q.size(1).constant();
  const int64_t hkv = ks[1].constant();
  if (hkv != hq) {  // grouped KV heads: repeat each kv head hq/hkv times
    const int64_t rep = hq / hkv;
    auto repeat = [&](const Tensor& t) {
      Tensor e = ops::expand(t.reshape({ks[0], hkv, 1, ks[2], ks[3]}), {ks[0], hkv, rep, ks[2], ks[3]});
      return e.reshape({ks[0], hq, ks[2], ks[3]});
    };
    k = repeat(k);
    v = repeat(v);
  }
  double scale = a.get_double_or("scale", 0.0);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(q.size(3).constant()));
  Tensor scores = ops::matmul(q, ops::permute(k, {0, 1, 3, 2})) * scale;  // [B, Hq, Sq, Sk]
  if (a.get_bool_or("causal", false)) {
    const SymExpr sq = q.size(2), sk = ks[2];
    Tensor key_pos = ops::arange(sk, DType::i64);
    Tensor mask;
    if (in.size() == 4) {
      Tensor qpos = in[3].to(DType::i64).reshape({q.size(0), 1, sq, 1});
      mask = ops::le(key_pos.reshape({1, 1, 1, sk}), qpos);  // [B, 1, Sq, Sk]
    } else {
      Tensor qpos = ops::slice(key_pos, 0, sk - sq, sk).reshape({sq, 1});
      mask = ops::le(key_pos.reshape({1, sk}), qpos);  // [Sq, Sk]
    }
    scores = ops::where(mask, scores, scalar(-std::numeric_limits<double>::infinity(), q.dtype()));
  }
  return ops::matmul(ops::softmax(scores, -1), v);
}

Tensor dropout(const std::vector<Tensor>& in, const Attrs& a) {
  const double p = a.get<double>("p");
  Tensor keep = ops::bernoulli(ops::full(in[0].shape(), 1.0 - p, in[0].dtype()));
  return in[0] * keep * (1.0 / (1.0 - p));
}

}  // namespace

const Decomposition* default_decomposition(Op op) {
  // Never destroyed: a thread may still be compiling while another runs
  // exit().
  static const auto& table = *new std::map<Op, Decomposition>{
      {Op::linear, linear},   {Op::gelu, gelu},           {Op::silu, silu},           {Op::transpose, transpose},
      {Op::rmsnorm, rmsnorm}, {Op::layernorm, layernorm}, {Op::attention, attention}, {Op::dropout, dropout},
  };
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace npucache
