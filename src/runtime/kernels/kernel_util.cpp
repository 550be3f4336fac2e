#include "runtime/kernels/kernel_util.h"

#include <cmath>

namespace npucache::runtime {

int64_t TensorArg::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

double TensorArg::load(int64_t i) const { return kernels::load_as_double(*this, i); }
void TensorArg::store(int64_t i, double v) const { kernels::store_from_double(*this, i, v); }

namespace kernels {

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00 : 0x7c00);
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // overflow to inf
  if (abs < 0x38800000u) {                       // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return sign;          // rounds to zero
    uint32_t e = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t drop = 126 - e;  // value / 2^-24 == mant >> drop
    uint32_t units = mant >> drop;
    uint32_t remainder = mant & ((1u << drop) - 1);
    uint32_t mid = 1u << (drop - 1);
    if (remainder > mid || (remainder == mid && (units & 1u))) ++units;
    return sign | static_cast<uint16_t>(units);
  }
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t mant = abs & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t remainder = mant & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

FloatIn::FloatIn(const TensorArg& a) : n_(a.numel()) {
  switch (a.dtype) {
    case DType::f32: ptr_ = static_cast<const float*>(a.data()); return;
    case DType::f16: {
      tmp_.resize(static_cast<std::size_t>(n_));
      auto* p = static_cast<const uint16_t*>(a.data());
      for (int64_t i = 0; i < n_; ++i) tmp_[static_cast<std::size_t>(i)] = half_to_float(p[i]);
      break;
    }
    case DType::bf16: {
      tmp_.resize(static_cast<std::size_t>(n_));
      auto* p = static_cast<const uint16_t*>(a.data());
      for (int64_t i = 0; i < n_; ++i) tmp_[static_cast<std::size_t>(i)] = bf16_to_float(p[i]);
      break;
    }
    default: {
      tmp_.resize(static_cast<std::size_t>(n_));
      for (int64_t i = 0; i < n_; ++i) tmp_[static_cast<std::size_t>(i)] = static_cast<float>(load_as_double(a, i));
    }
  }
  ptr_ = tmp_.data();
}

FloatOut::FloatOut(const TensorArg& a) : arg_(a) {
  if (a.dtype == DType::f32) {
    ptr_ = static_cast<float*>(a.data());
  } else {
    tmp_.resize(static_cast<std::size_t>(a.numel()));
    ptr_ = tmp_.data();
  }
}

void FloatOut::commit() {
  if (arg_.dtype == DType::f32) return;
  int64_t n = arg_.numel();
  for (int64_t i = 0; i < n; ++i) store_from_double(arg_, i, tmp_[static_cast<std::size_t>(i)]);
}

double load_as_double(const TensorArg& a, int64_t i) {
  switch (a.dtype) {
    case DType::f32: return static_cast<const float*>(a.data())[i];
    case DType::f16: return half_to_float(static_cast<const uint16_t*>(a.data())[i]);
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(a.data())[i]);
    case DType::i32: return static_cast<const int32_t*>(a.data())[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(a.data())[i]);
    case DType::boolean: return static_cast<const uint8_t*>(a.data())[i] ? 1.0 : 0.0;
  }
  return 0;
}

void store_from_double(const TensorArg& a, int64_t i, double v) {
  switch (a.dtype) {
    case DType::f32: static_cast<float*>(a.data())[i] = static_cast<float>(v); break;
    case DType::f16: static_cast<uint16_t*>(a.data())[i] = float_to_half(static_cast<float>(v)); break;
    case DType::bf16: static_cast<uint16_t*>(a.data())[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::i32: static_cast<int32_t*>(a.data())[i] = static_cast<int32_t>(v); break;
    case DType::i64: static_cast<int64_t*>(a.data())[i] = static_cast<int64_t>(v); break;
    case DType::boolean: static_cast<uint8_t*>(a.data())[i] = v != 0.0; break;
  }
}

void kernel_fail(const KernelLaunch& l, const std::string& what) {
  throw DeviceError("kernel " + std::string(op_name(l.op)) + ": " + what);
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  std::vector<int64_t> cs = contiguous_strides(in);
  std::size_t off = out.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : cs[i];
  return s;
}

}  // namespace kernels

void run_kernel(const KernelLaunch& l) {
  using namespace kernels;
  switch (l.op) {
    case Op::matmul: return matmul_kernel(l);
    case Op::sum:
    case Op::mean:
    case Op::max:
    case Op::argmax: return reduce_kernel(l);
    case Op::softmax: return softmax_kernel(l);
    case Op::reshape:
    case Op::permute:
    case Op::expand:
    case Op::slice:
    case Op::concat:
    case Op::gather:
    case Op::embedding:
    case Op::cast: return layout_kernel(l);
    case Op::rope:
    case Op::full:
    case Op::arange:
    case Op::buffer_update: return special_kernel(l);
    case Op::all_reduce:
    case Op::all_gather:
    case Op::group_rank:
    case Op::send:
    case Op::recv: return comm_kernel(l);
    case Op::randn:
    case Op::bernoulli: return rng_kernel(l);
    case Op::fused: return fused_kernel(l);
    case Op::fused_attention: return attention_kernel(l);
    default:
      if (op_info(l.op).composite || l.op == Op::placeholder || l.op == Op::region_call || l.op == Op::kCount)
        kernel_fail(l, "has no kernel (composite ops must be decomposed, region calls linked)");
      return elementwise_kernel(l);
  }
}

}  // namespace npucache::runtime
