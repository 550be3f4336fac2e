// Fusion: an elementwise chain of 8 ops on 16M f32 elements, compiled with
// fusion on vs off (both max-autotune programs), timed interleaved.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/ops.h>

#include "harness.h"

#include <cmath>
#include <cstdio>

using namespace npucache;

namespace {
struct Chain : nn::Module {
  // 8 elementwise ops.
  Tensor f(const Tensor& x, const Tensor& y) {
    Tensor a = x * y;
    Tensor b = a + x;
    Tensor c = ops::relu(b);
    Tensor d = c - y;
    Tensor e = ops::maximum(d, x);
    Tensor g = e * 0.5;
    Tensor h = ops::neg(g);
    return h + y;
  }
};
}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{16} << 20);
  Chain chain;
  std::vector<float> xs(static_cast<std::size_t>(n)), ys(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    xs[static_cast<std::size_t>(i)] = static_cast<float>(i % 17) * 0.25f - 2.0f;
    ys[static_cast<std::size_t>(i)] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  }
  Tensor x = Tensor::from_vector(xs, {n}), y = Tensor::from_vector(ys, {n});
  CompileOptions on, off;
  on.config = CompilerConfig{};
  on.config->autotune_candidates = 4;
  off.config = on.config;
  off.config->fusion = false;
  auto fused = compile(chain, &Chain::f, on);
  auto unfused = compile(chain, &Chain::f, off);
  Device& dev = Platform::get().device(0);
  auto timed = [&](auto& fn) {
    return [&] {
      double t0 = perf::now_s();
      Tensor r = fn(x, y);
      dev.synchronize();
      return perf::now_s() - t0;
    };
  };
  auto a = fused(x, y).to_vector(), b = unfused(x, y).to_vector();
  double maxdiff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) maxdiff = std::max(maxdiff, static_cast<double>(std::fabs(a[i] - b[i])));
  auto t = perf::interleaved({timed(fused), timed(unfused)}, 7);
  std::printf("8-op elementwise chain on %lld f32 elements, median of 7 interleaved runs\n", static_cast<long long>(n));
  std::printf("  fused (1 kernel)        %8.2f ms\n", t[0] * 1e3);
  std::printf("  unfused (8 kernels)     %8.2f ms\n", t[1] * 1e3);
  std::printf("  ratio unfused/fused     %8.2fx  (goal >= 3x; max |difference| %.2g)\n", t[1] / t[0], maxdiff);
  return 0;
}
