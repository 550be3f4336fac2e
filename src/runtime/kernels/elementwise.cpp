// Elementwise kernels: broadcasting binary arithmetic and comparisons,
// where, and unary functions (their math is runtime/unary_math.h's), by
// the op's class. Floating dtypes compute in f32; i32/i64 compute
// natively; anything else goes through a (slow, exact) double path.
#include "runtime/kernels/kernel_util.h"
#include "runtime/unary_math.h"

#include <algorithm>
#include <cmath>

namespace npucache::runtime::kernels {
namespace {

template <class T>
T binary_op(Op op, T a, T b) {
  switch (op) {
    case Op::add: return a + b;
    case Op::sub: return a - b;
    case Op::mul: return a * b;
    case Op::div:
      if constexpr (std::is_integral_v<T>)
        return b == 0 ? T{0} : static_cast<T>(a / b);
      else
        return a / b;
    case Op::maximum: return std::max(a, b);
    case Op::minimum: return std::min(a, b);
    case Op::pow: return static_cast<T>(std::pow(a, b));
    default: return T{};
  }
}

template <class T>
bool compare_op(Op op, T a, T b) {
  switch (op) {
    case Op::eq: return a == b;
    case Op::ne: return a != b;
    case Op::lt: return a < b;
    case Op::le: return a <= b;
    case Op::gt: return a > b;
    case Op::ge: return a >= b;
    default: return false;
  }
}

bool is_compare(Op op) { return op_info(op).cls == OpClass::comparison; }

// Binary op whose operands are both native T (f32, i32, i64) or staged f32.
template <class T, class Load>
void binary_native(const KernelLaunch& l, const T* a, const T* b) {
  const TensorArg& out = l.args[2];
  const Op op = l.op;
  if (is_compare(op)) {
    auto* o = static_cast<uint8_t*>(out.data());
    for_each_broadcast<2>(out.dims, {&l.args[0].dims, &l.args[1].dims},
                          [&](int64_t i, const std::array<int64_t, 2>& j) { o[i] = compare_op(op, a[j[0]], b[j[1]]); });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    FloatOut o(out);
    float* op_ = o.data();
    switch (op) {  // specialised loops so the compiler can vectorise
      case Op::add:
        for_each_broadcast<2>(out.dims, {&l.args[0].dims, &l.args[1].dims},
                              [&](int64_t i, const std::array<int64_t, 2>& j) { op_[i] = a[j[0]] + b[j[1]]; });
        break;
      case Op::mul:
        for_each_broadcast<2>(out.dims, {&l.args[0].dims, &l.args[1].dims},
                              [&](int64_t i, const std::array<int64_t, 2>& j) { op_[i] = a[j[0]] * b[j[1]]; });
        break;
      default:
        for_each_broadcast<2>(
            out.dims, {&l.args[0].dims, &l.args[1].dims},
            [&](int64_t i, const std::array<int64_t, 2>& j) { op_[i] = binary_op<float>(op, a[j[0]], b[j[1]]); });
    }
    o.commit();
  } else {
    auto* o = static_cast<T*>(out.data());
    for_each_broadcast<2>(
        out.dims, {&l.args[0].dims, &l.args[1].dims},
        [&](int64_t i, const std::array<int64_t, 2>& j) { o[i] = binary_op<T>(op, a[j[0]], b[j[1]]); });
  }
}

void binary_kernel(const KernelLaunch& l) {
  if (l.args.size() != 3) kernel_fail(l, "expects 2 inputs and an output");
  DType t = l.args[0].dtype;
  if (is_floating(t)) {
    FloatIn a(l.args[0]), b(l.args[1]);
    binary_native<float, void>(l, a.data(), b.data());
  } else if (t == DType::i64) {
    binary_native<int64_t, void>(l, static_cast<const int64_t*>(l.args[0].data()),
                                 static_cast<const int64_t*>(l.args[1].data()));
  } else if (t == DType::i32) {
    binary_native<int32_t, void>(l, static_cast<const int32_t*>(l.args[0].data()),
                                 static_cast<const int32_t*>(l.args[1].data()));
  } else {  // bool comparisons
    const TensorArg& out = l.args[2];
    for_each_broadcast<2>(
        out.dims, {&l.args[0].dims, &l.args[1].dims}, [&](int64_t i, const std::array<int64_t, 2>& j) {
          double a = load_as_double(l.args[0], j[0]);
          double b = load_as_double(l.args[1], j[1]);
          store_from_double(out, i, is_compare(l.op) ? compare_op(l.op, a, b) : binary_op(l.op, a, b));
        });
  }
}

void where_kernel(const KernelLaunch& l) {
  const TensorArg& out = l.args[3];
  const auto* c = static_cast<const uint8_t*>(l.args[0].data());
  if (is_floating(out.dtype)) {
    FloatIn a(l.args[1]), b(l.args[2]);
    FloatOut o(out);
    float* op_ = o.data();
    for_each_broadcast<3>(
        out.dims, {&l.args[0].dims, &l.args[1].dims, &l.args[2].dims},
        [&](int64_t i, const std::array<int64_t, 3>& j) { op_[i] = c[j[0]] ? a.data()[j[1]] : b.data()[j[2]]; });
    o.commit();
  } else {
    for_each_broadcast<3>(
        out.dims, {&l.args[0].dims, &l.args[1].dims, &l.args[2].dims}, [&](int64_t i, const std::array<int64_t, 3>& j) {
          store_from_double(out, i, c[j[0]] ? load_as_double(l.args[1], j[1]) : load_as_double(l.args[2], j[2]));
        });
  }
}

void unary_kernel(const KernelLaunch& l) {
  const TensorArg& in = l.args[0];
  const TensorArg& out = l.args[1];
  const int64_t n = out.numel();
  if (in.numel() != n) kernel_fail(l, "input and output sizes differ");
  const UnaryMath* m = unary_math(l.op);
  if (!m) kernel_fail(l, "is not an elementwise unary op");
  if (is_floating(in.dtype)) {
    FloatIn a(in);
    FloatOut o(out);
    m->map(a.data(), o.data(), n);
    o.commit();
    return;
  }
  if (!m->exact) kernel_fail(l, "needs a floating operand");
  for (int64_t i = 0; i < n; ++i) store_from_double(out, i, m->exact(load_as_double(in, i)));
}

}  // namespace

void elementwise_kernel(const KernelLaunch& l) {
  switch (op_info(l.op).cls) {
    case OpClass::binary:
    case OpClass::comparison: return binary_kernel(l);
    case OpClass::select: return where_kernel(l);
    case OpClass::unary: return unary_kernel(l);
    default: kernel_fail(l, "is not an elementwise op");
  }
}

}  // namespace npucache::runtime::kernels
