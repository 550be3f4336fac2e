// Thin typed wrappers over ops::apply.
#include <npucache/error.h>
#include <npucache/ops.h>

#include <limits>

namespace npucache::ops {

Tensor add(const Tensor& a, const Tensor& b) { return apply(Op::add, {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return apply(Op::sub, {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return apply(Op::mul, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return apply(Op::div, {a, b}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return apply(Op::maximum, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return apply(Op::minimum, {a, b}); }
Tensor pow(const Tensor& a, const Tensor& b) { return apply(Op::pow, {a, b}); }
Tensor eq(const Tensor& a, const Tensor& b) { return apply(Op::eq, {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return apply(Op::ne, {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return apply(Op::lt, {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return apply(Op::le, {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return apply(Op::gt, {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return apply(Op::ge, {a, b}); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return apply(Op::where, {c, a, b}); }

Tensor unary(Op op, const Tensor& x) {
  const OpInfo& info = op_info(op);
  if (info.cls != OpClass::unary)
    throw ShapeError("ops::unary: '" + std::string(info.name) + "' is not a unary elementwise op");
  return apply(op, {x});
}

Tensor matmul(const Tensor& a, const Tensor& b) { return apply(Op::matmul, {a, b}); }
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  return bias.defined() ? apply(Op::linear, {x, w, bias}) : apply(Op::linear, {x, w});
}

Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return apply(Op::sum, {x}, Attrs{{"dims", dims}, {"keepdim", keepdim}});
}
Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return apply(Op::mean, {x}, Attrs{{"dims", dims}, {"keepdim", keepdim}});
}
Tensor max(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return apply(Op::max, {x}, Attrs{{"dims", dims}, {"keepdim", keepdim}});
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return apply(Op::argmax, {x}, Attrs{{"dim", dim}, {"keepdim", keepdim}});
}
Tensor softmax(const Tensor& x, int64_t dim) { return apply(Op::softmax, {x}, Attrs{{"dim", dim}}); }
Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps) { return apply(Op::rmsnorm, {x, w}, Attrs{{"eps", eps}}); }
Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  return apply(Op::layernorm, {x, w, b}, Attrs{{"eps", eps}});
}
Tensor rope(const Tensor& x, const Tensor& positions, double theta) {
  return apply(Op::rope, {x, positions}, Attrs{{"theta", theta}});
}
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, const Tensor& positions,
                 double scale) {
  Attrs a{{"causal", causal}, {"scale", scale}};
  return positions.defined() ? apply(Op::attention, {q, k, v, positions}, a) : apply(Op::attention, {q, k, v}, a);
}

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, SymExpr kv_len, bool causal,
                       const Tensor& positions, double scale) {
  Attrs a{{"causal", causal}, {"scale", scale}, {"kv_len", std::vector<SymExpr>{std::move(kv_len)}}};
  return positions.defined() ? apply(Op::fused_attention, {q, k, v, positions}, a)
                             : apply(Op::fused_attention, {q, k, v}, a);
}

Tensor reshape(const Tensor& x, Shape shape) { return apply(Op::reshape, {x}, Attrs{{"shape", shape}}); }
Tensor permute(const Tensor& x, std::vector<int64_t> perm) { return apply(Op::permute, {x}, Attrs{{"perm", perm}}); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return apply(Op::transpose, {x}, Attrs{{"dim0", d0}, {"dim1", d1}});
}
Tensor expand(const Tensor& x, Shape shape) { return apply(Op::expand, {x}, Attrs{{"shape", shape}}); }
Tensor slice(const Tensor& x, int64_t dim, SymExpr start, SymExpr end) {
  return apply(Op::slice, {x}, Attrs{{"dim", dim}, {"bounds", Shape{start, end}}});
}
Tensor concat(const std::vector<Tensor>& xs, int64_t dim) { return apply(Op::concat, xs, Attrs{{"dim", dim}}); }
Tensor gather(const Tensor& x, const Tensor& index, int64_t dim) {
  return apply(Op::gather, {x, index}, Attrs{{"dim", dim}});
}
Tensor embedding(const Tensor& weight, const Tensor& ids) { return apply(Op::embedding, {weight, ids}); }
Tensor cast(const Tensor& x, DType dtype) { return apply(Op::cast, {x}, Attrs{{"dtype", dtype}}); }
Tensor full(Shape shape, double value, DType dtype) {
  return apply(Op::full, {}, Attrs{{"shape", shape}, {"value", value}, {"dtype", dtype}});
}
Tensor scalar(double value, DType dtype) { return full({}, value, dtype); }
Tensor arange(SymExpr n, DType dtype) { return apply(Op::arange, {}, Attrs{{"shape", Shape{n}}, {"dtype", dtype}}); }

Tensor buffer_update(const Tensor& buffer, const Tensor& positions, const Tensor& values) {
  return apply(Op::buffer_update, {buffer, positions, values});
}

Tensor all_reduce(const Tensor& x, const std::string& group) {
  return apply(Op::all_reduce, {x}, Attrs{{"group", group}, {"reduce", std::string("sum")}});
}
Tensor all_gather(const Tensor& x, const std::string& group, int64_t dim, int64_t group_size) {
  return apply(Op::all_gather, {x}, Attrs{{"group", group}, {"dim", dim}, {"size", group_size}});
}
Tensor group_rank(const std::string& group) { return apply(Op::group_rank, {}, Attrs{{"group", group}}); }
Tensor send(const Tensor& x, const std::string& peer) { return apply(Op::send, {x}, Attrs{{"peer", peer}}); }
Tensor recv(Shape shape, DType dtype, const std::string& peer) {
  return apply(Op::recv, {}, Attrs{{"shape", shape}, {"dtype", dtype}, {"peer", peer}});
}

Tensor randn(Shape shape, DType dtype) { return apply(Op::randn, {}, Attrs{{"shape", shape}, {"dtype", dtype}}); }
Tensor bernoulli(const Tensor& p) { return apply(Op::bernoulli, {p}); }
Tensor dropout(const Tensor& x, double p) {
  if (p < 0.0 || p >= 1.0) throw ConfigError("dropout probability must be in [0, 1), got " + std::to_string(p));
  return apply(Op::dropout, {x}, Attrs{{"p", p}});
}

}  // namespace npucache::ops

namespace npucache {

Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
Tensor operator-(const Tensor& a) { return ops::neg(a); }
Tensor operator+(const Tensor& a, double b) { return ops::add(a, ops::scalar(b, a.dtype())); }
Tensor operator-(const Tensor& a, double b) { return ops::sub(a, ops::scalar(b, a.dtype())); }
Tensor operator*(const Tensor& a, double b) { return ops::mul(a, ops::scalar(b, a.dtype())); }
Tensor operator/(const Tensor& a, double b) { return ops::div(a, ops::scalar(b, a.dtype())); }

}  // namespace npucache
