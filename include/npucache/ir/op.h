// The operator set of npucache's graph IR, and each op's facts.
//
// Every op has shape/dtype inference (src/ir/infer_*.cpp). Primitive ops have
// a kernel on the simulated device; composite ops (linear, attention, norms,
// gelu, silu, transpose, dropout) do not: they carry a default decomposition
// into primitives (src/nn/decompositions.cpp) that eager execution runs and
// the compiler's decompose pass applies.
//
// What the passes know of an op is its row in the one table (OpInfo,
// src/ir/op_table.cpp): its class, input counts and traits. Inference,
// fusion, row independence, constant folding and the kernels' dispatch read
// these instead of lists of their own; the scalar function of an
// elementwise unary op is the runtime's (src/runtime/unary_math.h).
//
// Op numbers are pinned: each enumerator's `= N` is its number in every
// encoding (serialized graphs and programs, fused code, capture templates)
// and in the canonical hash (op_number). They are dense (0 .. kCount - 1)
// and append-only: a new op takes the next number, before kCount; no op is
// ever renumbered or removed. tests/ir/op_numbers.txt lists them and a test
// holds the enum to it.
#pragma once

#include <npucache/export.h>

#include <cstdint>
#include <string_view>

namespace npucache {

enum class Op : uint16_t {
  placeholder = 0,
  // elementwise binary (broadcasting, equal dtypes)
  add = 1,
  sub = 2,
  mul = 3,
  div = 4,
  maximum = 5,
  minimum = 6,
  pow = 7,
  // comparisons (broadcasting, bool result)
  eq = 8,
  ne = 9,
  lt = 10,
  le = 11,
  gt = 12,
  ge = 13,
  where = 14,
  // elementwise unary
  neg = 15,
  abs = 16,
  exp = 17,
  log = 18,
  sqrt = 19,
  rsqrt = 20,
  sin = 21,
  cos = 22,
  reciprocal = 23,
  relu = 24,
  sigmoid = 25,
  tanh = 26,
  gelu = 27,
  silu = 28,
  // linear algebra
  matmul = 29,
  linear = 30,
  // reductions
  sum = 31,
  mean = 32,
  max = 33,
  argmax = 34,
  softmax = 35,
  // norms, position encoding, attention
  rmsnorm = 36,
  layernorm = 37,
  rope = 38,
  attention = 39,
  // layout
  reshape = 40,
  permute = 41,
  transpose = 42,
  expand = 43,
  slice = 44,
  concat = 45,
  gather = 46,
  embedding = 47,
  cast = 48,
  full = 49,
  arange = 50,
  // in-place update of a buffer (KV cache write)
  buffer_update = 51,
  // communication
  all_reduce = 52,
  all_gather = 53,
  group_rank = 54,
  send = 55,
  recv = 56,
  // random numbers
  randn = 57,
  bernoulli = 58,
  dropout = 59,
  // compiler-internal: a fused elementwise/reduction kernel (see
  // src/compiler/fusion.h); its output type is in its attributes
  fused = 60,
  // attention over the first kv_len keys of a KV cache (a decode step's
  // actual sequence length, as Ascend's fused infer attention takes it):
  // q [B, Hq, Sq, D], k/v [B, Hkv, S, D], optional positions [B, Sq];
  // attribute kv_len (a SymExpr: a host value that changes every step)
  // is updatable: a captured graph patches it at each replay
  fused_attention = 61,
  // elementwise unary (appended: numbers are pinned)
  erf = 62,
  // a call of a compile region (nn/region.h): operands are the region's
  // tensor arguments, then the parameters and buffers its body reads;
  // attributes name the body by its canonical hash ("region"), give the
  // argument count ("num_args"), the result type ("out_dtype",
  // "out_shape"), the operands the body updates in place ("mutates") and
  // its collectives ("collectives"), and the call's values of the body's
  // symbols in canonical order ("bind"). It has no kernel: the compiler links
  // the compiled body in its place before lowering
  region_call = 63,
  kCount
};

// Which rules an op follows; the passes switch on this, never on lists of
// ops.
enum class OpClass : uint8_t {
  input,       // placeholder
  unary,       // elementwise, one operand, result of the operand's type
  binary,      // elementwise arithmetic: broadcasting, equal dtypes
  comparison,  // broadcasting, equal dtypes, bool result
  select,      // where(cond, a, b): broadcasting
  cast,        // elementwise dtype conversion
  linalg,      // matmul, linear, norms, softmax, rope, attention
  reduction,   // over attribute dims (sum, mean, max, argmax)
  layout,      // views and moves of elements: reshape .. embedding
  creation,    // no tensor operands: full, arange
  comm,        // communication through the current Communicator
  random,      // random numbers
  special,     // in-place update, fused code
};

// An op's row. Aggregate: rows say only what differs from the defaults.
struct OpInfo {
  std::string_view name;
  OpClass cls;
  int min_inputs;
  int max_inputs;
  bool composite = false;    // has a default decomposition, no kernel
  bool side_effect = false;  // must not be removed or merged (comm, in-place, rng)
  bool rng = false;          // draws random numbers
  // Unary and binary ops: defined on floating dtypes only (else on every
  // dtype but bool).
  bool floating_only = false;
  // Output element i reads only the input elements at i (after
  // broadcasting), so rows stay independent (compiler/row_independence).
  bool pointwise = false;
  // The compiler's fusion may put it into a fused kernel (f32 operands).
  bool fusible = false;
  // Constant folding may evaluate it on constant (`full`) operands.
  bool foldable = false;
  // The attribute a captured launch may have patched at replay without a
  // recapture (a host-side parameter that changes every step), or null.
  const char* updatable = nullptr;
};

// The op's pinned number: what encodings store and the hash reads.
constexpr uint32_t op_number(Op op) { return static_cast<uint32_t>(op); }
// Whether `n` is some op's number (numbers are dense below kCount).
constexpr bool is_op_number(uint64_t n) { return n < static_cast<uint64_t>(Op::kCount); }

NPUCACHE_API const OpInfo& op_info(Op op);
NPUCACHE_API std::string_view op_name(Op op);
// Throws ShapeError for an unknown name.
NPUCACHE_API Op op_from_name(std::string_view name);

}  // namespace npucache
