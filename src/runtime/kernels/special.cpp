// Kernels for rope, full, arange and buffer_update.
#include "runtime/kernels/kernel_util.h"

#include <cmath>

namespace npucache::runtime::kernels {
namespace {

// Rotary position embedding, rotate-half form: for each pair (i, i + D/2)
// of head dim D at position p, angle = p * theta^(-2i/D).
void rope(const KernelLaunch& l) {
  const TensorArg& x = l.args[0];
  const TensorArg& pos = l.args[1];
  const int64_t B = x.dims[0], S = x.dims[1], H = x.dims[2], D = x.dims[3];
  const double theta = l.attrs ? l.attrs->get_double_or("theta", 10000.0) : 10000.0;
  const int64_t half = D / 2;
  FloatIn in(x);
  FloatOut out(l.args[2]);
  std::vector<float> cs(static_cast<std::size_t>(half)), sn(static_cast<std::size_t>(half));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const double p = load_as_double(pos, b * S + s);
      for (int64_t i = 0; i < half; ++i) {
        double a = p * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
        cs[static_cast<std::size_t>(i)] = static_cast<float>(std::cos(a));
        sn[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(a));
      }
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = ((b * S + s) * H + h) * D;
        const float* xi = in.data() + base;
        float* yo = out.data() + base;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = xi[i], x2 = xi[i + half];
          const float c = cs[static_cast<std::size_t>(i)], sv = sn[static_cast<std::size_t>(i)];
          yo[i] = x1 * c - x2 * sv;
          yo[i + half] = x2 * c + x1 * sv;
        }
      }
    }
  out.commit();
}

void full(const KernelLaunch& l) {
  const TensorArg& out = l.args.back();
  const double v = l.attrs->get<double>("value");
  const int64_t n = out.numel();
  if (out.dtype == DType::f32) {
    auto* p = static_cast<float*>(out.data());
    std::fill(p, p + n, static_cast<float>(v));
    return;
  }
  for (int64_t i = 0; i < n; ++i) store_from_double(out, i, v);
}

void arange(const KernelLaunch& l) {
  const TensorArg& out = l.args.back();
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) store_from_double(out, i, static_cast<double>(i));
}

// buffer [B, Smax, ...] <- values [B, S, ...] at positions [B, S].
void buffer_update(const KernelLaunch& l) {
  const TensorArg& buf = l.args[0];
  const TensorArg& pos = l.args[1];
  const TensorArg& val = l.args[2];
  const TensorArg& out = l.args[3];
  if (out.data() != buf.data()) std::memcpy(out.data(), buf.data(), buf.bytes());
  const int64_t B = val.dims[0], S = val.dims[1], Smax = buf.dims[1];
  const int64_t rows = B * S;
  const int64_t row = rows > 0 ? val.numel() / rows : 0;
  const std::size_t rb = static_cast<std::size_t>(row) * dtype_size(val.dtype);
  auto* dst = static_cast<char*>(out.data());
  auto* src = static_cast<const char*>(val.data());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const auto p = static_cast<int64_t>(load_as_double(pos, b * S + s));
      if (p < 0 || p >= Smax)
        kernel_fail(l, "position " + std::to_string(p) + " outside the buffer's " + std::to_string(Smax) + " slots");
      std::memcpy(dst + static_cast<std::size_t>(b * Smax + p) * rb, src + static_cast<std::size_t>(b * S + s) * rb,
                  rb);
    }
}

}  // namespace

void special_kernel(const KernelLaunch& l) {
  switch (l.op) {
    case Op::rope: return rope(l);
    case Op::full: return full(l);
    case Op::arange: return arange(l);
    case Op::buffer_update: return buffer_update(l);
    default: kernel_fail(l, "not a special op");
  }
}

}  // namespace npucache::runtime::kernels
