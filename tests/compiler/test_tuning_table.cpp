// The process-wide tuning table: a kernel signature is timed once per
// process, whichever graph or model it appears in, and a decision from the
// table gives the program a fresh tuning with the same choices gives.
#include <npucache/compile.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include "compiler/compiled_graph.h"
#include "compiler/engine.h"
#include "compiler/serialize.h"
#include "compiler/tuning_table.h"

#include <gtest/gtest.h>

#include <thread>

using namespace npucache;
using compiler::TuningTable;

namespace {

// Two models of different graphs whose matmuls have equal shapes.
struct Twin : nn::Module {
  Twin() {
    a = register_module("a", std::make_shared<nn::Linear>(64, 64));
    b = register_module("b", std::make_shared<nn::Linear>(64, 64));
  }
  Tensor forward(const Tensor& x) { return b->forward(ops::relu(a->forward(x))); }
  std::shared_ptr<nn::Linear> a, b;
};

struct Other : nn::Module {
  Other() { p = register_module("p", std::make_shared<nn::Linear>(64, 64)); }
  Tensor forward(const Tensor& x) { return ops::tanh(p->forward(x)); }
  std::shared_ptr<nn::Linear> p;
};

CompileOptions options(int candidates, bool shared = true) {
  CompileOptions o;
  o.dynamic = false;
  CompilerConfig c;
  c.autotune_candidates = candidates;
  c.autotune_repetitions = 1;
  c.autotune_min_time_us = 0;
  c.shared_tuning = shared;
  o.config = c;
  return o;
}

Tensor input() { return Tensor::from_vector(std::vector<float>(8 * 64, 0.25f), {8, 64}); }

template <class M>
compiler::CompiledGraph compiled(M& m, const CompileOptions& o) {
  auto fn = compile(m, &M::forward, o);
  fn(input());
  return detail::entry(fn.engine(), 0);
}

std::vector<const compiler::AutotuneDecision*> matmuls(const compiler::CompiledGraph& g) {
  std::vector<const compiler::AutotuneDecision*> out;
  for (const auto& d : g.autotune)
    if (d.key.rfind("matmul ", 0) == 0) out.push_back(&d);
  return out;
}

}  // namespace

TEST(TuningTable, ASignatureIsTunedOncePerProcessAcrossGraphs) {
  TuningTable::process().clear();
  Twin twin;
  const auto first = compiled(twin, options(3));
  const auto mm1 = matmuls(first);
  ASSERT_EQ(mm1.size(), 1u);  // both layers: one signature, tuned once
  EXPECT_EQ(mm1[0]->steps.size(), 2u);
  EXPECT_FALSE(mm1[0]->from_table);
  EXPECT_EQ(first.kernels_reused, 0);
  EXPECT_EQ(first.kernels_tuned, static_cast<int>(first.autotune.size()));
  EXPECT_EQ(TuningTable::process().size(), first.autotune.size());

  // Another graph with the same matmul shape: its matmul comes from the table.
  Other other;
  const auto second = compiled(other, options(3));
  const auto mm2 = matmuls(second);
  ASSERT_EQ(mm2.size(), 1u);
  EXPECT_EQ(mm2[0]->key, mm1[0]->key);
  EXPECT_TRUE(mm2[0]->from_table);
  EXPECT_EQ(mm2[0]->chosen, mm1[0]->chosen);
  EXPECT_GE(second.kernels_reused, 1);
  EXPECT_EQ(second.kernels_tuned + second.kernels_reused, static_cast<int>(second.autotune.size()));
  for (const auto& d : second.autotune) EXPECT_EQ(d.from_table, d.key == mm1[0]->key) << d.key;

  // The same graph tuned afresh (the table off), then given the table's
  // choices: the very program the table gave.
  const auto fresh = compiled(other, options(3, false));
  EXPECT_EQ(fresh.kernels_reused, 0);
  EXPECT_EQ(fresh.kernels_tuned, static_cast<int>(fresh.autotune.size()));
  compiler::DeviceProgram p = fresh.program;
  compiler::apply_autotune(p, second.autotune);
  EXPECT_EQ(compiler::serialize_program(p), compiler::serialize_program(second.program));

  // A third compile of the first model: everything reused, nothing timed.
  const auto third = compiled(twin, options(3));
  EXPECT_EQ(third.kernels_tuned, 0);
  EXPECT_EQ(third.kernels_reused, static_cast<int>(third.autotune.size()));
  EXPECT_EQ(compiler::serialize_program(third.program), compiler::serialize_program(first.program));
}

TEST(TuningTable, ADecisionOfFewerCandidatesOrAnUnknownChoiceIsRetuned) {
  TuningTable::process().clear();
  Other other;
  const auto two = compiled(other, options(2));
  const std::string key = matmuls(two).at(0)->key;
  EXPECT_EQ(TuningTable::process().find(compiler::tuning_runtime(0), key)->candidates, 2);
  // More candidates asked for than the table's decision compared: timed again.
  const auto four = compiled(other, options(4));
  EXPECT_FALSE(matmuls(four).at(0)->from_table);
  EXPECT_EQ(TuningTable::process().find(compiler::tuning_runtime(0), key)->candidates, 4);
  // Fewer: reused.
  EXPECT_TRUE(matmuls(compiled(other, options(1))).at(0)->from_table);
  // A choice that is no candidate (a foreign table) is never applied.
  TuningTable::process().clear();
  TuningTable::process().add(compiler::tuning_runtime(0), key, {"tile_m=7 tile_n=7 tile_k=7", 1, 2, 8, ""});
  const auto again = compiled(other, options(2));
  EXPECT_FALSE(matmuls(again).at(0)->from_table);
  EXPECT_NE(matmuls(again).at(0)->chosen, "tile_m=7 tile_n=7 tile_k=7");
  // Another runtime's decisions are kept but not used.
  TuningTable::process().clear();
  TuningTable::process().add("othernpu runtime 9", key, {"tile_m=32 tile_n=256 tile_k=128", 1, 2, 8, ""});
  EXPECT_FALSE(matmuls(compiled(other, options(2))).at(0)->from_table);
  EXPECT_TRUE(TuningTable::process().find("othernpu runtime 9", key).has_value());
}

TEST(TuningTable, MergingKeepsTheDecisionOfMoreCandidates) {
  TuningTable t;
  EXPECT_TRUE(t.add("r", "k", {"a", 1, 2, 2, ""}));
  EXPECT_FALSE(t.add("r", "k", {"b", 1, 2, 2, ""}));  // the first stays
  EXPECT_EQ(t.find("r", "k")->chosen, "a");
  EXPECT_EQ(t.merge({{"r", "k", {"c", 1, 2, 5, ""}}, {"s", "k", {"d", 1, 2, 1, ""}}}), 2u);
  EXPECT_EQ(t.find("r", "k")->chosen, "c");
  EXPECT_EQ(t.records().size(), 2u);
  EXPECT_FALSE(t.find("t", "k").has_value());
}

// Threads adding, finding and listing at once (run under TSan in CI): every
// signature ends with one entry, the one that compared the most candidates.
TEST(TuningTable, ConcurrentUseKeepsOneEntryPerSignature) {
  TuningTable t;
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&t, w] {
      for (int i = 0; i < 200; ++i) {
        const std::string key = "k" + std::to_string(i % 50);
        t.add("r", key, {"c" + std::to_string(w), 1, 2, w + 1, ""});
        (void)t.find("r", key);
        if (i % 40 == 0) (void)t.records();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), 50u);
  for (const auto& r : t.records()) {
    EXPECT_EQ(r.entry.candidates, 4) << r.key;
    EXPECT_EQ(r.entry.chosen, "c3") << r.key;
  }
}
