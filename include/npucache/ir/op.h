// The operator set of npucache's graph IR.
//
// Every op has shape/dtype inference (src/ir/infer_*.cpp). Primitive ops have
// a kernel on the simulated device; composite ops (linear, attention, norms,
// gelu, silu, transpose, dropout) do not: they carry a default decomposition
// into primitives (src/nn/decompositions.cpp) that eager execution runs and
// the compiler's decompose pass applies.
#pragma once

#include <npucache/export.h>

#include <cstdint>
#include <string_view>

namespace npucache {

enum class Op : uint16_t {
  placeholder,
  // elementwise binary (broadcasting, equal dtypes)
  add,
  sub,
  mul,
  div,
  maximum,
  minimum,
  pow,
  // comparisons (broadcasting, bool result)
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  where,
  // elementwise unary
  neg,
  abs,
  exp,
  log,
  sqrt,
  rsqrt,
  sin,
  cos,
  reciprocal,
  relu,
  sigmoid,
  tanh,
  gelu,
  silu,
  // linear algebra
  matmul,
  linear,
  // reductions
  sum,
  mean,
  max,
  argmax,
  softmax,
  // norms, position encoding, attention
  rmsnorm,
  layernorm,
  rope,
  attention,
  // layout
  reshape,
  permute,
  transpose,
  expand,
  slice,
  concat,
  gather,
  embedding,
  cast,
  full,
  arange,
  // in-place update of a buffer (KV cache write)
  buffer_update,
  // communication
  all_reduce,
  all_gather,
  group_rank,
  send,
  recv,
  // random numbers
  randn,
  bernoulli,
  dropout,
  // compiler-internal: a fused elementwise/reduction kernel (see
  // src/compiler/fusion.h); its output type is in its attributes
  fused,
  // attention over the first kv_len keys of a KV cache (a decode step's
  // actual sequence length, as Ascend's fused infer attention takes it):
  // q [B, Hq, Sq, D], k/v [B, Hkv, S, D], optional positions [B, Sq];
  // attribute kv_len (a SymExpr: a host value that changes every step)
  // is updatable: a captured graph patches it at each replay
  fused_attention,
  kCount
};

struct OpInfo {
  std::string_view name;
  int min_inputs;
  int max_inputs;
  bool composite;    // has a default decomposition, no kernel
  bool side_effect;  // must not be removed or merged (comm, in-place, rng)
  bool rng;          // draws random numbers
  // The attribute a captured launch may have patched at replay without a
  // recapture (a host-side parameter that changes every step), or null.
  const char* updatable = nullptr;
};

NPUCACHE_API const OpInfo& op_info(Op op);
NPUCACHE_API std::string_view op_name(Op op);
// Throws ShapeError for an unknown name.
NPUCACHE_API Op op_from_name(std::string_view name);

}  // namespace npucache
