// Helpers for kernels: f16/bf16 conversion, f32 staging of half-precision
// operands, and broadcast iteration.
#pragma once

#include <npucache/error.h>

#include "runtime/launch.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace npucache::runtime::kernels {

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu)) return 0x7fc0;  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);                                         // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

// Reads a floating operand as f32: zero-copy for f32, converted otherwise.
class FloatIn {
 public:
  explicit FloatIn(const TensorArg& a);
  const float* data() const { return ptr_; }
  int64_t size() const { return n_; }

 private:
  const float* ptr_;
  int64_t n_;
  std::vector<float> tmp_;
};

// Writes a floating result as f32; commit() converts into a half output.
class FloatOut {
 public:
  explicit FloatOut(const TensorArg& a);
  float* data() { return ptr_; }
  void commit();

 private:
  const TensorArg& arg_;
  float* ptr_;
  std::vector<float> tmp_;
};

// Element (converted to double) of any dtype at linear index i.
double load_as_double(const TensorArg& a, int64_t i);
void store_from_double(const TensorArg& a, int64_t i, double v);

[[noreturn]] void kernel_fail(const KernelLaunch& l, const std::string& what);

// Strides of `in` (right-aligned to `out`'s rank) with 0 on broadcast dims.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out);
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

// Calls f(out_index, {in_index...}) for every element of `out`, in order.
template <std::size_t N, class F>
void for_each_broadcast(const std::vector<int64_t>& out, const std::array<const std::vector<int64_t>*, N>& ins, F&& f) {
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  if (total == 0) return;
  bool same = true;
  for (const auto* in : ins) same = same && (*in == out);
  if (same) {
    std::array<int64_t, N> idx{};
    for (int64_t i = 0; i < total; ++i) {
      idx.fill(i);
      f(i, idx);
    }
    return;
  }
  std::array<std::vector<int64_t>, N> strides;
  for (std::size_t k = 0; k < N; ++k) strides[k] = broadcast_strides(*ins[k], out);
  const std::size_t r = out.size();
  std::vector<int64_t> counter(r, 0);
  std::array<int64_t, N> idx{};
  const int64_t inner = r ? out[r - 1] : 1;
  std::array<int64_t, N> inner_stride{};
  for (std::size_t k = 0; k < N; ++k) inner_stride[k] = r ? strides[k][r - 1] : 0;
  for (int64_t o = 0; o < total; o += inner) {
    std::array<int64_t, N> base = idx;
    for (int64_t j = 0; j < inner; ++j) {
      f(o + j, base);
      for (std::size_t k = 0; k < N; ++k) base[k] += inner_stride[k];
    }
    // advance the outer counter (dims 0..r-2)
    for (std::size_t d = r >= 1 ? r - 1 : 0; d-- > 0;) {
      ++counter[d];
      for (std::size_t k = 0; k < N; ++k) idx[k] += strides[k][d];
      if (counter[d] < out[d]) break;
      for (std::size_t k = 0; k < N; ++k) idx[k] -= strides[k][d] * out[d];
      counter[d] = 0;
    }
  }
}

// Kernel families (one file each).
void elementwise_kernel(const KernelLaunch& l);
void matmul_kernel(const KernelLaunch& l);
void reduce_kernel(const KernelLaunch& l);
void softmax_kernel(const KernelLaunch& l);
void layout_kernel(const KernelLaunch& l);
void special_kernel(const KernelLaunch& l);
void attention_kernel(const KernelLaunch& l);
void comm_kernel(const KernelLaunch& l);
void rng_kernel(const KernelLaunch& l);
void fused_kernel(const KernelLaunch& l);

}  // namespace npucache::runtime::kernels
