// The table of unary_math.h: one scalar function per elementwise unary op.
// Adding such an op is its enum value, its row in src/ir/op_table.cpp and
// one row here.
#include "runtime/unary_math.h"

#include <array>
#include <cmath>

namespace npucache::runtime {
namespace {
// A namespace of its own: the functions below are named after the ops and
// must not be found by unqualified calls elsewhere in a unity build.
namespace unary_rows {

template <float (*F)(float)>
void map(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = F(x[i]);
}

template <float (*F)(float), double (*Exact)(double) = nullptr>
constexpr UnaryMath row(Op op) {
  return {op, F, &map<F>, Exact};
}

float neg(float x) { return -x; }
double neg_exact(double x) { return -x; }
float abs(float x) { return std::fabs(x); }
double abs_exact(double x) { return std::fabs(x); }
float exp(float x) { return std::exp(x); }
float log(float x) { return std::log(x); }
float sqrt(float x) { return std::sqrt(x); }
float rsqrt(float x) { return 1.0f / std::sqrt(x); }
float sin(float x) { return std::sin(x); }
float cos(float x) { return std::cos(x); }
float reciprocal(float x) { return 1.0f / x; }
float relu(float x) { return x > 0.0f ? x : 0.0f; }
double relu_exact(double x) { return x > 0 ? x : 0; }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float tanh(float x) { return std::tanh(x); }
float erf(float x) { return std::erf(x); }

constexpr UnaryMath kRows[] = {
    row<neg, neg_exact>(Op::neg),
    row<abs, abs_exact>(Op::abs),
    row<exp>(Op::exp),
    row<log>(Op::log),
    row<sqrt>(Op::sqrt),
    row<rsqrt>(Op::rsqrt),
    row<sin>(Op::sin),
    row<cos>(Op::cos),
    row<reciprocal>(Op::reciprocal),
    row<relu, relu_exact>(Op::relu),
    row<sigmoid>(Op::sigmoid),
    row<tanh>(Op::tanh),
    row<erf>(Op::erf),
};

constexpr bool one_row_each() {
  for (std::size_t i = 0; i < std::size(kRows); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (kRows[i].op == kRows[j].op) return false;
  return true;
}
static_assert(one_row_each(), "an op has two rows in kRows");

// Indexed by op number; null where an op has no row.
constexpr std::array<const UnaryMath*, static_cast<std::size_t>(Op::kCount)> make_index() {
  std::array<const UnaryMath*, static_cast<std::size_t>(Op::kCount)> index{};
  for (const UnaryMath& r : kRows) index[op_number(r.op)] = &r;
  return index;
}
constexpr auto kIndex = make_index();

}  // namespace unary_rows
}  // namespace

const UnaryMath* unary_math(Op op) { return is_op_number(op_number(op)) ? unary_rows::kIndex[op_number(op)] : nullptr; }

}  // namespace npucache::runtime
