// compile(): compiled results equal eager results, in both modes, dynamic
// and static. Tolerance: 1e-4 absolute on values of magnitude <= ~10 (f32
// with fused and re-associated arithmetic).
#include <npucache/compile.h>
#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include "compiler/compiled_graph.h"
#include "compiler/engine.h"
#include "compiler/serialize.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/small_models.h"

using namespace npucache;

namespace {

constexpr float kTol = 1e-4f;

void expect_tensors_close(const Tensor& a, const Tensor& b, float tol = kTol) {
  ASSERT_EQ(a.dims(), b.dims());
  auto x = a.to_vector(), y = b.to_vector();
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol) << "at " << i;
}

CompilerConfig mode_config(CompileMode m) {
  CompilerConfig c;
  c.mode = m;
  c.autotune_candidates = 3;
  c.autotune_repetitions = 2;
  c.autotune_min_time_us = 0;
  return c;
}

std::vector<int64_t> iota(int64_t from, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

struct Case {
  CompileMode mode;
  bool dynamic;
};

class CompileModes : public ::testing::TestWithParam<Case> {};

// erf, the elementwise unary op added last: in a chain the fusion takes,
// beside a parameter and another unary op.
struct ErfBlock : nn::Module {
  Tensor w;
  ErfBlock() { w = register_parameter("w", Tensor::from_vector(testing_support::ramp(16, 0.2f, -1.1f), {16})); }
  std::string type_name() const override { return "ErfBlock"; }
  Tensor forward(const Tensor& x) const { return ops::erf(x * w - 0.25f) * x + ops::tanh(x); }
};

// Whether a step of `p` runs `op` itself, or fused code holds it.
bool runs_as_step(const compiler::DeviceProgram& p, Op op) {
  for (const auto& s : p.steps)
    if (s.op == op) return true;
  return false;
}
bool runs_fused(const compiler::DeviceProgram& p, Op op) {
  for (const auto& s : p.steps) {
    if (s.op != Op::fused) continue;
    const auto& code = s.attrs.get<std::vector<int64_t>>("code");
    for (std::size_t i = 0; i < code.size(); i += 4)
      if (code[i] == int64_t{op_number(op)}) return true;
  }
  return false;
}

}  // namespace

TEST(ErfOp, EagerIsTheFunction) {
  const std::vector<float> xs = testing_support::ramp(40, 0.17f, -3.2f, 40);
  const auto ys = ops::erf(Tensor::from_vector(xs, {40})).to_vector();
  for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(ys[i], std::erf(static_cast<double>(xs[i])), 1e-6) << xs[i];
  EXPECT_THROW(ops::erf(Tensor::from_vector_i64({1, 2}, {2})), ShapeError);
}

// Traced, compiled with and without fusion in both modes, equal to eager,
// and through serialization byte for byte with erf where it was.
TEST(ErfOp, CompilesFusedAndUnfusedAndRoundTrips) {
  ErfBlock m;
  const Tensor x = Tensor::from_vector(testing_support::ramp(4 * 16, 0.15f, -0.9f, 17), {4, 16});
  const Tensor want = m.forward(x);
  for (CompileMode mode : {CompileMode::max_autotune, CompileMode::reduce_overhead})
    for (bool fusion : {true, false}) {
      SCOPED_TRACE(std::string(mode == CompileMode::max_autotune ? "max-autotune" : "reduce-overhead") +
                   (fusion ? ", fused" : ", unfused"));
      CompileOptions o;
      o.config = mode_config(mode);
      o.config->fusion = fusion;
      o.dynamic = false;
      o.method_name = "forward";
      auto fast = compile(m, &ErfBlock::forward, o);
      expect_tensors_close(fast(x), want);
      expect_tensors_close(fast(x), want);
      const compiler::CompiledGraph& g = detail::entry(fast.engine(), 0);
      int traced = 0;
      for (const auto& n : g.trace.graph.nodes()) traced += n.op == Op::erf;
      EXPECT_EQ(traced, 1);
      EXPECT_EQ(runs_fused(g.program, Op::erf), fusion);
      EXPECT_EQ(runs_as_step(g.program, Op::erf), !fusion);
      const std::string bytes = compiler::serialize_compiled(g, true);
      bool with_program = false;
      const compiler::CompiledGraph back = compiler::deserialize_compiled(bytes, &with_program);
      EXPECT_TRUE(with_program);
      EXPECT_EQ(compiler::serialize_compiled(back, true), bytes);
      EXPECT_EQ(runs_fused(back.program, Op::erf), fusion);
      EXPECT_EQ(runs_as_step(back.program, Op::erf), !fusion);
    }
}

TEST_P(CompileModes, SeedExampleAndMlpMatchEager) {
  const Case c = GetParam();
  models::SeedExample seed;
  CompileOptions o;
  o.config = mode_config(c.mode);
  o.dynamic = c.dynamic;
  o.method_name = "prompt";
  auto fast = compile(seed, &models::SeedExample::prompt, o);
  for (int64_t b : {2, 3, 2}) {
    std::vector<float> xs, ks;
    for (int64_t i = 0; i < 2 * b; ++i) {
      xs.push_back(static_cast<float>(i) * 0.5f);
      ks.push_back(1.0f - static_cast<float>(i));
    }
    models::InputMeta x{Tensor::from_vector(xs, {b, 2}), true};
    std::vector<Tensor> kv{Tensor::from_vector(ks, {b, 2})};
    expect_tensors_close(fast(x, kv), seed.prompt(x, kv));
  }
  EXPECT_EQ(fast.compiles(), c.dynamic ? 1u : 2u);  // static: a new batch size recompiles

  models::SimpleMLP mlp;
  o.method_name = "forward";
  auto fmlp = compile(mlp, &models::SimpleMLP::forward, o);
  std::vector<float> in(4 * 128);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  Tensor x = Tensor::from_vector(in, {4, 128});
  expect_tensors_close(fmlp(x), mlp.forward(x));
  expect_tensors_close(fmlp(x), mlp.forward(x));
}

TEST_P(CompileModes, TinyLlamaPromptAndDecodeMatchEager) {
  const Case c = GetParam();
  models::TinyLlama m({}, {});
  CompileOptions o;
  o.config = mode_config(c.mode);
  o.dynamic = c.dynamic;
  o.method_name = "prompt";
  auto prompt = compile(m, &models::TinyLlama::prompt, o);
  o.method_name = "decode";
  auto decode = compile(m, &models::TinyLlama::decode, o);
  for (int64_t S : {7, 5}) {
    std::vector<int64_t> toks;
    for (int64_t i = 0; i < S; ++i) toks.push_back((i * 31 + S) % 256);
    auto kv_eager = m.make_kv_cache(1);
    auto kv_fast = m.make_kv_cache(1);
    Tensor t = Tensor::from_vector_i64(toks, {1, S}), p = Tensor::from_vector_i64(iota(0, S), {1, S});
    expect_tensors_close(prompt(t, p, kv_fast), m.prompt(t, p, kv_eager));
    for (int64_t step = 0; step < 4; ++step) {
      Tensor tok = Tensor::from_vector_i64({(step * 13 + 5) % 256}, {1, 1});
      Tensor pos = Tensor::from_vector_i64({S + step}, {1, 1});
      expect_tensors_close(decode(tok, pos, kv_fast), m.decode(tok, pos, kv_eager));
    }
    for (std::size_t i = 0; i < kv_fast.size(); ++i) expect_tensors_close(kv_fast[i], kv_eager[i]);
  }
  EXPECT_EQ(prompt.compiles(), c.dynamic ? 1u : 2u);
  EXPECT_EQ(decode.compiles(), 1u);  // decode's shapes never change
}

INSTANTIATE_TEST_SUITE_P(
    All, CompileModes,
    ::testing::Values(Case{CompileMode::max_autotune, true}, Case{CompileMode::max_autotune, false},
                      Case{CompileMode::reduce_overhead, true}, Case{CompileMode::reduce_overhead, false}),
    [](const auto& param_info) {
      return std::string(param_info.param.mode == CompileMode::max_autotune ? "MaxAutotune" : "ReduceOverhead") +
             (param_info.param.dynamic ? "Dynamic" : "Static");
    });

// A model keeps its compiled callables as members, assigned once its layers
// exist (TorchAir's pattern): an empty CompiledMethod says what to do when
// called, and works once assigned.
TEST(CompiledMethodMember, EmptyUntilAssignedThenRuns) {
  struct Holder : nn::Module {
    std::shared_ptr<nn::Linear> linear = register_module("linear", std::make_shared<nn::Linear>(2, 3));
    CompiledMethod<Holder, Tensor, const Tensor&> cached;
    Tensor forward(const Tensor& x) { return ops::relu(linear->forward(x)); }
  } m;
  m.linear->weight.copy_from({1, -1, 0.5f, 2, -2, 1});
  m.linear->bias.copy_from({0.25f, 0, -1});
  const Tensor x = Tensor::from_vector({1, 2, -3, 0.5f}, {2, 2});

  EXPECT_FALSE(m.cached);
  EXPECT_EQ(m.cached.compiles(), 0u);
  try {
    m.cached(x);
    ADD_FAILURE() << "an empty CompiledMethod ran";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cache_compile()"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.cached.status(), ConfigError);

  CompileOptions o;
  o.config = mode_config(CompileMode::max_autotune);
  o.method_name = "forward";  // a local class: no symbol to name it from
  m.cached = compile(m, &Holder::forward, o);
  EXPECT_TRUE(m.cached);
  expect_tensors_close(m.cached(x), m.forward(x));
  EXPECT_EQ(m.cached.compiles(), 1u);
  EXPECT_EQ(m.cached.status().outcome, Outcome::compiled);
}
