// The operations on tensors. Each works in eager mode (launches kernels) and
// in tracing mode (records a node). Shape and dtype errors throw ShapeError
// naming the op and the operand types.
#pragma once

#include <npucache/export.h>

#include <string>
#include <vector>

#include <npucache/runtime/communicator.h>
#include <npucache/tensor.h>

namespace npucache::ops {

// Generic entry: applies `op` to `inputs` with `attrs`.
NPUCACHE_API Tensor apply(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});

NPUCACHE_API Tensor add(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor sub(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor mul(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor div(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor maximum(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor minimum(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor pow(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor eq(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor ne(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor lt(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor le(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor gt(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor ge(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// An elementwise unary op (OpClass::unary, op.h) on x; ShapeError for another op.
NPUCACHE_API Tensor unary(Op op, const Tensor& x);
inline Tensor neg(const Tensor& x) { return unary(Op::neg, x); }
inline Tensor exp(const Tensor& x) { return unary(Op::exp, x); }
inline Tensor rsqrt(const Tensor& x) { return unary(Op::rsqrt, x); }
inline Tensor relu(const Tensor& x) { return unary(Op::relu, x); }
inline Tensor gelu(const Tensor& x) { return unary(Op::gelu, x); }
inline Tensor silu(const Tensor& x) { return unary(Op::silu, x); }
inline Tensor sigmoid(const Tensor& x) { return unary(Op::sigmoid, x); }
inline Tensor tanh(const Tensor& x) { return unary(Op::tanh, x); }
inline Tensor erf(const Tensor& x) { return unary(Op::erf, x); }

NPUCACHE_API Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., K] @ w[N, K]^T (+ b[N]); `bias` may be undefined.
NPUCACHE_API Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());

NPUCACHE_API Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
NPUCACHE_API Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
NPUCACHE_API Tensor max(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
NPUCACHE_API Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
NPUCACHE_API Tensor softmax(const Tensor& x, int64_t dim);
NPUCACHE_API Tensor rmsnorm(const Tensor& x, const Tensor& weight, double eps);
NPUCACHE_API Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
// x [B, S, H, D], positions [B, S].
NPUCACHE_API Tensor rope(const Tensor& x, const Tensor& positions, double theta = 10000.0);
// q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D]. With `positions` [B, Sq] and
// causal, query i attends to keys j <= positions[b, i]; without, causal
// aligns the last query with the last key.
NPUCACHE_API Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                              const Tensor& positions = Tensor(), double scale = 0.0);

// Attention over the first `kv_len` keys of a KV cache k/v [B, Hkv, S, D]
// (a decode step's actual sequence length, as Ascend's fused infer
// attention): keys j < kv_len, and with `causal` j <= positions[b, i] (or,
// without positions, the last query is key kv_len - 1). One kernel, not
// decomposed. kv_len is typically a SymInt argument of the method: a
// reduce-overhead capture patches it at each replay instead of capturing
// again (the update mechanism of seed 003).
NPUCACHE_API Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, SymExpr kv_len,
                                    bool causal = true, const Tensor& positions = Tensor(), double scale = 0.0);

NPUCACHE_API Tensor reshape(const Tensor& x, Shape shape);
NPUCACHE_API Tensor permute(const Tensor& x, std::vector<int64_t> perm);
NPUCACHE_API Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
NPUCACHE_API Tensor expand(const Tensor& x, Shape shape);
NPUCACHE_API Tensor slice(const Tensor& x, int64_t dim, SymExpr start, SymExpr end);
NPUCACHE_API Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
NPUCACHE_API Tensor gather(const Tensor& x, const Tensor& index, int64_t dim);
// Rows for ids outside [0, V) are zero.
NPUCACHE_API Tensor embedding(const Tensor& weight, const Tensor& ids);
NPUCACHE_API Tensor cast(const Tensor& x, DType dtype);
NPUCACHE_API Tensor full(Shape shape, double value, DType dtype = DType::f32);
NPUCACHE_API Tensor scalar(double value, DType dtype = DType::f32);
NPUCACHE_API Tensor arange(SymExpr n, DType dtype = DType::i64);

// Writes values [B, S, ...] into buffer [B, Smax, ...] at positions [B, S],
// in place; returns the buffer.
NPUCACHE_API Tensor buffer_update(const Tensor& buffer, const Tensor& positions, const Tensor& values);

NPUCACHE_API Tensor all_reduce(const Tensor& x, const std::string& group);
// `group_size` is the size of `group` (a layout constant, not a rank).
NPUCACHE_API Tensor all_gather(const Tensor& x, const std::string& group, int64_t dim, int64_t group_size);
// This rank's index in `group` as an i64 scalar, read at run time (so graphs
// stay rank-independent).
NPUCACHE_API Tensor group_rank(const std::string& group);
// Sends x to the next/previous pipeline stage; returns x.
NPUCACHE_API Tensor send(const Tensor& x, const std::string& peer);
NPUCACHE_API Tensor recv(Shape shape, DType dtype, const std::string& peer);

NPUCACHE_API Tensor randn(Shape shape, DType dtype = DType::f32);
NPUCACHE_API Tensor bernoulli(const Tensor& p);
NPUCACHE_API Tensor dropout(const Tensor& x, double p);

}  // namespace npucache::ops

namespace npucache {

NPUCACHE_API Tensor operator+(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor operator-(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor operator*(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor operator/(const Tensor& a, const Tensor& b);
NPUCACHE_API Tensor operator-(const Tensor& a);
// Scalars become constants of the tensor's dtype.
NPUCACHE_API Tensor operator+(const Tensor& a, double b);
NPUCACHE_API Tensor operator-(const Tensor& a, double b);
NPUCACHE_API Tensor operator*(const Tensor& a, double b);
NPUCACHE_API Tensor operator/(const Tensor& a, double b);

}  // namespace npucache
