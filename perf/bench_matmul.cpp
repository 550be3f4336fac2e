// Matmul throughput on the simulated NPU: the best of a set of tilings
// against the naive dot-product loop, in GFLOP/s, measured interleaved.
#include <npucache/device.h>

#include "harness.h"
#include "runtime/launch.h"

#include <cstdio>
#include <cstring>
#include <tuple>

using namespace npucache;

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 256;
  Device& d = Platform::get().device(0);
  auto buf = [&](int64_t elems) {
    runtime::TensorArg a{d.allocate(static_cast<std::size_t>(elems) * 4), 0, DType::f32, {n, n}};
    auto* p = static_cast<float*>(a.data());
    for (int64_t i = 0; i < elems; ++i) p[i] = static_cast<float>((i * 7) % 13) * 0.1f;
    return a;
  };
  runtime::TensorArg A = buf(n * n), B = buf(n * n), C = buf(n * n);
  auto run = [&](int64_t tm, int64_t tn, int64_t tk) {
    runtime::KernelLaunch l;
    l.op = Op::matmul;
    l.attrs = std::make_shared<const Attrs>(Attrs{{"tile_m", tm}, {"tile_n", tn}, {"tile_k", tk}});
    l.args = {A, B, C};
    return [l] {
      double t0 = perf::now_s();
      runtime::run_kernel(l);
      return perf::now_s() - t0;
    };
  };
  std::vector<std::tuple<int64_t, int64_t, int64_t>> tiles{
      {8, 64, 64}, {16, 128, 64}, {32, 256, 128}, {64, 256, 256}, {32, 512, 32}};
  std::vector<std::function<double()>> variants{run(0, 0, 0)};
  for (auto [m, nn, k] : tiles) variants.push_back(run(m, nn, k));
  auto t = perf::interleaved(variants, 7);
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::printf("matmul %lldx%lldx%lld f32, median of 7 interleaved trials\n", static_cast<long long>(n),
              static_cast<long long>(n), static_cast<long long>(n));
  std::printf("  naive loop                 %8.2f GFLOP/s\n", flops / t[0] / 1e9);
  std::size_t best = 1;
  for (std::size_t i = 1; i < t.size(); ++i) {
    auto [m, nn, k] = tiles[i - 1];
    std::printf("  tiled %3lld x %3lld x %3lld      %8.2f GFLOP/s\n", static_cast<long long>(m),
                static_cast<long long>(nn), static_cast<long long>(k), flops / t[i] / 1e9);
    if (t[i] < t[best]) best = i;
  }
  std::printf("  ratio best tiling / naive  %8.1fx\n", t[0] / t[best]);
  return 0;
}
