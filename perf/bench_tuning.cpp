// The shared tuning table: one job's compiles (tiny-llama's prompt and
// decode, then another model of the same shapes, a 6-layer tiny-llama with
// other weights) with the table off (every compile times its kernels) and
// on (a signature is timed once per process), side by side in one run:
// compile time, autotune time, kernels timed and reused, and the ratio.
#include <npucache/compile.h>
#include <npucache/models/models.h>

#include "compiler/compiled_graph.h"
#include "compiler/engine.h"
#include "compiler/tuning_table.h"

#include <cstdio>

using namespace npucache;

namespace {

struct Sum {
  double compile_s = 0, autotune_s = 0;
  int tuned = 0, reused = 0;
  void add(const compiler::CompiledGraph& g) {
    compile_s += g.compile_seconds;
    for (const auto& t : g.timings)
      if (t.name == "autotune") autotune_s += t.seconds;
    tuned += g.kernels_tuned;
    reused += g.kernels_reused;
  }
};

// Compiles prompt (S=16) and decode of `m` with `config`; adds them to `s`.
void compile_model(models::TinyLlama& m, const CompilerConfig& config, Sum& s) {
  auto kv = m.make_kv_cache(1);
  std::vector<int64_t> toks, pos;
  for (int64_t i = 0; i < 16; ++i) {
    toks.push_back((i * 7) % 256);
    pos.push_back(i);
  }
  CompileOptions o;
  o.config = config;
  o.method_name = "prompt";
  auto prompt = compile(m, &models::TinyLlama::prompt, o);
  prompt(Tensor::from_vector_i64(toks, {1, 16}), Tensor::from_vector_i64(pos, {1, 16}), kv);
  s.add(detail::entry(prompt.engine(), 0));
  o.method_name = "decode";
  auto decode = compile(m, &models::TinyLlama::decode, o);
  decode(Tensor::from_vector_i64({5}, {1, 1}), Tensor::from_vector_i64({16}, {1, 1}), kv);
  s.add(detail::entry(decode.engine(), 0));
}

Sum job(bool shared) {
  compiler::TuningTable::process().clear();
  CompilerConfig c;
  c.shared_tuning = shared;
  Sum s;
  models::TinyLlama a({}, {});
  compile_model(a, c, s);
  models::TinyLlamaConfig other;
  other.name = "tiny-llama-6";
  other.layers = 6;
  other.seed = 99;
  models::TinyLlama b(other, {});
  compile_model(b, c, s);
  return s;
}

}  // namespace

int main() {
  std::printf(
      "one job: tiny-llama (4 layers) and a 6-layer model of the same shapes, prompt (S=16) and decode "
      "each, max-autotune with the default config\n");
  const Sum off = job(false);
  const Sum on = job(true);
  auto row = [](const char* name, const Sum& s) {
    std::printf("  %-22s compile %9.1f ms  autotune %9.1f ms  %3d kernels tuned, %3d reused from the tuning table\n",
                name, s.compile_s * 1e3, s.autotune_s * 1e3, s.tuned, s.reused);
  };
  row("tuning table off", off);
  row("shared tuning table", on);
  std::printf("  compile time ratio (off / shared): %.2fx; autotune time ratio %.2fx\n", off.compile_s / on.compile_s,
              on.autotune_s > 0 ? off.autotune_s / on.autotune_s : 0.0);
  return 0;
}
