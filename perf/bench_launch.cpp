// Launch overhead on the simulated NPU: host time per eager kernel launch of
// a tiny kernel (raw runtime::Stream::launch, and an eager Tensor op with its shape
// inference and allocation), against the per-kernel host cost of replaying a
// captured task graph of the same kernels. Prints the ratios.
#include <npucache/device.h>
#include <npucache/ops.h>

#include "harness.h"
#include "runtime/stream.h"

#include <cstdio>

using namespace npucache;

int main() {
  constexpr int kKernels = 128;  // kernels per step (a decode step has 100+)
  constexpr int kTrials = 60;
  Device& d = Platform::get().device(0);
  runtime::Stream& s = d.default_stream();
  runtime::TensorArg a{d.allocate(64), 0, DType::f32, {16}}, b{d.allocate(64), 0, DType::f32, {16}};
  auto launch = [&] {
    runtime::KernelLaunch l;
    l.op = Op::add;
    l.args = {a, b, b};
    s.launch(std::move(l));
  };
  Tensor x = Tensor::from_vector(std::vector<float>(16, 1.0f), {16});
  s.begin_capture();
  for (int i = 0; i < kKernels; ++i) launch();
  auto graph = s.end_capture();

  auto t = perf::interleaved({[&] {
                                double t0 = perf::now_s();
                                for (int i = 0; i < kKernels; ++i) launch();
                                double dt = perf::now_s() - t0;
                                s.synchronize();
                                return dt;
                              },
                              [&] {
                                double t0 = perf::now_s();
                                Tensor y = x;
                                for (int i = 0; i < kKernels; ++i) y = y + x;
                                double dt = perf::now_s() - t0;
                                s.synchronize();
                                return dt;
                              },
                              [&] {
                                double t0 = perf::now_s();
                                graph->replay(s);
                                double dt = perf::now_s() - t0;
                                s.synchronize();
                                return dt;
                              }},
                             kTrials);
  const double raw = t[0] / kKernels * 1e6, op = t[1] / kKernels * 1e6, replay = t[2] / kKernels * 1e6;
  std::printf("launch overhead, %d tiny kernels per step, median of %d interleaved trials\n", kKernels, kTrials);
  std::printf("  eager runtime::Stream::launch      %8.3f us/kernel\n", raw);
  std::printf("  eager Tensor op           %8.3f us/kernel\n", op);
  std::printf("  task-graph replay         %8.3f us/kernel\n", replay);
  std::printf("  ratio launch/replay       %8.1fx\n", raw / replay);
  std::printf("  ratio tensor-op/replay    %8.1fx\n", op / replay);
  return 0;
}
