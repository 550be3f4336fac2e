// Compile cost and memory planning for the default tiny-llama stage
// (tp=1, pp=1, prompt of 16 tokens), max-autotune: per-pass compile time
// and total (the cost a compile cache removes), and the planned arena peak
// against the sum of all intermediate buffers.
#include <npucache/compile.h>
#include <npucache/models/models.h>

#include "compiler/compiled_graph.h"
#include "compiler/engine.h"

#include <chrono>
#include <cstdio>

using namespace npucache;

int main() {
  models::TinyLlama m({}, {});
  auto kv = m.make_kv_cache(1);
  std::vector<int64_t> toks, pos;
  for (int64_t i = 0; i < 16; ++i) {
    toks.push_back((i * 7) % 256);
    pos.push_back(i);
  }
  Tensor t = Tensor::from_vector_i64(toks, {1, 16}), p = Tensor::from_vector_i64(pos, {1, 16});
  CompileOptions o;
  o.method_name = "prompt";
  auto prompt = compile(m, &models::TinyLlama::prompt, o);
  auto t0 = std::chrono::steady_clock::now();
  prompt(t, p, kv);
  double first_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& cg = detail::entry(prompt.engine(), 0);
  std::printf("tiny-llama prompt (S=16), max-autotune compile breakdown\n%s",
              compiler::format_timings(cg.timings).c_str());
  double autotune = 0;
  for (const auto& pt : cg.timings)
    if (pt.name == "autotune") autotune = pt.seconds;
  std::printf("  compile total  %9.3f ms (autotune %.0f%%); first call incl. trace and run %.3f ms\n",
              cg.compile_seconds * 1e3, 100.0 * autotune / cg.compile_seconds, first_call * 1e3);
  std::printf("memory planning: arena peak %zu bytes vs %zu bytes of intermediates: ratio %.3f (goal <= 0.5)\n",
              cg.planned_arena_bytes, cg.unplanned_bytes,
              static_cast<double>(cg.planned_arena_bytes) / static_cast<double>(cg.unplanned_bytes));
  return 0;
}
