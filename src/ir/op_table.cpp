#include <npucache/error.h>
#include <npucache/ir/op.h>

#include <array>
#include <string>

namespace npucache {
namespace {

constexpr int kMany = 1 << 16;  // no upper bound on inputs

// The traits a row combines (OpInfo's fields, op.h).
enum Trait : unsigned {
  kComposite = 1u << 0,
  kSideEffect = 1u << 1,
  kRng = 1u << 2,
  kFloatingOnly = 1u << 3,
  kPointwise = 1u << 4,
  kFusible = 1u << 5,
  kFoldable = 1u << 6,
};
// An elementwise op with a kernel.
constexpr unsigned kElementwise = kPointwise | kFusible | kFoldable;
// Random numbers: drawn in order, so never removed or merged.
constexpr unsigned kRandom = kRng | kSideEffect;

struct Row {
  Op op;
  std::string_view name;
  OpClass cls;
  int min_inputs;
  int max_inputs;
  unsigned traits;
  const char* updatable = nullptr;
};

// Every op, in number order: op, name, class, inputs (min, max), traits
// [, updatable attribute].
constexpr Row kRows[] = {
    {Op::placeholder, "placeholder", OpClass::input, 0, 0, 0},
    {Op::add, "add", OpClass::binary, 2, 2, kElementwise},
    {Op::sub, "sub", OpClass::binary, 2, 2, kElementwise},
    {Op::mul, "mul", OpClass::binary, 2, 2, kElementwise},
    {Op::div, "div", OpClass::binary, 2, 2, kElementwise},
    {Op::maximum, "maximum", OpClass::binary, 2, 2, kElementwise},
    {Op::minimum, "minimum", OpClass::binary, 2, 2, kElementwise},
    {Op::pow, "pow", OpClass::binary, 2, 2, kElementwise | kFloatingOnly},
    {Op::eq, "eq", OpClass::comparison, 2, 2, kElementwise},
    {Op::ne, "ne", OpClass::comparison, 2, 2, kElementwise},
    {Op::lt, "lt", OpClass::comparison, 2, 2, kElementwise},
    {Op::le, "le", OpClass::comparison, 2, 2, kElementwise},
    {Op::gt, "gt", OpClass::comparison, 2, 2, kElementwise},
    {Op::ge, "ge", OpClass::comparison, 2, 2, kElementwise},
    {Op::where, "where", OpClass::select, 3, 3, kElementwise},
    {Op::neg, "neg", OpClass::unary, 1, 1, kElementwise},
    {Op::abs, "abs", OpClass::unary, 1, 1, kElementwise},
    {Op::exp, "exp", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::log, "log", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::sqrt, "sqrt", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::rsqrt, "rsqrt", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::sin, "sin", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::cos, "cos", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::reciprocal, "reciprocal", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::relu, "relu", OpClass::unary, 1, 1, kElementwise},
    {Op::sigmoid, "sigmoid", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::tanh, "tanh", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::gelu, "gelu", OpClass::unary, 1, 1, kComposite | kPointwise | kFloatingOnly},
    {Op::silu, "silu", OpClass::unary, 1, 1, kComposite | kPointwise | kFloatingOnly},
    {Op::matmul, "matmul", OpClass::linalg, 2, 2, 0},
    {Op::linear, "linear", OpClass::linalg, 2, 3, kComposite},
    {Op::sum, "sum", OpClass::reduction, 1, 1, 0},
    {Op::mean, "mean", OpClass::reduction, 1, 1, 0},
    {Op::max, "max", OpClass::reduction, 1, 1, 0},
    {Op::argmax, "argmax", OpClass::reduction, 1, 1, 0},
    {Op::softmax, "softmax", OpClass::linalg, 1, 1, 0},
    {Op::rmsnorm, "rmsnorm", OpClass::linalg, 2, 2, kComposite},
    {Op::layernorm, "layernorm", OpClass::linalg, 3, 3, kComposite},
    {Op::rope, "rope", OpClass::linalg, 2, 2, 0},
    {Op::attention, "attention", OpClass::linalg, 3, 4, kComposite},
    {Op::reshape, "reshape", OpClass::layout, 1, 1, kFoldable},
    {Op::permute, "permute", OpClass::layout, 1, 1, kFoldable},
    {Op::transpose, "transpose", OpClass::layout, 1, 1, kComposite},
    {Op::expand, "expand", OpClass::layout, 1, 1, kFoldable},
    {Op::slice, "slice", OpClass::layout, 1, 1, 0},
    {Op::concat, "concat", OpClass::layout, 1, kMany, 0},
    {Op::gather, "gather", OpClass::layout, 2, 2, 0},
    {Op::embedding, "embedding", OpClass::layout, 2, 2, 0},
    {Op::cast, "cast", OpClass::cast, 1, 1, kPointwise | kFoldable},
    {Op::full, "full", OpClass::creation, 0, 0, 0},
    {Op::arange, "arange", OpClass::creation, 0, 0, 0},
    {Op::buffer_update, "buffer_update", OpClass::special, 3, 3, kSideEffect},
    {Op::all_reduce, "all_reduce", OpClass::comm, 1, 1, kSideEffect | kPointwise},
    {Op::all_gather, "all_gather", OpClass::comm, 1, 1, kSideEffect},
    {Op::group_rank, "group_rank", OpClass::comm, 0, 0, 0},
    {Op::send, "send", OpClass::comm, 1, 1, kSideEffect},
    {Op::recv, "recv", OpClass::comm, 0, 0, kSideEffect},
    {Op::randn, "randn", OpClass::random, 0, 0, kRandom},
    {Op::bernoulli, "bernoulli", OpClass::random, 1, 1, kRandom},
    {Op::dropout, "dropout", OpClass::random, 1, 1, kComposite | kRandom},
    {Op::fused, "fused", OpClass::special, 0, kMany, 0},
    {Op::fused_attention, "fused_attention", OpClass::linalg, 3, 4, 0, "kv_len"},
    {Op::erf, "erf", OpClass::unary, 1, 1, kElementwise | kFloatingOnly},
    {Op::region_call, "region_call", OpClass::special, 0, kMany, kSideEffect},
};
static_assert(std::size(kRows) == static_cast<std::size_t>(Op::kCount), "every Op needs a row in kRows");

constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < std::size(kRows); ++i)
    if (op_number(kRows[i].op) != i) return false;
  return true;
}
static_assert(rows_in_order(), "kRows must list ops in number order");

// What the passes rely on: an elementwise class fixes the input count; only
// elementwise ops with a kernel fuse; folding evaluates those, casts and
// views; only unary and binary ops may be floating-only.
constexpr bool rows_consistent() {
  for (const Row& r : kRows) {
    const bool elementwise =
        r.cls == OpClass::unary || r.cls == OpClass::binary || r.cls == OpClass::comparison || r.cls == OpClass::select;
    const int arity = r.cls == OpClass::unary ? 1 : r.cls == OpClass::select ? 3 : 2;
    if (elementwise && (r.min_inputs != arity || r.max_inputs != arity || !(r.traits & kPointwise))) return false;
    if ((r.traits & kFusible) && (!elementwise || (r.traits & kComposite))) return false;
    if ((r.traits & kFoldable) && (r.traits & (kComposite | kSideEffect))) return false;
    if ((r.traits & kFoldable) && !elementwise && r.cls != OpClass::cast && r.cls != OpClass::layout) return false;
    if ((r.traits & kFloatingOnly) && r.cls != OpClass::unary && r.cls != OpClass::binary) return false;
    if ((r.traits & kRng) && !(r.traits & kSideEffect)) return false;
  }
  return true;
}
static_assert(rows_consistent(), "a row's traits contradict its class (see rows_consistent)");

constexpr std::array<OpInfo, std::size(kRows)> make_table() {
  std::array<OpInfo, std::size(kRows)> t{};
  for (std::size_t i = 0; i < t.size(); ++i) {
    const Row& r = kRows[i];
    auto has = [&](unsigned trait) { return (r.traits & trait) != 0; };
    t[i] = OpInfo{.name = r.name,
                  .cls = r.cls,
                  .min_inputs = r.min_inputs,
                  .max_inputs = r.max_inputs,
                  .composite = has(kComposite),
                  .side_effect = has(kSideEffect),
                  .rng = has(kRng),
                  .floating_only = has(kFloatingOnly),
                  .pointwise = has(kPointwise),
                  .fusible = has(kFusible),
                  .foldable = has(kFoldable),
                  .updatable = r.updatable};
  }
  return t;
}
constexpr std::array<OpInfo, std::size(kRows)> kTable = make_table();

}  // namespace

const OpInfo& op_info(Op op) {
  const uint32_t i = op_number(op);
  if (!is_op_number(i)) throw Error("invalid op value " + std::to_string(i));
  return kTable[i];
}

std::string_view op_name(Op op) { return op_info(op).name; }

Op op_from_name(std::string_view name) {
  for (const Row& r : kRows)
    if (r.name == name) return r.op;
  throw ShapeError("unknown op '" + std::string(name) + "'");
}

}  // namespace npucache
