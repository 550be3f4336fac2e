// Reductions (sum, mean, max over a set of dims; argmax over one dim) and
// softmax. Accumulation is in double for sum/mean.
#include "runtime/kernels/kernel_util.h"

#include <cmath>
#include <limits>

namespace npucache::runtime::kernels {

void reduce_kernel(const KernelLaunch& l) {
  const TensorArg& in = l.args[0];
  const TensorArg& out = l.args[1];
  const auto& d = in.dims;
  const std::size_t r = d.size();
  std::vector<bool> reduced(r, false);
  if (l.op == Op::argmax) {
    int64_t dim = l.attrs->get_int("dim");
    reduced[static_cast<std::size_t>(dim < 0 ? dim + static_cast<int64_t>(r) : dim)] = true;
  } else {
    for (int64_t dim : l.attrs->get<std::vector<int64_t>>("dims"))
      reduced[static_cast<std::size_t>(dim < 0 ? dim + static_cast<int64_t>(r) : dim)] = true;
  }
  // Output strides over the input's dims, 0 on reduced dims.
  std::vector<int64_t> kept;
  for (std::size_t i = 0; i < r; ++i) kept.push_back(reduced[i] ? 1 : d[i]);
  std::vector<int64_t> ostride = contiguous_strides(kept);
  for (std::size_t i = 0; i < r; ++i)
    if (reduced[i]) ostride[i] = 0;
  const int64_t on = out.numel();
  const int64_t n = in.numel();
  int64_t group = on ? n / on : 0;
  std::vector<double> acc(static_cast<std::size_t>(on),
                          l.op == Op::sum || l.op == Op::mean ? 0.0 : -std::numeric_limits<double>::infinity());
  std::vector<int64_t> arg(static_cast<std::size_t>(l.op == Op::argmax ? on : 0), 0);
  FloatIn fin(in);
  std::vector<int64_t> counter(r, 0);
  int64_t oi = 0;
  std::size_t argdim = 0;
  for (std::size_t k = 0; k < r; ++k)
    if (reduced[k]) argdim = k;
  for (int64_t i = 0; i < n; ++i) {
    double v = fin.data()[i];
    auto& a = acc[static_cast<std::size_t>(oi)];
    if (l.op == Op::sum || l.op == Op::mean) {
      a += v;
    } else if (v > a) {  // the first maximum wins
      a = v;
      if (l.op == Op::argmax) arg[static_cast<std::size_t>(oi)] = counter[argdim];
    }
    for (std::size_t k = r; k-- > 0;) {  // advance the counter and the output index
      ++counter[k];
      oi += ostride[k];
      if (counter[k] < d[k]) break;
      oi -= ostride[k] * d[k];
      counter[k] = 0;
    }
  }
  if (l.op == Op::argmax) {
    auto* o = static_cast<int64_t*>(out.data());
    for (int64_t i = 0; i < on; ++i) o[i] = arg[static_cast<std::size_t>(i)];
    return;
  }
  FloatOut o(out);
  for (int64_t i = 0; i < on; ++i) {
    double v = acc[static_cast<std::size_t>(i)];
    if (l.op == Op::mean) v /= static_cast<double>(group);
    o.data()[i] = static_cast<float>(v);
  }
  o.commit();
}

void softmax_kernel(const KernelLaunch& l) {
  const TensorArg& in = l.args[0];
  const auto& d = in.dims;
  int64_t dim = l.attrs->get_int("dim");
  if (dim < 0) dim += static_cast<int64_t>(d.size());
  int64_t outer = 1, inner = 1;
  const int64_t len = d[static_cast<std::size_t>(dim)];
  for (int64_t i = 0; i < dim; ++i) outer *= d[static_cast<std::size_t>(i)];
  for (std::size_t i = static_cast<std::size_t>(dim) + 1; i < d.size(); ++i) inner *= d[i];
  FloatIn x(in);
  FloatOut y(l.args[1]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* xp = x.data() + o * len * inner + i;
      float* yp = y.data() + o * len * inner + i;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < len; ++k) m = std::max(m, xp[k * inner]);
      if (m == -std::numeric_limits<float>::infinity()) m = 0.0f;  // fully masked row
      double s = 0.0;
      for (int64_t k = 0; k < len; ++k) {
        float e = std::exp(xp[k * inner] - m);
        yp[k * inner] = e;
        s += e;
      }
      float inv = s > 0.0 ? static_cast<float>(1.0 / s) : 0.0f;
      for (int64_t k = 0; k < len; ++k) yp[k * inner] *= inv;
    }
  y.commit();
}

}  // namespace npucache::runtime::kernels
