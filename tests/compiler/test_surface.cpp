// The torch.compile surface of seed 003: every row of the backend/mode
// table (docs/GUIDE.md), the option checks torch.compile makes, disable,
// trace.enabled, automatic dynamic shapes and dim marks, the capture limit
// and the pool's reclaiming of dead captures.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include "compiler/compiled_graph.h"
#include "compiler/engine.h"
#include "runtime/pool.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "support/error_message.h"
#include "support/expect_close.h"
#include "support/small_models.h"
#include "support/temp_dir_test.h"

using namespace npucache;
using testing_support::expect_close;
using testing_support::ramp;
namespace fs = std::filesystem;

namespace {

using npucache::testing::message;

// A matmul (tuned in max-autotune) followed by an elementwise chain (fused
// by code generation).
struct Block : nn::Module {
  Tensor w, bias;
  Block() {
    w = register_parameter("w", Tensor::from_vector(ramp(32 * 32, 0.01f, -0.05f), {32, 32}));
    bias = register_parameter("bias", Tensor::from_vector(ramp(32, 0.02f, -0.1f), {32}));
  }
  std::string type_name() const override { return "Block"; }
  Tensor forward(const Tensor& x) {
    Tensor h = ops::matmul(x, w) + bias;
    return ops::sigmoid(h * 2.0f - 1.0f) * h;
  }
};

Tensor batch(int64_t b) { return Tensor::from_vector(ramp(b * 32, 0.1f, -0.6f), {b, 32}); }

bool has_fused_step(const compiler::CompiledGraph& g) {
  for (const auto& s : g.program.steps)
    if (s.op == Op::fused) return true;
  return false;
}

struct Row {
  std::string name;
  CompileOptions options;
  bool codegen, tuned, captured;
};

std::vector<Row> table() {
  auto with = [](std::optional<std::string> backend, std::optional<std::string> mode,
                 std::map<std::string, OptionValue> options = {}) {
    CompileOptions o;
    if (backend) o.backend = *backend;
    o.mode = std::move(mode);
    o.options = std::move(options);
    o.dynamic = false;
    return o;
  };
  return {
      {"inductor_unset", with(std::nullopt, std::nullopt), true, false, false},
      {"inductor_default", with("inductor", "default"), true, false, false},
      {"inductor_max_autotune_no_cudagraphs", with("inductor", "max-autotune-no-cudagraphs"), true, true, false},
      {"inductor_max_autotune", with("inductor", "max-autotune"), true, true, true},
      {"inductor_reduce_overhead", with("inductor", "reduce-overhead"), true, false, true},
      {"inductor_triton_cudagraphs", with("inductor", std::nullopt, {{"triton.cudagraphs", true}}), true, false, true},
      {"npugraphs", with("npugraphs", std::nullopt), false, false, true},
  };
}

class Table : public ::testing::TestWithParam<Row> {};

}  // namespace

// Each row of the table does what the table says, and equals eager.
TEST_P(Table, RowDoesWhatTheTableSays) {
  const Row& row = GetParam();
  Block m;
  auto fast = compile(m, &Block::forward, row.options);
  Tensor x = batch(8);
  expect_close(fast(x).to_vector(), m.forward(x).to_vector(), row.name + " first call");
  expect_close(fast(x).to_vector(), m.forward(x).to_vector(), row.name + " second call");
  const auto& g = detail::entry(fast.engine(), 0);
  EXPECT_EQ(has_fused_step(g), row.codegen) << row.name;
  EXPECT_EQ(!g.autotune.empty(), row.tuned) << row.name;
  EXPECT_EQ(fast.status().replayed, row.captured) << row.name;
  EXPECT_EQ(fast.status().captures, row.captured ? 1u : 0u) << row.name;
  EXPECT_EQ(detail::config(fast.engine()).captures(), row.captured) << row.name;
}

INSTANTIATE_TEST_SUITE_P(Surface, Table, ::testing::ValuesIn(table()),
                         [](const ::testing::TestParamInfo<Row>& i) { return i.param.name; });

// torch.compile's refusals, each a ConfigError saying what to do.
TEST(Surface, ContradictoryOrUnknownOptionsAreConfigErrors) {
  Block m;
  auto refuse = [&](CompileOptions o, const std::string& expected) {
    std::string msg = message([&] { compile(m, &Block::forward, o); });
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  };
  CompileOptions o;
  o.mode = "reduce-overhead";
  o.options = {{"trace.enabled", true}};
  refuse(o, "either mode or options can be given, not both");
  o = {};
  o.options = {{"triton.cudagraph", true}};
  refuse(o, "unknown compile option 'triton.cudagraph'; known options: triton.cudagraphs, trace.enabled");
  o = {};
  o.backend = "aot_eager";
  refuse(o, "unknown backend 'aot_eager'; expected 'inductor' or 'npugraphs'");
  o = {};
  o.backend = "npugraphs";
  o.mode = "reduce-overhead";
  refuse(o, "backend 'npugraphs' takes no mode");
  o = {};
  o.mode = "fastest";
  refuse(o, "unknown mode 'fastest' for the inductor backend");
  o = {};
  o.options = {{"trace.enabled", std::string("yes")}};
  refuse(o, "compile option 'trace.enabled' takes true or false");
  o = {};
  o.config = CompilerConfig{};
  o.mode = "max-autotune";
  refuse(o, "set CompilerConfig::mode instead");
  o = {};
  o.capture_limit = 0;
  refuse(o, "capture_limit must be at least 1");
  o = {};
  o.mark_dynamic = {{"arg0", 0}};
  o.mark_static = {{"arg0", 0}};
  refuse(o, "is marked both dynamic and static");
}

// TorchAir's config keeps TorchAir's meaning: max-autotune tunes and does
// not capture; reduce-overhead captures.
TEST(Surface, TorchAirConfigKeepsItsMeaning) {
  Block m;
  CompileOptions o;
  o.config = CompilerConfig{};
  o.dynamic = false;
  auto fast = compile(m, &Block::forward, o);
  (void)fast(batch(4));
  EXPECT_FALSE(detail::entry(fast.engine(), 0).autotune.empty());
  EXPECT_FALSE(fast.status().replayed);
  o.config->mode = CompileMode::reduce_overhead;
  auto captured = compile(m, &Block::forward, o);
  (void)captured(batch(4));
  EXPECT_TRUE(captured.status().replayed);
  EXPECT_TRUE(detail::entry(captured.engine(), 0).autotune.empty());
  o.config = std::nullopt;
  o.backend = get_npu_backend(CompilerConfig{});
  auto by_object = compile(m, &Block::forward, o);
  (void)by_object(batch(4));
  EXPECT_FALSE(detail::entry(by_object.engine(), 0).autotune.empty());
}

TEST(Surface, DisableRunsEagerlyAndCompilesNothing) {
  Block m;
  CompileOptions o;
  o.disable = true;
  o.mode = "this mode is never looked at";  // torch.compile validates nothing when disabled either
  o.mode = std::nullopt;
  auto fast = compile(m, &Block::forward, o);
  Tensor x = batch(3);
  expect_close(fast(x).to_vector(), m.forward(x).to_vector(), "disabled");
  EXPECT_EQ(fast.status().outcome, Outcome::eager);
  EXPECT_EQ(fast.compiles(), 0u);
}

TEST(Surface, TraceEnabledWritesEachCompilesGraphsAndProgram) {
  const testing_support::TempDir tmp("trace", testing_support::current_test_name());
  const fs::path dir = tmp.path() / "trace";  // not created: the trace makes it
  Block m;
  CompileOptions o;
  o.options = {{"trace.enabled", true}, {"trace.debug_dir", dir.string()}};
  o.dynamic = false;
  auto fast = compile(m, &Block::forward, o);
  (void)fast(batch(2));
  (void)fast(batch(5));  // static: a second compile
  for (const char* n : {"compile_1", "compile_2"})
    for (const char* f : {"traced_graph.txt", "optimized_graph.txt", "program.txt", "passes.txt", "signature.txt"}) {
      const fs::path p = dir / "Block.forward" / n / f;
      ASSERT_TRUE(fs::exists(p)) << p;
      EXPECT_GT(fs::file_size(p), 0u) << p;
    }
}

// dynamic unset: static first; the dim that changes is compiled once more
// dynamic, and no later size of it compiles again.
TEST(AutomaticDynamic, BatchesOneToSixtyFourCompileAtMostTwice) {
  Block m;
  auto fast = compile(m, &Block::forward);  // torch.compile's defaults
  for (int64_t b = 1; b <= 64; ++b) {
    Tensor x = batch(b);
    expect_close(fast(x).to_vector(), m.forward(x).to_vector(), "batch " + std::to_string(b));
  }
  EXPECT_LE(fast.compiles(), 2u);
  ASSERT_EQ(fast.status().dynamic_dims.size(), 1u);
  EXPECT_EQ(fast.status().dynamic_dims[0], "arg0 dim 0");
}

// The first two sizes both >= 2: the second compiles dynamic, and batch 1
// afterwards is served by the dynamic program too.
TEST(AutomaticDynamic, ALaterBatchOfOneUsesTheDynamicProgram) {
  Block m;
  auto fast = compile(m, &Block::forward);
  for (int64_t b : {4, 8, 1, 16, 1, 2}) {
    Tensor x = batch(b);
    expect_close(fast(x).to_vector(), m.forward(x).to_vector(), "batch " + std::to_string(b));
  }
  EXPECT_EQ(fast.compiles(), 2u);
}

TEST(AutomaticDynamic, MarksOverrideTheDecision) {
  Block m;
  CompileOptions o;
  o.mark_dynamic = {{"arg0", 0}};
  auto marked = compile(m, &Block::forward, o);
  for (int64_t b : {3, 7, 9}) (void)marked(batch(b));
  EXPECT_EQ(marked.compiles(), 1u);
  o = {};
  o.dynamic = true;
  o.mark_static = {{"arg0", 0}};
  auto pinned = compile(m, &Block::forward, o);
  for (int64_t b : {3, 7, 9}) (void)pinned(batch(b));
  EXPECT_EQ(pinned.compiles(), 3u);
}

// Past the capture limit, new shapes run uncaptured (and right), with one
// warning; shapes captured before still replay.
TEST(NpuGraphTrees, CaptureLimitRunsLaterShapesUncaptured) {
  Block m;
  CompileOptions o;
  o.mode = "reduce-overhead";
  o.dynamic = true;
  o.capture_limit = 3;
  auto fast = compile(m, &Block::forward, o);
  for (int64_t b : {2, 3, 4, 5, 6, 2}) {
    Tensor x = batch(b);
    expect_close(fast(x).to_vector(), m.forward(x).to_vector(), "batch " + std::to_string(b));
    const bool captured = b <= 4;
    EXPECT_EQ(fast.status().replayed, captured) << "batch " << b;
  }
  EXPECT_EQ(fast.status().captures, 3u);
  EXPECT_EQ(fast.compiles(), 1u);
}

// Captures of two methods share the thread's pool; once the method with
// the large capture is gone, the pool shrinks to what the live one needs.
TEST(NpuGraphTrees, MemoryOfDeadCapturesIsReclaimed) {
  Block m;
  CompileOptions o;
  o.mode = "reduce-overhead";
  o.dynamic = false;
  std::size_t big = 0, small = 0, after = 0;
  std::thread([&] {
    auto pool = runtime::MemoryPool::of_this_thread(0);
    auto small_fn = compile(m, &Block::forward, o);
    (void)small_fn(batch(2));
    small = pool->capacity();
    {
      auto big_fn = compile(m, &Block::forward, o);
      (void)big_fn(batch(256));
      big = pool->capacity();
    }
    Tensor x = batch(2);
    expect_close(small_fn(x).to_vector(), m.forward(x).to_vector(), "after the big capture died");
    after = pool->capacity();
  }).join();
  EXPECT_GT(big, small);
  EXPECT_EQ(after, small);
}

namespace {
// Mixes the rows: padding the batch dim would change every result.
struct RowMixer : nn::Module {
  Tensor w;
  RowMixer() { w = register_parameter("w", Tensor::from_vector(ramp(32 * 32, 0.01f, -0.05f), {32, 32})); }
  std::string type_name() const override { return "RowMixer"; }
  Tensor forward(const Tensor& x) { return ops::matmul(x, w) + ops::mean(x, {0}, true); }
};
}  // namespace

// enable_shape_handling: a smaller batch is padded up to a captured one and
// replays it; the padding is sliced off; results equal eager.
TEST(ShapeHandling, SmallerBatchesReplayTheNextCapturedSize) {
  Block m;
  CompileOptions o;
  o.dynamic = true;
  o.options = {{"triton.cudagraphs", true}, {"enable_shape_handling", true}};
  auto fast = compile(m, &Block::forward, o);
  for (int64_t b : {8, 5, 3, 8, 7, 16, 12}) {
    Tensor x = batch(b);
    const auto got = fast(x);
    ASSERT_EQ(got.dims(), (std::vector<int64_t>{b, 32})) << "batch " << b;
    expect_close(got.to_vector(), m.forward(x).to_vector(), "batch " + std::to_string(b));
    EXPECT_TRUE(fast.status().replayed) << "batch " << b;
  }
  EXPECT_EQ(fast.status().captures, 2u);  // 8 and 16
  EXPECT_EQ(fast.compiles(), 1u);
}

// A computation that mixes rows is never padded: the graph's structure
// shows it (a mean over the batch), whatever the data of the calls; each
// size is captured as it is.
TEST(ShapeHandling, PaddingThatWouldChangeResultsIsNeverUsed) {
  RowMixer m;
  CompileOptions o;
  o.dynamic = true;
  o.options = {{"triton.cudagraphs", true}, {"enable_shape_handling", true}};
  auto fast = compile(m, &RowMixer::forward, o);
  for (int64_t b : {8, 5, 3}) {
    Tensor x = batch(b);
    expect_close(fast(x).to_vector(), m.forward(x).to_vector(), "batch " + std::to_string(b));
    EXPECT_NE(fast.status().reason, "padded to a captured size (enable_shape_handling)") << "batch " << b;
  }
  EXPECT_EQ(fast.status().captures, 3u);  // 8, 5 and 3, each its own
}
