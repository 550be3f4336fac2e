// The operations on tensors. Each works in eager mode (launches kernels) and
// in tracing mode (records a node). Shape and dtype errors throw ShapeError
// naming the op and the operand types.
#pragma once

#include <string>
#include <vector>

#include <npucache/runtime/communicator.h>
#include <npucache/tensor.h>

namespace npucache::ops {

// Generic entry: applies `op` to `inputs` with `attrs`.
Tensor apply(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

Tensor unary(Op op, const Tensor& x);
inline Tensor neg(const Tensor& x) { return unary(Op::neg, x); }
inline Tensor exp(const Tensor& x) { return unary(Op::exp, x); }
inline Tensor rsqrt(const Tensor& x) { return unary(Op::rsqrt, x); }
inline Tensor relu(const Tensor& x) { return unary(Op::relu, x); }
inline Tensor gelu(const Tensor& x) { return unary(Op::gelu, x); }
inline Tensor silu(const Tensor& x) { return unary(Op::silu, x); }
inline Tensor sigmoid(const Tensor& x) { return unary(Op::sigmoid, x); }
inline Tensor tanh(const Tensor& x) { return unary(Op::tanh, x); }

Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., K] @ w[N, K]^T (+ b[N]); `bias` may be undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());

Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
Tensor max(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor rmsnorm(const Tensor& x, const Tensor& weight, double eps);
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
// x [B, S, H, D], positions [B, S].
Tensor rope(const Tensor& x, const Tensor& positions, double theta = 10000.0);
// q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D]. With `positions` [B, Sq] and
// causal, query i attends to keys j <= positions[b, i]; without, causal
// aligns the last query with the last key.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, const Tensor& positions = Tensor(),
                 double scale = 0.0);

// Attention over the first `kv_len` keys of a KV cache k/v [B, Hkv, S, D]
// (a decode step's actual sequence length, as Ascend's fused infer
// attention): keys j < kv_len, and with `causal` j <= positions[b, i] (or,
// without positions, the last query is key kv_len - 1). One kernel, not
// decomposed. kv_len is typically a SymInt argument of the method: a
// reduce-overhead capture patches it at each replay instead of capturing
// again (the update mechanism of seed 003).
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, SymExpr kv_len, bool causal = true,
                       const Tensor& positions = Tensor(), double scale = 0.0);

Tensor reshape(const Tensor& x, Shape shape);
Tensor permute(const Tensor& x, std::vector<int64_t> perm);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor expand(const Tensor& x, Shape shape);
Tensor slice(const Tensor& x, int64_t dim, SymExpr start, SymExpr end);
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
Tensor gather(const Tensor& x, const Tensor& index, int64_t dim);
// Rows for ids outside [0, V) are zero.
Tensor embedding(const Tensor& weight, const Tensor& ids);
Tensor cast(const Tensor& x, DType dtype);
Tensor full(Shape shape, double value, DType dtype = DType::f32);
Tensor scalar(double value, DType dtype = DType::f32);
Tensor arange(SymExpr n, DType dtype = DType::i64);

// Writes values [B, S, ...] into buffer [B, Smax, ...] at positions [B, S],
// in place; returns the buffer.
Tensor buffer_update(const Tensor& buffer, const Tensor& positions, const Tensor& values);

Tensor all_reduce(const Tensor& x, const std::string& group);
// `group_size` is the size of `group` (a layout constant, not a rank).
Tensor all_gather(const Tensor& x, const std::string& group, int64_t dim, int64_t group_size);
// This rank's index in `group` as an i64 scalar, read at run time (so graphs
// stay rank-independent).
Tensor group_rank(const std::string& group);
// Sends x to the next/previous pipeline stage; returns x.
Tensor send(const Tensor& x, const std::string& peer);
Tensor recv(Shape shape, DType dtype, const std::string& peer);

Tensor randn(Shape shape, DType dtype = DType::f32);
Tensor bernoulli(const Tensor& p);
Tensor dropout(const Tensor& x, double p);

}  // namespace npucache::ops

namespace npucache {

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
// Scalars become constants of the tensor's dtype.
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);

}  // namespace npucache
