#include <npucache/compile.h>
#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/ops.h>

#include "compiler/compiled_graph.h"
#include "compiler/executor.h"

#include <gtest/gtest.h>

#include "compiler/engine.h"
#include "support/error_message.h"

using namespace npucache;

namespace {
using npucache::testing::message;
}  // namespace

TEST(CompilerConfig, ValueSemanticsHashAndDump) {
  CompilerConfig a, b;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  b.ge_config.enable_single_stream = true;
  EXPECT_FALSE(a == b);
  EXPECT_NE(a.hash(), b.hash());
  EXPECT_NE(b.dump().find("ge_config.enable_single_stream=true"), std::string::npos);
  b = a;
  b.autotune_candidates = 2;
  EXPECT_NE(a.hash(), b.hash());
  EXPECT_EQ(parse_compile_mode("reduce-overhead"), CompileMode::reduce_overhead);
}

TEST(CompilerConfig, InvalidValuesNameTheOption) {
  EXPECT_NE(message([] { parse_compile_mode("fast"); }).find("unknown compile mode 'fast'"), std::string::npos);
  CompilerConfig c;
  c.autotune_candidates = -1;
  EXPECT_NE(message([&] { c.validate(); }).find("autotune_candidates"), std::string::npos);
  c = {};
  c.autotune_repetitions = 0;
  EXPECT_NE(message([&] { NpuBackend b(c); }).find("autotune_repetitions"), std::string::npos);
}

TEST(CompilerConfig, ConfigAndBackendMustAgree) {
  CompilerConfig c;
  c.mode = CompileMode::reduce_overhead;
  NpuBackend backend = get_npu_backend();
  EXPECT_NE(message([&] { resolve_config(c, backend); }).find("config in current backend is different from the config"),
            std::string::npos);
  EXPECT_EQ(resolve_config(std::nullopt, get_npu_backend(c)).mode, CompileMode::reduce_overhead);
  EXPECT_EQ(resolve_config(c, get_npu_backend(c)).mode, CompileMode::reduce_overhead);
  models::SeedExample m;
  CompileOptions o;
  o.config = c;
  o.backend = backend;
  EXPECT_THROW(compile(m, &models::SeedExample::prompt, o), ConfigError);
}

namespace {
struct Noisy : nn::Module {
  Tensor f(const Tensor& x) { return ops::dropout(x, 0.5) + x; }
  Tensor branchy(const Tensor& x) { return ops::sum(x, {0}).item() > 0 ? x : -x; }
};
}  // namespace

TEST(Compile, RngCompilesInMaxAutotuneButCannotBeCaptured) {
  Noisy n;
  Tensor x = Tensor::from_vector(std::vector<float>(64, 1.0f), {64});
  auto fast = compile(n, &Noisy::f);
  auto y = fast(x).to_vector();
  int kept = 0;
  for (float v : y) kept += v == 3.0f;  // 1 * 2 + 1 where kept, 1 where dropped
  EXPECT_GT(kept, 8);
  EXPECT_LT(kept, 56);
  CompileOptions o;
  o.config = CompilerConfig{};
  o.config->mode = CompileMode::reduce_overhead;
  o.fullgraph = true;  // with fullgraph=false the dropout is a graph break, run eagerly (test_breaks.cpp)
  auto captured = compile(n, &Noisy::f, o);
  std::string m = message([&] { captured(x); });
  EXPECT_NE(m.find("(dropout) cannot be lowered in reduce-overhead mode"), std::string::npos) << m;
}

TEST(Compile, DataDependentControlFlowIsAClearError) {
  Noisy n;
  CompileOptions o;
  o.fullgraph = true;  // fullgraph=false splits the method there (test_breaks.cpp)
  auto fast = compile(n, &Noisy::branchy, o);
  std::string m = message([&] { fast(Tensor::from_vector({1, 2}, {2})); });
  EXPECT_NE(m.find("data-dependent control flow"), std::string::npos) << m;
}

TEST(Compile, StaticProgramRejectsOtherShapes) {
  models::SimpleMLP mlp;
  CompileOptions o;
  o.dynamic = false;
  o.config = CompilerConfig{};
  o.config->autotune_candidates = 1;
  auto fast = compile(mlp, &models::SimpleMLP::forward, o);
  fast(Tensor::from_vector(std::vector<float>(2 * 128, 0.1f), {2, 128}));
  const auto& cg = detail::entry(fast.engine(), 0);
  compiler::ProgramRunner runner(std::shared_ptr<const compiler::DeviceProgram>(&cg.program, [](auto*) {}), 0);
  std::vector<Tensor> params;
  for (const auto& ref : cg.program.parameters)
    for (auto& [n, t] : mlp.named_parameters())
      if (n == ref.name) params.push_back(t);
  auto comm = make_single_process_communicator();
  std::string m = message([&] {
    runner.run({Tensor::from_vector(std::vector<float>(3 * 128, 0.1f), {3, 128})}, params, {}, *comm);
  });
  EXPECT_NE(m.find("input 0 is f32[3, 128], the program was compiled for f32[2, 128]"), std::string::npos) << m;
}
