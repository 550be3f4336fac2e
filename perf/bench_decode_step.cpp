// Host time per tiny-llama decode step (100+ kernels): eager launches vs the
// max-autotune program vs reduce-overhead task-graph replay, interleaved in
// one run. "Host" is the time until the call returns (work issued); the
// device time to finish the step is reported alongside.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/models/models.h>

#include "compiler/compiled_graph.h"
#include "compiler/engine.h"
#include "harness.h"
#include "runtime/stream.h"

#include <cstdio>

using namespace npucache;

int main() {
  models::TinyLlama m({}, {});
  auto kv = m.make_kv_cache(1);
  Tensor tok = Tensor::from_vector_i64({42}, {1, 1});
  Tensor pos = Tensor::from_vector_i64({3}, {1, 1});
  CompileOptions o;
  o.method_name = "decode";
  auto program = compile(m, &models::TinyLlama::decode, o);
  o.config = CompilerConfig{};
  o.config->ge_config.enable_single_stream = true;
  auto single = compile(m, &models::TinyLlama::decode, o);
  o.config = CompilerConfig{};
  o.config->mode = CompileMode::reduce_overhead;
  auto replay = compile(m, &models::TinyLlama::decode, o);
  Device& dev = Platform::get().device(0);
  std::vector<std::vector<double>> device_time(4);
  auto variant = [&](int k, auto&& step) {
    return [&, k, step] {
      double t0 = perf::now_s();
      Tensor out = step();
      double host = perf::now_s() - t0;
      dev.synchronize();
      device_time[static_cast<std::size_t>(k)].push_back(perf::now_s() - t0);
      return host;
    };
  };
  constexpr int kTrials = 200;
  auto t = perf::interleaved(
      {variant(0, [&] { return m.decode(tok, pos, kv); }), variant(1, [&] { return program(tok, pos, kv); }),
       variant(2, [&] { return replay(tok, pos, kv); }), variant(3, [&] { return single(tok, pos, kv); })},
      kTrials);
  std::size_t kernels = 0;
  for (const auto& s : detail::entry(program.engine(), 0).program.steps) kernels += s.op != Op::placeholder;
  std::printf("tiny-llama decode step, median host time of %d interleaved trials\n", kTrials);
  std::printf("  eager                        %9.1f us/step   (step incl. device %8.1f us)\n", t[0] * 1e6,
              perf::median(device_time[0]) * 1e6);
  std::printf("  max-autotune program         %9.1f us/step   (step incl. device %8.1f us, %zu kernels)\n", t[1] * 1e6,
              perf::median(device_time[1]) * 1e6, kernels);
  std::printf("  max-autotune, single stream  %9.1f us/step   (step incl. device %8.1f us)\n", t[3] * 1e6,
              perf::median(device_time[3]) * 1e6);
  std::printf("  reduce-overhead replay       %9.1f us/step   (step incl. device %8.1f us)\n", t[2] * 1e6,
              perf::median(device_time[2]) * 1e6);
  std::printf("  ratio eager/replay host      %9.1fx  (goal >= 10x)\n", t[0] / t[2]);
  std::printf("  ratio eager/program host     %9.1fx\n", t[0] / t[1]);
  return 0;
}
