// The fused_attention kernel: attention over the first kv_len keys of a
// KV cache, computed in f32 (softmax with the running maximum subtracted).
#include "runtime/kernels/kernel_util.h"

#include <cmath>
#include <limits>

namespace npucache::runtime::kernels {

// q [B, Hq, Sq, D], k/v [B, Hkv, S, D], optional positions [B, Sq] (i64);
// out [B, Hq, Sq, D]. Query i of batch b attends to keys j < kv_len, and
// with `causal` to j <= positions[b, i] (or, without positions, j <=
// kv_len - Sq + i: the last query is the last key). The attribute kv_len
// is a one-element list of dims, or (patched at replay: compiler/executor.h)
// a plain integer.
void attention_kernel(const KernelLaunch& l) {
  const bool has_pos = l.args.size() == 5;
  const TensorArg& q = l.args[0];
  const TensorArg& k = l.args[1];
  const TensorArg& v = l.args[2];
  const TensorArg& out_arg = l.args.back();
  const int64_t B = q.dims[0], Hq = q.dims[1], Sq = q.dims[2], D = q.dims[3];
  const int64_t Hkv = k.dims[1], S = k.dims[2];
  const AttrValue* patched = l.attrs->find("kv_len");
  const int64_t kv_len = patched != nullptr && std::holds_alternative<int64_t>(*patched)
                             ? std::get<int64_t>(*patched)
                             : l.attrs->get<std::vector<SymExpr>>("kv_len").at(0).constant();
  if (kv_len < 1 || kv_len > S)
    kernel_fail(l, "kv_len " + std::to_string(kv_len) + " outside [1, " + std::to_string(S) + "]");
  const bool causal = l.attrs->get_bool_or("causal", false);
  double scale = l.attrs->get_double_or("scale", 0.0);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  const int64_t rep = Hq / Hkv;
  FloatIn qi(q), ki(k), vi(v);
  FloatOut out(out_arg);
  std::vector<float> w(static_cast<std::size_t>(kv_len));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Sq; ++i) {
        int64_t last = kv_len - 1;
        if (causal) {
          const int64_t limit = has_pos ? static_cast<int64_t>(load_as_double(l.args[3], b * Sq + i)) : kv_len - Sq + i;
          last = std::min(last, limit);
        }
        const float* qv = qi.data() + ((b * Hq + h) * Sq + i) * D;
        float* o = out.data() + ((b * Hq + h) * Sq + i) * D;
        std::fill(o, o + D, 0.0f);
        if (last < 0) continue;  // nothing to attend to: zeros
        const int64_t kh = h / rep;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j <= last; ++j) {
          const float* kv = ki.data() + ((b * Hkv + kh) * S + j) * D;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(qv[d]) * kv[d];
          w[static_cast<std::size_t>(j)] = static_cast<float>(dot * scale);
          mx = std::max(mx, w[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          w[static_cast<std::size_t>(j)] = std::exp(w[static_cast<std::size_t>(j)] - mx);
          sum += w[static_cast<std::size_t>(j)];
        }
        for (int64_t j = 0; j <= last; ++j) {
          const float p = static_cast<float>(w[static_cast<std::size_t>(j)] / sum);
          const float* vv = vi.data() + ((b * Hkv + kh) * S + j) * D;
          for (int64_t d = 0; d < D; ++d) o[d] += p * vv[d];
        }
      }
  out.commit();
}

}  // namespace npucache::runtime::kernels
