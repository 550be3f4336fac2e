// Compile regions on vs off, side by side in one run (interleaved trials):
//   1. tracing a decoder's prompt method at 8 and 32 layers of one shape,
//      static and dynamic (body traces per layer: 1 vs 1 per layer);
//   2. the compile's CPU time (graph passes, link, lower, streams, memory
//      plan; autotuning off, which the tuning table shares anyway) at 8 and
//      32 layers;
//   3. the compiled program: steps and fused kernels (fusion across a layer
//      boundary is lost with regions);
//   4. host time of a decode step of the real-weight tiny model: the
//      max-autotune program and the reduce-overhead replay.
// Ratios are regions on / regions off (lower is better).
//
//   bench_regions [trials] [model]     (model: a shipped config, default llama-3-8b)
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/models/decoder.h>
#include <npucache/models/hf_config.h>
#include <npucache/trace.h>

#include "compiler/compiled_graph.h"
#include "compiler/serialize.h"
#include "harness.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

using namespace npucache;

namespace {

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Stage {
  std::unique_ptr<models::Decoder> model;
  Tensor tokens, positions;
  std::vector<Tensor> kv;
};

Stage stage(models::DecoderConfig c, int64_t layers) {
  c.layers = layers;
  c.max_seq = 64;
  Stage s;
  s.model = std::make_unique<models::Decoder>(c, models::StageRanks{}, models::Weights::meta);
  s.tokens = Tensor::meta({1, 16}, DType::i64);
  s.positions = Tensor::meta({1, 16}, DType::i64);
  s.kv = s.model->make_kv_cache(1);
  return s;
}

TraceResult trace(Stage& s, bool regions, bool dynamic) {
  TraceOptions o;
  o.regions = regions;
  o.dynamic = dynamic;
  o.method_name = "prompt";
  return trace_method(*s.model, &models::Decoder::prompt, o, s.tokens, s.positions, s.kv);
}

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 5;
  const models::DecoderConfig c = models::resolve_model(argc > 2 ? argv[2] : "llama-3-8b");
  std::printf("compile regions on vs off: %s layer shapes (hidden %lld, intermediate %lld), meta weights, %d trials\n",
              c.name.c_str(), static_cast<long long>(c.hidden), static_cast<long long>(c.intermediate), trials);
  Stage s8 = stage(c, 8), s32 = stage(c, 32);

  std::printf("\n%-34s %12s %12s %8s\n", "trace (ms)", "regions on", "off", "on/off");
  for (bool dynamic : {false, true})
    for (Stage* s : {&s8, &s32}) {
      const auto t = perf::interleaved({[&] {
                                          const double t0 = perf::now_s();
                                          (void)trace(*s, true, dynamic);
                                          return perf::now_s() - t0;
                                        },
                                        [&] {
                                          const double t0 = perf::now_s();
                                          (void)trace(*s, false, dynamic);
                                          return perf::now_s() - t0;
                                        }},
                                       trials);
      char what[64];
      std::snprintf(what, sizeof what, "%zu layers, %s", s->kv.size() / 2, dynamic ? "dynamic" : "static");
      std::printf("%-34s %12.2f %12.2f %8.2f\n", what, t[0] * 1e3, t[1] * 1e3, t[0] / t[1]);
    }

  CompilerConfig config;
  config.autotune = false;
  std::printf("\n%-34s %12s %12s %8s\n", "compile CPU (ms)", "regions on", "off", "on/off");
  for (Stage* s : {&s8, &s32}) {
    const TraceResult on = trace(*s, true, true), off = trace(*s, false, true);
    const SymBindings example = on.signature.bind(flatten_args(TraceOptions{}, s->tokens, s->positions, s->kv));
    std::size_t steps[2] = {0, 0};
    const auto t =
        perf::interleaved({[&] {
                             const double t0 = cpu_s();
                             steps[0] = compiler::compile_graph(on, config, {}, example, true, 0).program.steps.size();
                             return cpu_s() - t0;
                           },
                           [&] {
                             const double t0 = cpu_s();
                             steps[1] = compiler::compile_graph(off, config, {}, example, true, 0).program.steps.size();
                             return cpu_s() - t0;
                           }},
                          trials);
    char what[64];
    std::snprintf(what, sizeof what, "%zu layers", s->kv.size() / 2);
    std::printf("%-34s %12.2f %12.2f %8.2f\n", what, t[0] * 1e3, t[1] * 1e3, t[0] / t[1]);
    std::snprintf(what, sizeof what, "%zu layers: program steps", s->kv.size() / 2);
    std::printf("%-34s %12zu %12zu %8.2f\n", what, steps[0], steps[1],
                static_cast<double>(steps[0]) / static_cast<double>(steps[1]));
  }

  // Loading a stored object: its bytes, and decoding them (deserialize,
  // validate; with regions, each region's program once, then the link).
  std::printf("\n%-34s %12s %12s %8s\n", "load a stored object", "regions on", "off", "on/off");
  for (Stage* s : {&s8, &s32}) {
    const TraceResult on = trace(*s, true, true), off = trace(*s, false, true);
    const SymBindings example = on.signature.bind(flatten_args(TraceOptions{}, s->tokens, s->positions, s->kv));
    const std::string bytes[2] = {
        compiler::serialize_compiled(compiler::compile_graph(on, config, {}, example, true, 0), true),
        compiler::serialize_compiled(compiler::compile_graph(off, config, {}, example, true, 0), true)};
    const auto t = perf::interleaved({[&] {
                                        const double t0 = perf::now_s();
                                        (void)compiler::deserialize_compiled(bytes[0]);
                                        return perf::now_s() - t0;
                                      },
                                      [&] {
                                        const double t0 = perf::now_s();
                                        (void)compiler::deserialize_compiled(bytes[1]);
                                        return perf::now_s() - t0;
                                      }},
                                     trials);
    char what[64];
    std::snprintf(what, sizeof what, "%zu layers: decode (ms)", s->kv.size() / 2);
    std::printf("%-34s %12.2f %12.2f %8.2f\n", what, t[0] * 1e3, t[1] * 1e3, t[0] / t[1]);
    std::snprintf(what, sizeof what, "%zu layers: bytes", s->kv.size() / 2);
    std::printf("%-34s %12zu %12zu %8.2f\n", what, bytes[0].size(), bytes[1].size(),
                static_cast<double>(bytes[0].size()) / static_cast<double>(bytes[1].size()));
  }

  // Host time per decode step of the real-weight tiny model.
  models::DecoderConfig tiny;  // tiny-llama
  models::Decoder m(tiny, models::StageRanks{}, models::Weights::deterministic);
  Device& dev = Platform::get().device(0);
  std::printf("\n%-34s %12s %12s %8s\n", "decode step host time (us)", "regions on", "off", "on/off");
  for (const char* mode : {"max-autotune", "reduce-overhead"}) {
    auto kv_on = m.make_kv_cache(1), kv_off = m.make_kv_cache(1);
    const Tensor tok = Tensor::from_vector_i64({42}, {1, 1}), pos = Tensor::from_vector_i64({3}, {1, 1});
    auto make = [&](bool regions) {
      CompileOptions o;
      o.mode = mode;
      o.regions = regions;
      o.fullgraph = true;
      o.dynamic = false;
      o.method_name = "decode";
      return compile(m, &models::Decoder::decode, o);
    };
    auto on = make(true), off = make(false);
    auto step = [&](auto& f, std::vector<Tensor>& kv) {
      return [&] {
        const double t0 = perf::now_s();
        Tensor out = f(tok, pos, kv);
        const double host = perf::now_s() - t0;
        dev.synchronize();
        return host;
      };
    };
    const auto t = perf::interleaved({step(on, kv_on), step(off, kv_off)}, 40 * trials);
    std::printf("%-34s %12.1f %12.1f %8.2f\n", mode, t[0] * 1e6, t[1] * 1e6, t[0] / t[1]);
  }
  return 0;
}
