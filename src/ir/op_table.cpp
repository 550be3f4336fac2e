#include <npucache/error.h>
#include <npucache/ir/op.h>

#include <array>
#include <string>

namespace npucache {
namespace {

constexpr int kMany = 1 << 16;  // no upper bound on inputs

struct Entry {
  Op op;
  OpInfo info;
};

// name, min inputs, max inputs, composite, side_effect, rng[, updatable attribute]
constexpr Entry kTable[] = {
    {Op::placeholder, {"placeholder", 0, 0, false, false, false}},
    {Op::add, {"add", 2, 2, false, false, false}},
    {Op::sub, {"sub", 2, 2, false, false, false}},
    {Op::mul, {"mul", 2, 2, false, false, false}},
    {Op::div, {"div", 2, 2, false, false, false}},
    {Op::maximum, {"maximum", 2, 2, false, false, false}},
    {Op::minimum, {"minimum", 2, 2, false, false, false}},
    {Op::pow, {"pow", 2, 2, false, false, false}},
    {Op::eq, {"eq", 2, 2, false, false, false}},
    {Op::ne, {"ne", 2, 2, false, false, false}},
    {Op::lt, {"lt", 2, 2, false, false, false}},
    {Op::le, {"le", 2, 2, false, false, false}},
    {Op::gt, {"gt", 2, 2, false, false, false}},
    {Op::ge, {"ge", 2, 2, false, false, false}},
    {Op::where, {"where", 3, 3, false, false, false}},
    {Op::neg, {"neg", 1, 1, false, false, false}},
    {Op::abs, {"abs", 1, 1, false, false, false}},
    {Op::exp, {"exp", 1, 1, false, false, false}},
    {Op::log, {"log", 1, 1, false, false, false}},
    {Op::sqrt, {"sqrt", 1, 1, false, false, false}},
    {Op::rsqrt, {"rsqrt", 1, 1, false, false, false}},
    {Op::sin, {"sin", 1, 1, false, false, false}},
    {Op::cos, {"cos", 1, 1, false, false, false}},
    {Op::reciprocal, {"reciprocal", 1, 1, false, false, false}},
    {Op::relu, {"relu", 1, 1, false, false, false}},
    {Op::sigmoid, {"sigmoid", 1, 1, false, false, false}},
    {Op::tanh, {"tanh", 1, 1, false, false, false}},
    {Op::gelu, {"gelu", 1, 1, true, false, false}},
    {Op::silu, {"silu", 1, 1, true, false, false}},
    {Op::matmul, {"matmul", 2, 2, false, false, false}},
    {Op::linear, {"linear", 2, 3, true, false, false}},
    {Op::sum, {"sum", 1, 1, false, false, false}},
    {Op::mean, {"mean", 1, 1, false, false, false}},
    {Op::max, {"max", 1, 1, false, false, false}},
    {Op::argmax, {"argmax", 1, 1, false, false, false}},
    {Op::softmax, {"softmax", 1, 1, false, false, false}},
    {Op::rmsnorm, {"rmsnorm", 2, 2, true, false, false}},
    {Op::layernorm, {"layernorm", 3, 3, true, false, false}},
    {Op::rope, {"rope", 2, 2, false, false, false}},
    {Op::attention, {"attention", 3, 4, true, false, false}},
    {Op::reshape, {"reshape", 1, 1, false, false, false}},
    {Op::permute, {"permute", 1, 1, false, false, false}},
    {Op::transpose, {"transpose", 1, 1, true, false, false}},
    {Op::expand, {"expand", 1, 1, false, false, false}},
    {Op::slice, {"slice", 1, 1, false, false, false}},
    {Op::concat, {"concat", 1, kMany, false, false, false}},
    {Op::gather, {"gather", 2, 2, false, false, false}},
    {Op::embedding, {"embedding", 2, 2, false, false, false}},
    {Op::cast, {"cast", 1, 1, false, false, false}},
    {Op::full, {"full", 0, 0, false, false, false}},
    {Op::arange, {"arange", 0, 0, false, false, false}},
    {Op::buffer_update, {"buffer_update", 3, 3, false, true, false}},
    {Op::all_reduce, {"all_reduce", 1, 1, false, true, false}},
    {Op::all_gather, {"all_gather", 1, 1, false, true, false}},
    {Op::group_rank, {"group_rank", 0, 0, false, false, false}},
    {Op::send, {"send", 1, 1, false, true, false}},
    {Op::recv, {"recv", 0, 0, false, true, false}},
    {Op::randn, {"randn", 0, 0, false, true, true}},
    {Op::bernoulli, {"bernoulli", 1, 1, false, true, true}},
    {Op::dropout, {"dropout", 1, 1, true, true, true}},
    {Op::fused, {"fused", 0, kMany, false, false, false}},
    {Op::fused_attention, {"fused_attention", 3, 4, false, false, false, "kv_len"}},
};
static_assert(std::size(kTable) == static_cast<std::size_t>(Op::kCount), "every Op needs an entry in kTable");

constexpr bool table_in_order() {
  for (std::size_t i = 0; i < std::size(kTable); ++i)
    if (static_cast<std::size_t>(kTable[i].op) != i) return false;
  return true;
}
static_assert(table_in_order(), "kTable must list ops in enum order");

}  // namespace

const OpInfo& op_info(Op op) {
  auto i = static_cast<std::size_t>(op);
  if (i >= std::size(kTable)) throw Error("invalid op value " + std::to_string(i));
  return kTable[i].info;
}

std::string_view op_name(Op op) { return op_info(op).name; }

Op op_from_name(std::string_view name) {
  for (const auto& e : kTable)
    if (e.info.name == name) return e.op;
  throw ShapeError("unknown op '" + std::string(name) + "'");
}

}  // namespace npucache
