// Compile regions (npucache/region.h): a repeated module's body is traced
// once per signature and recorded as region_call nodes; the compiler
// compiles each body once and links it in at every call with that call's
// own parameters; results equal eager in every mode and with regions off;
// a body that reads what it was not given, or a link that does not fit,
// is an error that says so.
#include <npucache/compile.h>
#include <npucache/error.h>
#include <npucache/ir/hash.h>
#include <npucache/models/decoder.h>
#include <npucache/module.h>
#include <npucache/ops.h>
#include <npucache/region.h>
#include <npucache/trace.h>

#include <gtest/gtest.h>

#include "compiler/compiled_graph.h"
#include "compiler/passes.h"
#include "compiler/region_stack.h"
#include "nn/detail/trace_state.h"
#include "support/expect_close.h"
#include "support/expect_error.h"
#include "support/small_models.h"

using namespace npucache;
using npucache::testing::expect_error;
using testing_support::expect_close;
using testing_support::ramp;
using namespace npucache::region_stack;

namespace {

TEST(Regions, RepeatedBlocksTraceOneBodyPerShape) {
  Stack m(4, 2, 8);
  Inputs in = inputs(m, 2, 3, 8);
  m.runs = 0;
  TraceOptions o;
  o.dynamic = false;
  TraceResult tr = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  EXPECT_EQ(m.runs, 2) << "one body per block shape";
  ASSERT_EQ(tr.regions.size(), 2u);
  const auto c = calls(tr.graph);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0]->attrs.get<std::string>("region"), c[3]->attrs.get<std::string>("region"));
  EXPECT_NE(c[0]->attrs.get<std::string>("region"), c[4]->attrs.get<std::string>("region"));
  for (const auto& [key, body] : tr.regions) EXPECT_EQ(canonical_hash(body).hex(), key);
  // Each call reads its own block's weight and buffer: 3 arguments, then them.
  ASSERT_EQ(c[2]->inputs.size(), 5u);
  EXPECT_EQ(c[2]->attrs.get_int("num_args"), 3);
  EXPECT_EQ(tr.graph.node(c[2]->inputs[3]).target, "blocks.2.w");
  EXPECT_EQ(tr.graph.node(c[2]->inputs[4]).target, "blocks.2.b");
  EXPECT_EQ(c[2]->attrs.get<std::vector<int64_t>>("mutates"), std::vector<int64_t>{2}) << "the cache argument";
  // Parameters are bound as a flat trace binds them.
  const auto names = bound_names(tr.graph);
  EXPECT_EQ(names.size(), 12u);
  EXPECT_EQ(names.front(), "blocks.0.w");
  EXPECT_EQ(names.back(), "blocks.5.b");

  // Dynamic: every cache has a size of its own (a symbol per cache); the
  // body's decisions are replayed on each call's symbols, not traced again.
  // The first narrow call's x has a symbolic width its body specialises to
  // the weight's; later calls see it constant, another signature: one more
  // body trace (the same body by its hash).
  o.dynamic = true;
  m.runs = 0;
  TraceResult dyn = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  EXPECT_EQ(m.runs, 3);
  EXPECT_EQ(dyn.regions.size(), 2u);
  const auto dc = calls(dyn.graph);
  ASSERT_EQ(dc.size(), 6u);
  EXPECT_NE(dc[0]->attrs.get<std::vector<SymExpr>>("bind"), dc[1]->attrs.get<std::vector<SymExpr>>("bind"))
      << "each call binds its own cache's length";
  EXPECT_EQ(dyn.signature.inputs.size(), flat_inputs(in));

  o.dynamic = false;
  o.regions = false;
  m.runs = 0;
  TraceResult flat = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  EXPECT_EQ(m.runs, 6);
  EXPECT_TRUE(flat.regions.empty());
  EXPECT_TRUE(calls(flat.graph).empty());
  EXPECT_EQ(bound_names(flat.graph), names);
}

TEST(Regions, ResultsEqualEagerInEveryModeAndWithRegionsOff) {
  for (const char* mode : {"default", "max-autotune", "reduce-overhead"})
    for (bool regions : {true, false})
      for (std::optional<bool> dynamic : {std::optional<bool>(), std::optional<bool>(true)}) {
        SCOPED_TRACE(std::string(mode) + (regions ? " regions" : " inline") + (dynamic ? " dynamic" : ""));
        Stack m(3, 1, 8);
        CompileOptions co;
        co.mode = mode;
        co.regions = regions;
        co.dynamic = dynamic;
        co.fullgraph = true;
        auto f = compile(m, &Stack::forward, co);
        region_stack::expect_as_eager(f, m);
      }
}

TEST(Regions, TheCompilerCompilesEachBodyOnceAndLinksEveryCall) {
  Stack m(4, 0, 8);
  Inputs in = inputs(m, 2, 3, 8);
  TraceOptions o;
  o.dynamic = true;
  TraceResult tr = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  const SymBindings example = tr.signature.bind(flatten_args(o, in.x, in.positions, in.caches));
  compiler::CompiledGraph cg = compiler::compile_graph(tr, CompilerConfig{}, {}, example, true, 0);
  int region_passes = 0, region_lowerings = 0;
  std::string link;
  for (const auto& t : cg.timings) {
    if (t.name.rfind("region ", 0) == 0 && t.name.find("decompose") != std::string::npos) ++region_passes;
    if (t.name.rfind("region ", 0) == 0 && t.name.find("lower") != std::string::npos) ++region_lowerings;
    if (t.name == "link_program") link = t.note;
  }
  EXPECT_EQ(region_passes, 1) << compiler::format_timings(cg.timings);
  EXPECT_EQ(region_lowerings, 1) << compiler::format_timings(cg.timings);
  EXPECT_NE(link.find("4 calls of 1 regions"), std::string::npos) << link;
  // The method's graph and program keep the calls; what runs has none.
  EXPECT_EQ(calls(cg.optimized).size(), 4u);
  ASSERT_EQ(cg.regions.size(), 1u);
  const compiler::DeviceProgram& body = cg.regions.begin()->second.program;
  std::size_t call_steps = 0;
  for (const auto& st : cg.calling.steps) call_steps += st.op == Op::region_call;
  EXPECT_EQ(call_steps, 4u);
  for (const auto& st : cg.program.steps) EXPECT_NE(st.op, Op::region_call);
  EXPECT_EQ(cg.program.steps.size(), cg.calling.steps.size() - 4 + 4 * body.steps.size());
  EXPECT_EQ(cg.program.parameters.size(), 8u);
  EXPECT_EQ(cg.program.parameters[6].name, "blocks.3.w");
}

TEST(Regions, ALinkThatDoesNotFitIsRefused) {
  Stack m(2, 0, 8);
  Inputs in = inputs(m, 2, 3, 8);
  TraceOptions o;
  o.dynamic = false;
  const TraceResult tr = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  ASSERT_EQ(tr.regions.size(), 1u);
  EXPECT_NO_THROW(compiler::link_regions(tr.graph, tr.regions));
  expect_error<VerifyError>([&] { (void)compiler::link_regions(tr.graph, {}); }, "the region's body is missing");
  // A body of other types under the call's name.
  Stack other(2, 0, 4);
  Inputs oin = inputs(other, 2, 3, 4);
  const TraceResult tr2 = trace_method(other, &Stack::forward, o, oin.x, oin.positions, oin.caches);
  std::map<std::string, Graph> swapped{{tr.regions.begin()->first, tr2.regions.begin()->second}};
  expect_error<VerifyError>([&] { (void)compiler::link_regions(tr.graph, swapped); }, "operand 0 is f32[2, 3, 8]");
  // A call that lists no in-place update of a body that makes one.
  Graph g = tr.graph;
  for (Node& n : g.mutable_nodes())
    if (n.op == Op::region_call) n.attrs.set("mutates", std::vector<int64_t>{});
  expect_error<VerifyError>([&] { (void)compiler::link_regions(g, tr.regions); }, "updates other operands in place");
}

struct Leaky : nn::Module {
  Tensor w, stray;
  Leaky() {
    w = register_parameter("w", Tensor::from_vector(ramp(16, 0.1f, 0.0f), {4, 4}));
    stray = Tensor::from_vector(ramp(4, 0.1f, 0.0f), {4});
  }
  Tensor forward(const Tensor& x) const { return ops::matmul(x, w) + stray; }
};
struct Reaching : nn::Module {
  Tensor outside;
  Reaching() : inner(std::make_shared<Inner>(this)) { register_module("inner", inner); }
  struct Inner : nn::Module {
    Reaching* parent;
    Tensor w;
    explicit Inner(Reaching* p) : parent(p) {
      w = register_parameter("w", Tensor::from_vector(ramp(16, 0.1f, 0.0f), {4, 4}));
    }
    Tensor forward(const Tensor& x) const { return ops::matmul(x, w) + parent->outside; }
  };
  std::shared_ptr<Inner> inner;
  Tensor forward(const Tensor& x) {
    outside = ops::relu(x);
    return nn::compile_region(*inner, &Inner::forward, x);
  }
};
struct LeakyHost : nn::Module {
  std::shared_ptr<Leaky> leaky = std::make_shared<Leaky>();
  LeakyHost() { register_module("leaky", leaky); }
  Tensor forward(const Tensor& x) { return nn::compile_region(*leaky, &Leaky::forward, x); }
};

TEST(Regions, ABodyReadsOnlyItsArgumentsAndItsModule) {
  const Tensor x = Tensor::from_vector(ramp(8, 0.1f, 0.0f), {2, 4});
  Reaching r;
  expect_error<TraceError>([&] { (void)trace_method(r, &Reaching::forward, TraceOptions{}, x); },
                           "pass it as an argument");
  LeakyHost h;
  expect_error<TraceError>([&] { (void)trace_method(h, &LeakyHost::forward, TraceOptions{}, x); },
                           "neither an argument of the region nor a parameter or buffer of its module");
  // Eager calls run the method as it is.
  expect_close(r.forward(x).to_vector(), (ops::matmul(x, r.inner->w) + ops::relu(x)).to_vector(), "eager", 1e-6f);
}

TEST(Regions, PipelineStagesOfOneShapeShareAGraphKeyAndBindTheirOwnLayers) {
  models::DecoderConfig c;
  c.layers = 8;
  auto stage = [&](int pp_rank) {
    models::StageRanks r;
    r.pp = 4;
    r.pp_rank = pp_rank;
    return std::make_unique<models::Decoder>(c, r, models::Weights::meta);
  };
  auto s1 = stage(1), s2 = stage(2);
  const Tensor tokens = Tensor::meta({1, 4}, DType::i64), positions = Tensor::meta({1, 4}, DType::i64);
  TraceOptions o;
  o.dynamic = false;
  const TraceResult t1 = trace_method(*s1, &models::Decoder::prompt, o, tokens, positions, s1->make_kv_cache(1));
  const TraceResult t2 = trace_method(*s2, &models::Decoder::prompt, o, tokens, positions, s2->make_kv_cache(1));
  ASSERT_EQ(calls(t1.graph).size(), 2u);
  ASSERT_EQ(t1.regions.size(), 1u);
  EXPECT_EQ(t1.regions, t2.regions);
  EXPECT_EQ(canonical_hash(t1.graph), canonical_hash(t2.graph));
  EXPECT_NE(bound_names(t1.graph), bound_names(t2.graph));
  EXPECT_EQ(bound_names(t2.graph).front().rfind("layers.4.", 0), 0u);
}

}  // namespace

// A later call replays its body's size decisions in the method's own
// environment and undoes them when one does not hold: the environment is
// then as before, guards and bounds included; kept, they stay.
TEST(Regions, ReplayedSizeDecisionsAreUndoneWhenOneDoesNotHold) {
  detail::ShapeEnv env;
  const SymExpr a = env.fresh(4), b = env.fresh(4), c = env.fresh(8);
  ASSERT_TRUE(env.unify(a, b));
  const auto subst = env.substitutions();
  const auto guards = env.guards();
  const auto bounds = env.bounds();
  env.begin_undo();
  EXPECT_TRUE(env.require_le(a, c));
  EXPECT_TRUE(env.unify(c, a + b));  // c becomes 2 s0
  EXPECT_FALSE(env.unify(a, c));
  env.end_undo(true);
  EXPECT_EQ(env.substitutions(), subst);
  EXPECT_EQ(env.guards(), guards);
  EXPECT_EQ(env.bounds(), bounds);
  EXPECT_EQ(env.resolve(c), c);
  env.begin_undo();
  EXPECT_TRUE(env.unify(c, a + b));
  env.end_undo(false);
  EXPECT_NE(env.substitutions(), subst);
  EXPECT_GT(env.guards().size(), guards.size());
}

// Hash and symbol order of a region's body come from one encoder pass:
// the same as the two functions give apart.
TEST(Regions, OnePassNamesABodyAsHashAndSymbolsDo) {
  Stack m(3, 1, 4);
  Inputs in = inputs(m, 1, 2, 4);
  TraceOptions o;
  o.regions = true;
  o.dynamic = true;
  const TraceResult r = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  ASSERT_FALSE(r.regions.empty());
  for (const auto& [hex, body] : r.regions) {
    const CanonicalNaming n = canonical_naming(body);
    EXPECT_EQ(n.hash.hex(), hex);
    EXPECT_EQ(n.hash, canonical_hash(body));
    EXPECT_EQ(n.symbols, canonical_symbols(body));
  }
  EXPECT_EQ(canonical_naming(r.graph).symbols, canonical_symbols(r.graph));
}
