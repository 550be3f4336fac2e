// The fused kernel: runs a `fused` node's instruction list over tiles of
// `block` elements, so every intermediate stays in a cache-resident tile and
// memory is read and written once (src/compiler/fusion.h has the encoding).
// Unary instructions compute through runtime/unary_math.h, as the
// elementwise kernel does.
#include "runtime/kernels/kernel_util.h"
#include "runtime/unary_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace npucache::runtime::kernels {
namespace {

constexpr int64_t kNone = -1;

struct Instr {
  Op op;
  int64_t a, b, c;
  const UnaryMath* unary;  // the op's math when it is elementwise unary
};

// Fills dst[0..len) with input elements for iteration indices
// [start, start + len), following broadcast strides.
void gather(const float* src, const std::vector<int64_t>& strides, const std::vector<int64_t>& dims, int64_t start,
            int64_t len, float* dst) {
  const std::size_t r = dims.size();
  std::vector<int64_t> coord(r, 0);
  int64_t rem = start, off = 0;
  for (std::size_t d = r; d-- > 0;) {
    coord[d] = rem % dims[d];
    rem /= dims[d];
    off += coord[d] * strides[d];
  }
  const int64_t inner = r ? dims[r - 1] : 1;
  const int64_t s_in = r ? strides[r - 1] : 0;
  int64_t j = 0;
  while (j < len) {
    const int64_t run = std::min(len - j, inner - (r ? coord[r - 1] : 0));
    if (s_in == 1) {
      std::memcpy(dst + j, src + off, static_cast<std::size_t>(run) * sizeof(float));
    } else if (s_in == 0) {
      std::fill(dst + j, dst + j + run, src[off]);
    } else {
      for (int64_t k = 0; k < run; ++k) dst[j + k] = src[off + k * s_in];
    }
    j += run;
    off += run * s_in;
    if (r == 0) break;
    coord[r - 1] += run;
    for (std::size_t d = r - 1; coord[d] >= dims[d] && d > 0; --d) {  // carry
      off -= coord[d] * strides[d];
      coord[d] = 0;
      ++coord[d - 1];
      off += strides[d - 1];
    }
  }
}

void exec(const Instr& in, const float* x, const float* y, const float* z, float* o, int64_t n, double k) {
  if (in.unary) return in.unary->map(x, o, n);
  switch (in.op) {
    case Op::full: std::fill(o, o + n, static_cast<float>(k)); break;
    case Op::add:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
      break;
    case Op::sub:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] - y[i];
      break;
    case Op::mul:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] * y[i];
      break;
    case Op::div:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] / y[i];
      break;
    case Op::maximum:
      for (int64_t i = 0; i < n; ++i) o[i] = std::max(x[i], y[i]);
      break;
    case Op::minimum:
      for (int64_t i = 0; i < n; ++i) o[i] = std::min(x[i], y[i]);
      break;
    case Op::pow:
      for (int64_t i = 0; i < n; ++i) o[i] = std::pow(x[i], y[i]);
      break;
    case Op::eq:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] == y[i];
      break;
    case Op::ne:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] != y[i];
      break;
    case Op::lt:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] < y[i];
      break;
    case Op::le:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] <= y[i];
      break;
    case Op::gt:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] > y[i];
      break;
    case Op::ge:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] >= y[i];
      break;
    case Op::where:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] != 0.0f ? y[i] : z[i];
      break;
    default: throw DeviceError("fused kernel: op " + std::string(op_name(in.op)) + " cannot be fused");
  }
}

}  // namespace

void fused_kernel(const KernelLaunch& l) {
  const Attrs& at = *l.attrs;
  const auto& raw = at.get<std::vector<int64_t>>("code");
  if (raw.empty() || raw.size() % 4 != 0) kernel_fail(l, "malformed code");
  std::vector<Instr> code;
  for (std::size_t i = 0; i < raw.size(); i += 4)
    code.push_back({static_cast<Op>(raw[i]), raw[i + 1], raw[i + 2], raw[i + 3], unary_math(static_cast<Op>(raw[i]))});
  std::vector<double> consts(static_cast<std::size_t>(at.get_int_or("num_consts", 0)));
  for (std::size_t k = 0; k < consts.size(); ++k) consts[k] = at.get<double>("c" + std::to_string(k));
  const std::vector<int64_t> iter = concrete_dims(at.get<std::vector<SymExpr>>("iter_shape"));
  const int64_t block = std::max<int64_t>(16, at.get_int_or("block", 1024));
  const std::size_t k_in = l.args.size() - 1;
  const TensorArg& out = l.args.back();
  const int64_t reduce = at.get_int_or("reduce", -1);

  int64_t total = 1;
  for (int64_t d : iter) total *= d;
  std::vector<FloatIn> ins;
  ins.reserve(k_in);
  std::vector<std::vector<int64_t>> strides;
  std::vector<bool> direct;
  for (std::size_t i = 0; i < k_in; ++i) {
    ins.emplace_back(l.args[i]);
    strides.push_back(broadcast_strides(l.args[i].dims, iter));
    direct.push_back(l.args[i].dims == iter);
  }
  const std::size_t nregs = k_in + code.size();
  // Tiles never exceed the iteration space; the scratch is reused per thread
  // (no zero-fill: every tile is written before it is read).
  const int64_t tile = std::min(block, std::max<int64_t>(1, reduce < 0 ? total : (iter.empty() ? 1 : iter.back())));
  thread_local std::unique_ptr<float[]> scratch;
  thread_local std::size_t scratch_size = 0;
  const std::size_t need = nregs * static_cast<std::size_t>(tile);
  if (scratch_size < need) {
    scratch.reset(new float[need]);
    scratch_size = need;
  }
  float* tiles = scratch.get();
  std::vector<const float*> reg(nregs, nullptr);
  auto run_tile = [&](int64_t start, int64_t len) -> const float* {
    for (std::size_t i = 0; i < k_in; ++i) {
      if (direct[i]) {
        reg[i] = ins[i].data() + start;
      } else {
        float* t = tiles + i * static_cast<std::size_t>(tile);
        gather(ins[i].data(), strides[i], iter, start, len, t);
        reg[i] = t;
      }
    }
    for (std::size_t j = 0; j < code.size(); ++j) {
      const Instr& ins_j = code[j];
      float* o = tiles + (k_in + j) * static_cast<std::size_t>(tile);
      auto r = [&](int64_t x) { return x == kNone ? nullptr : reg[static_cast<std::size_t>(x)]; };
      exec(ins_j, r(ins_j.op == Op::full ? kNone : ins_j.a), r(ins_j.b), r(ins_j.c), o, len,
           ins_j.op == Op::full ? consts.at(static_cast<std::size_t>(ins_j.a)) : 0.0);
      reg[k_in + j] = o;
    }
    return reg[nregs - 1];
  };

  FloatOut o(out);
  if (reduce < 0) {
    for (int64_t start = 0; start < total; start += tile) {
      const int64_t len = std::min(tile, total - start);
      const float* r = run_tile(start, len);
      std::memcpy(o.data() + start, r, static_cast<std::size_t>(len) * sizeof(float));
    }
  } else {
    const int64_t L = iter.empty() ? 1 : iter.back();
    const int64_t rows = L ? total / L : 0;
    const Op rop = static_cast<Op>(reduce);
    for (int64_t row = 0; row < rows; ++row) {
      double acc = rop == Op::max ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t s = 0; s < L; s += tile) {
        const int64_t len = std::min(tile, L - s);
        const float* r = run_tile(row * L + s, len);
        for (int64_t i = 0; i < len; ++i) acc = rop == Op::max ? std::max(acc, static_cast<double>(r[i])) : acc + r[i];
      }
      if (rop == Op::mean) acc /= static_cast<double>(L);
      o.data()[row] = static_cast<float>(acc);
    }
  }
  o.commit();
}

}  // namespace npucache::runtime::kernels
