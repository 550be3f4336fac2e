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

#include <cmath>
#include <thread>

#include "compiler/compiled_graph.h"
#include "compiler/passes.h"
#include "compiler/region_stack.h"
#include "compiler/serialize.h"
#include "nn/detail/trace_state.h"
#include "support/error_message.h"
#include "support/expect_close.h"
#include "support/small_models.h"

using namespace npucache;
using testing_support::expect_close;
using testing_support::ramp;
using namespace npucache::region_stack;

namespace {

template <class E>
void expect_error(const std::function<void()>& f, const std::string& text) {
  const std::string m = npucache::testing::error_message<E>(f);
  EXPECT_NE(m.find(text), std::string::npos) << "message: '" << m << "', expected to contain '" << text << "'";
}

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

// --- Attacks ------------------------------------------------------------------

namespace attacks {

// The one node of `g` of `op`.
Node& only(Graph& g, Op op) {
  Node* found = nullptr;
  for (Node& n : g.mutable_nodes())
    if (n.op == op) {
      EXPECT_EQ(found, nullptr) << "more than one " << op_name(op);
      found = &n;
    }
  if (!found) throw std::runtime_error(std::string("no ") + std::string(op_name(op)));
  return *found;
}

compiler::CompiledGraph compiled(const TraceResult& tr, const SymBindings& example) {
  return compiler::compile_graph(tr, CompilerConfig{}, {}, example, true, 0);
}

}  // namespace attacks

TEST(RegionAttacks, AStoredBodySwappedForAnotherIsRefusedAsDamaged) {
  Stack m(2, 1, 8);
  Inputs in = inputs(m, 2, 3, 8);
  TraceOptions o;
  o.dynamic = false;
  const TraceResult tr = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  ASSERT_EQ(tr.regions.size(), 2u);
  const compiler::CompiledGraph cg =
      attacks::compiled(tr, tr.signature.bind(flatten_args(o, in.x, in.positions, in.caches)));
  const std::string honest = compiler::serialize_compiled(cg, true);
  EXPECT_NO_THROW((void)compiler::deserialize_compiled(honest));
  // One op of a body changed for another (the same bytes' worth): the body
  // still verifies, links and runs, but is not the one its name hashes.
  compiler::CompiledGraph edited = cg;
  attacks::only(edited.trace.regions.begin()->second, Op::tanh).op = Op::sigmoid;
  const std::string swapped_op = compiler::serialize_compiled(edited, true);
  EXPECT_EQ(swapped_op.size(), honest.size());
  expect_error<VerifyError>([&] { (void)compiler::deserialize_compiled(swapped_op); },
                            "is not the body its name hashes");
  // The two bodies under each other's names.
  compiler::CompiledGraph exchanged = cg;
  auto first = exchanged.trace.regions.begin(), second = std::next(first);
  std::swap(first->second, second->second);
  expect_error<VerifyError>(
      [&] { (void)compiler::deserialize_compiled(compiler::serialize_compiled(exchanged, true)); },
      "is not the body its name hashes");
  // A body dropped: the call names a body the object does not carry.
  compiler::CompiledGraph dropped = cg;
  dropped.trace.regions.erase(dropped.trace.regions.begin());
  expect_error<VerifyError>([&] { (void)compiler::deserialize_compiled(compiler::serialize_compiled(dropped, true)); },
                            "whose body the trace does not carry");
}

TEST(RegionAttacks, AnEditedBindOrMutatesChangesTheKeyAndIsRefusedByTheLink) {
  Stack m(2, 0, 8);
  Inputs in = inputs(m, 2, 3, 8);
  TraceOptions o;
  o.dynamic = true;
  const TraceResult tr = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  ASSERT_EQ(tr.regions.size(), 1u);
  const Hash128 key = canonical_hash(tr.graph);
  const auto bind = calls(tr.graph).front()->attrs.get<std::vector<SymExpr>>("bind");
  ASSERT_GE(bind.size(), 2u) << "batch and sequence are the body's symbols";
  EXPECT_NO_THROW((void)compiler::link_regions(tr.graph, tr.regions));
  // Edits of the first call; each changes the graph key (the reader derives
  // the key from the object's own trace: check_own_key) and the link.
  auto edit = [&](const std::function<void(Node&)>& f) {
    Graph g = tr.graph;
    for (Node& n : g.mutable_nodes())
      if (n.op == Op::region_call) {
        f(n);
        break;
      }
    return g;
  };
  std::vector<SymExpr> reversed(bind.rbegin(), bind.rend());
  const Graph swapped = edit([&](Node& n) { n.attrs.set("bind", reversed); });
  EXPECT_NE(canonical_hash(swapped), key);
  expect_error<VerifyError>([&] { (void)compiler::link_regions(swapped, tr.regions); }, "its body's placeholder");
  std::vector<SymExpr> constants(bind.size(), SymExpr(3));
  const Graph fixed = edit([&](Node& n) { n.attrs.set("bind", constants); });
  EXPECT_NE(canonical_hash(fixed), key);
  expect_error<VerifyError>([&] { (void)compiler::link_regions(fixed, tr.regions); }, "its body's placeholder");
  const Graph shorter = edit([&](Node& n) { n.attrs.set("bind", std::vector<SymExpr>(bind.begin(), bind.end() - 1)); });
  expect_error<VerifyError>([&] { (void)compiler::link_regions(shorter, tr.regions); }, "symbols, its body has");
  // The call claims to update the input x instead of its cache.
  const Graph other_target = edit([&](Node& n) { n.attrs.set("mutates", std::vector<int64_t>{0}); });
  EXPECT_NE(canonical_hash(other_target), key);
  expect_error<VerifyError>([&] { (void)compiler::link_regions(other_target, tr.regions); },
                            "updates other operands in place");
  const Graph more = edit([&](Node& n) { n.attrs.set("mutates", std::vector<int64_t>{0, 2}); });
  expect_error<VerifyError>([&] { (void)compiler::link_regions(more, tr.regions); }, "updates other operands in place");
}

// A stack whose second block is kept as a plain member, not registered.
struct Stranger : nn::Module {
  int runs = 0;
  std::shared_ptr<Block> own = std::make_shared<Block>(8, 1.0f, &runs),
                         stranger = std::make_shared<Block>(8, 2.0f, &runs);
  Stranger() { register_module("own", own); }
  Tensor forward(const Tensor& x, const Tensor& positions, const std::vector<Tensor>& caches) {
    Tensor h = nn::compile_region(*own, &Block::forward, x, positions, caches[0]);
    return nn::compile_region(*stranger, &Block::forward, h, positions, caches[1]);
  }
};

TEST(RegionAttacks, AModuleThatIsNotASubmoduleIsRefused) {
  Stranger m;
  Stack shape(2, 0, 8);
  Inputs in = inputs(shape, 2, 3, 8);
  expect_error<TraceError>(
      [&] { (void)trace_method(m, &Stranger::forward, TraceOptions{}, in.x, in.positions, in.caches); },
      "its module is not a registered submodule of the traced module");
  // Regions off: the stranger's weights are eager tensors the trace has no
  // name for either.
  TraceOptions flat;
  flat.regions = false;
  expect_error<TraceError>([&] { (void)trace_method(m, &Stranger::forward, flat, in.x, in.positions, in.caches); },
                           "neither an input of the traced method nor a parameter or buffer");
}

// A region whose method reads its parent's parameter or the parent's
// method's input (kept in a member) instead of taking them as arguments.
struct Nosy : nn::Module {
  Tensor bias, kept;
  bool read_input = false;
  struct Inner : nn::Module {
    Nosy* parent;
    Tensor w;
    explicit Inner(Nosy* p) : parent(p) {
      w = register_parameter("w", Tensor::from_vector(ramp(16, 0.1f, 0.0f), {4, 4}));
    }
    Tensor forward(const Tensor& x) const {
      return ops::matmul(x, w) + (parent->read_input ? parent->kept : parent->bias);
    }
  };
  std::shared_ptr<Inner> inner = std::make_shared<Inner>(this);
  Nosy() {
    bias = register_parameter("bias", Tensor::from_vector(ramp(4, 0.1f, 0.0f), {4}));
    register_module("inner", inner);
  }
  Tensor forward(const Tensor& x) {
    kept = x;
    return nn::compile_region(*inner, &Inner::forward, x);
  }
};

TEST(RegionAttacks, ABodyReadingTensorsOfTheCodeAroundItIsRefused) {
  const Tensor x = Tensor::from_vector(ramp(16, 0.1f, 0.0f), {4, 4});
  Nosy m;
  expect_error<TraceError>([&] { (void)trace_method(m, &Nosy::forward, TraceOptions{}, x); },
                           "neither an argument of the region nor a parameter or buffer of its module");
  m.read_input = true;
  expect_error<TraceError>([&] { (void)trace_method(m, &Nosy::forward, TraceOptions{}, x); }, "pass it as an argument");
  // With regions off both are the method's own tensors.
  CompileOptions co;
  co.regions = false;
  co.fullgraph = true;
  auto f = compile(m, &Nosy::forward, co);
  expect_close(f(x).to_vector(), m.forward(x).to_vector(), "regions off", 1e-6f);
}

// A block whose method throws after recording some ops, once.
struct Throwing : nn::Module {
  std::shared_ptr<Block> block;
  int runs = 0;
  bool fail = true;
  Throwing() : block(std::make_shared<Block>(8, 1.0f, &runs)) { register_module("block", block); }
  struct Boom : std::runtime_error {
    Boom() : std::runtime_error("boom") {}
  };
  Tensor forward(const Tensor& x, const Tensor& positions, const std::vector<Tensor>& caches) {
    Tensor h = nn::compile_region(*block, &Block::forward, x, positions, caches[0]);
    return nn::compile_region(*this, &Throwing::body, h);
  }
  Tensor body(const Tensor& h) const {
    Tensor t = ops::tanh(h) * 2.0f;
    if (fail) throw Boom();
    return t;
  }
};

TEST(RegionAttacks, ABodyThatThrowsLeavesTheThreadReadyForTheNextTrace) {
  Throwing m;
  Stack shape(1, 0, 8);
  Inputs in = inputs(shape, 2, 3, 8), eager_in = inputs(shape, 2, 3, 8);
  EXPECT_THROW((void)trace_method(m, &Throwing::forward, TraceOptions{}, in.x, in.positions, in.caches),
               Throwing::Boom);
  // No trace is left recording: ops run eagerly, a new trace starts clean.
  EXPECT_FALSE(detail::trace_active());
  EXPECT_FALSE(ops::tanh(in.x).is_traced());
  CompileOptions co;
  co.fullgraph = true;
  auto f = compile(m, &Throwing::forward, co);
  EXPECT_THROW((void)f(in.x, in.positions, in.caches), Throwing::Boom);
  EXPECT_FALSE(detail::trace_active());
  m.fail = false;
  const TraceResult tr = trace_method(m, &Throwing::forward, TraceOptions{}, in.x, in.positions, in.caches);
  EXPECT_EQ(tr.regions.size(), 2u);
  expect_close(f(in.x, in.positions, in.caches).to_vector(),
               m.forward(eager_in.x, eager_in.positions, eager_in.caches).to_vector(), "after the throw", 1e-5f);
}

// Layers of one class that differ by a plain member (which rows they
// mix): the member passed as a plain value specialises the body.
struct Windowed : nn::Module {
  struct Layer : nn::Module {
    int64_t window;
    Tensor w;
    Layer(int64_t win, float seed) : window(win) {
      w = register_parameter("w", Tensor::from_vector(ramp(16, 0.05f * seed, -0.1f), {4, 4}));
    }
    Tensor forward(const Tensor& x, int64_t win) const {
      return ops::tanh(ops::matmul(x, w)) + ops::sum(x.slice(1, 0, win), {1}, true);
    }
    Tensor forward_member(const Tensor& x) const { return forward(x, window); }
  };
  std::vector<std::shared_ptr<Layer>> layers;
  Windowed() {
    for (int i = 0; i < 4; ++i)
      layers.push_back(register_module("l" + std::to_string(i), std::make_shared<Layer>(1 + i % 2, 1.0f + i)));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const auto& l : layers) h = nn::compile_region(*l, &Layer::forward, h, l->window);
    return h;
  }
};

// `m`'s forward traces `bodies` region bodies, and compiled it computes
// what it computes eagerly.
template <class M>
void expect_bodies_and_eager_results(M& m, std::size_t bodies, const std::string& what) {
  const Tensor x = Tensor::from_vector(ramp(2 * 3 * 4, 0.07f, -0.4f), {2, 3, 4});
  const TraceResult tr = trace_method(m, &M::forward, TraceOptions{}, x);
  EXPECT_EQ(tr.regions.size(), bodies) << what;
  CompileOptions co;
  co.fullgraph = true;
  auto f = compile(m, &M::forward, co);
  expect_close(f(x).to_vector(), m.forward(x).to_vector(), what, 1e-5f);
}

TEST(RegionAttacks, AMemberThatChangesTheBodyPassedAsAPlainValueGivesABodyPerValue) {
  Windowed m;
  expect_bodies_and_eager_results(m, 2, "windows 1 and 2");
}

// Layers called with words: each word one more step of the body, a
// sigmoid for a word ending in 'b', else a tanh. The signature holds each
// word as it is: two words ("a", "b") and one word holding the
// signature's own separators ("a'|varg1[1]='b") are two bodies, as are
// two strings split elsewhere (each pair reads alike with its words
// joined by the separators, and computes another body).
struct Worded : nn::Module {
  struct Layer : nn::Module {
    Tensor w;
    explicit Layer(float seed) {
      w = register_parameter("w", Tensor::from_vector(ramp(16, 0.05f * seed, -0.1f), {4, 4}));
    }
    Tensor forward(const Tensor& x, const std::vector<std::string>& words) const {
      Tensor h = x;
      for (const auto& word : words)
        h = !word.empty() && word.back() == 'b' ? ops::sigmoid(ops::matmul(h, w)) : ops::tanh(ops::matmul(h, w));
      return h;
    }
    Tensor forward_pair(const Tensor& x, const std::string& a, const std::string& b) const {
      return forward(x, {a, b});
    }
  };
  std::shared_ptr<Layer> l0, l1, l2, l3;
  Worded() {
    l0 = register_module("l0", std::make_shared<Layer>(1.0f));
    l1 = register_module("l1", std::make_shared<Layer>(2.0f));
    l2 = register_module("l2", std::make_shared<Layer>(3.0f));
    l3 = register_module("l3", std::make_shared<Layer>(4.0f));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = nn::compile_region(*l0, &Layer::forward, x, std::vector<std::string>{"a", "b"});
    h = nn::compile_region(*l1, &Layer::forward, h, std::vector<std::string>{"a'|varg1[1]='b"});
    h = nn::compile_region(*l2, &Layer::forward_pair, h, std::string("x'|varg2='b"), std::string("z"));
    return nn::compile_region(*l3, &Layer::forward_pair, h, std::string("x"), std::string("b'|varg2='z"));
  }
};

TEST(RegionAttacks, WordsHoldingTheSignaturesSeparatorsGetABodyEach) {
  Worded m;
  expect_bodies_and_eager_results(m, 4, "four signatures, each its own words");
}

// Lists of lists: [[], []] and [[]] flatten to no element either way; the
// signature holds each list's length, so they are two bodies.
struct Nested : nn::Module {
  struct Layer : nn::Module {
    Tensor w;
    explicit Layer(float seed) {
      w = register_parameter("w", Tensor::from_vector(ramp(16, 0.05f * seed, -0.1f), {4, 4}));
    }
    Tensor forward(const Tensor& x, const std::vector<std::vector<int64_t>>& lists) const {
      Tensor h = x;
      for (std::size_t i = 0; i < lists.size(); ++i) h = ops::tanh(ops::matmul(h, w));
      return h;
    }
  };
  std::shared_ptr<Layer> l0, l1;
  Nested() {
    l0 = register_module("l0", std::make_shared<Layer>(1.0f));
    l1 = register_module("l1", std::make_shared<Layer>(2.0f));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = nn::compile_region(*l0, &Layer::forward, x, std::vector<std::vector<int64_t>>{{}, {}});
    return nn::compile_region(*l1, &Layer::forward, h, std::vector<std::vector<int64_t>>{{}});
  }
};

TEST(RegionAttacks, ListsOfOtherLengthsGetABodyEach) {
  Nested m;
  expect_bodies_and_eager_results(m, 2, "two lists and one");
}

// Tied weights: a layer whose two matrices are one tensor, then one of the
// same class whose two are two. The tied body reads one placeholder; the
// untied call must not be recorded with it.
struct Tied : nn::Module {
  struct Layer : nn::Module {
    Tensor a, b;
    Layer(float seed, bool tie) {
      a = register_parameter("a", Tensor::from_vector(ramp(16, 0.05f * seed, -0.1f), {4, 4}));
      b = register_parameter("b", tie ? a : Tensor::from_vector(ramp(16, -0.03f * seed, 0.2f), {4, 4}));
    }
    Tensor forward(const Tensor& x) const { return ops::tanh(ops::matmul(ops::tanh(ops::matmul(x, a)), b)); }
  };
  std::shared_ptr<Layer> l0, l1, l2;
  Tied() {
    l0 = register_module("l0", std::make_shared<Layer>(1.0f, true));
    l1 = register_module("l1", std::make_shared<Layer>(2.0f, false));
    l2 = register_module("l2", std::make_shared<Layer>(3.0f, true));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = nn::compile_region(*l0, &Layer::forward, x);
    h = nn::compile_region(*l1, &Layer::forward, h);
    return nn::compile_region(*l2, &Layer::forward, h);
  }
};

TEST(RegionAttacks, TiedAndUntiedModulesOfOneClassGetABodyEach) {
  Tied m;
  expect_bodies_and_eager_results(m, 2, "tied, untied, tied");
}

// A body that updates one argument in place and reads another, called
// with one storage as both: its cache twice, or its cache and a view of
// it. In the body's program the two are operands of their own, so the
// update and the read would be ordered by nothing once linked onto one
// buffer; such a call is traced inline instead, as with regions off.
struct Aliased : nn::Module {
  struct Layer : nn::Module {
    Tensor cache;
    Tensor w;
    explicit Layer(float seed) {
      cache = register_buffer("cache", Tensor::from_vector(ramp(2 * 8 * 4, 0.1f * seed, -0.3f), {2, 8, 4}));
      w = register_parameter("w", Tensor::from_vector(ramp(16, 0.05f * seed, -0.1f), {4, 4}));
    }
    Tensor forward(const Tensor& a, const Tensor& pos, const Tensor& v, const Tensor& b) const {
      ops::buffer_update(a, pos, ops::tanh(ops::matmul(v, w)));
      return ops::sum(b, {1}, true);
    }
  };
  std::shared_ptr<Layer> l0, l1, l2, l3;
  Aliased() {
    l0 = register_module("l0", std::make_shared<Layer>(1.0f));
    l1 = register_module("l1", std::make_shared<Layer>(2.0f));
    l2 = register_module("l2", std::make_shared<Layer>(3.0f));
    l3 = register_module("l3", std::make_shared<Layer>(4.0f));
  }
  Tensor forward(const Tensor& pos, const Tensor& v) {
    Tensor h = nn::compile_region(*l0, &Layer::forward, l0->cache, pos, v, l0->cache);
    h = h + nn::compile_region(*l1, &Layer::forward, l1->cache, pos, v, l1->cache.reshape({2, 32}).reshape({2, 8, 4}));
    // Its own cache as the argument read, another layer's as the one
    // updated: the body reads its module's cache through the argument.
    h = h + nn::compile_region(*l2, &Layer::forward, l3->cache, pos, v, l2->cache);
    // Two storages, as the body expects: a region call.
    return h + nn::compile_region(*l3, &Layer::forward, l1->cache, pos, v, l0->cache);
  }
};

TEST(RegionAttacks, ArgumentsOfOneStorageAreTracedInline) {
  const Tensor pos = Tensor::from_vector_i64({1, 5, 2, 6}, {2, 2});
  const Tensor v = Tensor::from_vector(ramp(2 * 2 * 4, 0.11f, -0.2f), {2, 2, 4});
  Aliased traced;
  const TraceResult tr = trace_method(traced, &Aliased::forward, TraceOptions{}, pos, v);
  std::size_t calls = 0;
  for (const Node& n : tr.graph.nodes()) calls += n.op == Op::region_call;
  EXPECT_EQ(calls, 1u) << "only the call of two storages is a region call";
  EXPECT_EQ(tr.regions.size(), 1u);
  for (const std::string mode : {"default", "max-autotune"}) {
    Aliased compiled_model, eager_model;  // the same weights and caches
    CompileOptions co;
    co.fullgraph = true;
    co.mode = mode;
    auto f = compile(compiled_model, &Aliased::forward, co);
    const std::vector<float> got = f(pos, v).to_vector();
    const std::vector<float> want = eager_model.forward(pos, v).to_vector();
    expect_close(got, want, "arguments of one storage, " + mode, 1e-5f);
    expect_close(compiled_model.l1->cache.to_vector(), eager_model.l1->cache.to_vector(), "l1's cache, " + mode, 1e-5f);
  }
}

// A body whose result is one of its operands or a view of one: the
// cache it updated in place and returns, a reshape of its argument. To
// the calling program a region's result is a buffer of its own, so the
// caller's later update of that cache and its reads of the result would
// be ordered by nothing; such a body is traced inline.
struct Returning : nn::Module {
  struct Layer : nn::Module {
    Tensor cache;
    Tensor w;
    explicit Layer(float seed) {
      cache = register_buffer("cache", Tensor::from_vector(ramp(2 * 8 * 4, 0.1f * seed, -0.3f), {2, 8, 4}));
      w = register_parameter("w", Tensor::from_vector(ramp(16, 0.05f * seed, -0.1f), {4, 4}));
    }
    Tensor update(const Tensor& c, const Tensor& pos, const Tensor& v) const {
      return ops::buffer_update(c, pos, ops::tanh(ops::matmul(v, w)));
    }
    Tensor flat(const Tensor& x) const { return x.reshape({2, 32}); }
  };
  std::shared_ptr<Layer> l0, l1;
  Returning() {
    l0 = register_module("l0", std::make_shared<Layer>(1.0f));
    l1 = register_module("l1", std::make_shared<Layer>(2.0f));
  }
  Tensor forward(const Tensor& pos, const Tensor& v, const Tensor& pos2) {
    const Tensor h = nn::compile_region(*l0, &Layer::update, l0->cache, pos, v);
    const Tensor before = ops::sum(h, {1}, true);
    ops::buffer_update(l0->cache, pos2, v);  // the result is the cache: it sees this update
    const Tensor after = ops::sum(h, {1}, true);
    const Tensor f = nn::compile_region(*l1, &Layer::flat, l1->cache);
    ops::buffer_update(l1->cache, pos2, v * 3.0f);
    return before + after * 2.0f + ops::sum(f, {1}, true).reshape({2, 1, 1});
  }
};

TEST(RegionAttacks, ABodyReturningAViewOfAnOperandIsTracedInline) {
  const Tensor pos = Tensor::from_vector_i64({1, 5, 2, 6}, {2, 2});
  const Tensor pos2 = Tensor::from_vector_i64({0, 5, 7, 3}, {2, 2});
  const Tensor v = Tensor::from_vector(ramp(2 * 2 * 4, 0.11f, -0.2f), {2, 2, 4});
  Returning traced;
  const TraceResult tr = trace_method(traced, &Returning::forward, TraceOptions{}, pos, v, pos2);
  std::size_t calls = 0;
  for (const Node& n : tr.graph.nodes()) calls += n.op == Op::region_call;
  EXPECT_EQ(calls, 0u) << "no body whose result is its operand's storage is a region";
  EXPECT_TRUE(tr.regions.empty());
  for (const std::string mode : {"default", "max-autotune"}) {
    Returning compiled_model, eager_model;
    CompileOptions co;
    co.fullgraph = true;
    co.mode = mode;
    auto f = compile(compiled_model, &Returning::forward, co);
    expect_close(f(pos, v, pos2).to_vector(), eager_model.forward(pos, v, pos2).to_vector(),
                 "a result that is its operand, " + mode, 1e-5f);
  }
}

// Layers of two classes under one virtual method and one type_name(): a
// model mixing them (the method pointer names a virtual slot, the same for
// both classes).
struct MixedBase : nn::Module {
  Tensor w;
  explicit MixedBase(float seed) {
    w = register_parameter("w", Tensor::from_vector(ramp(16, 0.05f * seed, -0.1f), {4, 4}));
  }
  std::string type_name() const override { return "Layer"; }
  virtual Tensor forward(const Tensor& x) const = 0;
};
struct TanhLayer : MixedBase {
  using MixedBase::MixedBase;
  Tensor forward(const Tensor& x) const override { return ops::tanh(ops::matmul(x, w)); }
};
struct SigmoidLayer : MixedBase {
  using MixedBase::MixedBase;
  Tensor forward(const Tensor& x) const override { return ops::sigmoid(ops::matmul(x, w)) - x; }
};
struct Mixed : nn::Module {
  std::vector<std::shared_ptr<MixedBase>> layers;
  Mixed() {
    for (int i = 0; i < 4; ++i) {
      std::shared_ptr<MixedBase> l;
      if (i % 2)
        l = std::make_shared<SigmoidLayer>(1.0f + i);
      else
        l = std::make_shared<TanhLayer>(1.0f + i);
      layers.push_back(register_module("l" + std::to_string(i), l));
    }
  }
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const auto& l : layers) h = nn::compile_region(*l, &MixedBase::forward, h);
    return h;
  }
};

TEST(RegionAttacks, ClassesSharingAVirtualMethodAndATypeNameGetABodyEach) {
  Mixed m;
  expect_bodies_and_eager_results(m, 2, "one body per class");
}

TEST(RegionAttacks, ThreadsTracingRegionsAtOnceKeepTheirOwnBodies) {
  // Each thread its own model (other widths and depths: other bodies), a
  // compile and calls at once with the others.
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &failures] {
      try {
        const int64_t width = 4 + 4 * (t % 2);
        Stack m(1 + t, t % 2, width);
        CompileOptions co;
        co.fullgraph = true;
        co.dynamic = t >= 2;
        auto f = compile(m, &Stack::forward, co);
        for (int round = 0; round < 5; ++round) {
          Inputs eager_in = inputs(m, 1 + round % 2, 2 + round % 3, width);
          Inputs compiled_in = inputs(m, 1 + round % 2, 2 + round % 3, width);
          const auto want = m.forward(eager_in.x, eager_in.positions, eager_in.caches).to_vector();
          const auto got = f(compiled_in.x, compiled_in.positions, compiled_in.caches).to_vector();
          for (std::size_t i = 0; i < want.size(); ++i)
            if (std::fabs(want[i] - got[i]) > 1e-5f)
              throw std::runtime_error("round " + std::to_string(round) + " differs");
          for (int r = 0; r < 3; ++r)
            (void)trace_method(m, &Stack::forward, TraceOptions{}, eager_in.x, eager_in.positions, eager_in.caches);
        }
      } catch (const std::exception& e) {
        failures[static_cast<std::size_t>(t)] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[static_cast<std::size_t>(t)], "") << "thread " << t;
}

// The same layers reading their window from the member: the signature does
// not see it; NPUCACHE_CHECK_REGIONS traces every call and says so.
struct HiddenWindow : nn::Module {
  std::vector<std::shared_ptr<Windowed::Layer>> layers;
  HiddenWindow() {
    for (int i = 0; i < 4; ++i)
      layers.push_back(
          register_module("l" + std::to_string(i), std::make_shared<Windowed::Layer>(1 + i % 2, 1.0f + i)));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const auto& l : layers) h = nn::compile_region(*l, &Windowed::Layer::forward_member, h);
    return h;
  }
};

TEST(RegionAttacks, CheckingEveryCallFindsAMemberTheSignatureDoesNotSee) {
  const Tensor x = Tensor::from_vector(ramp(2 * 3 * 4, 0.07f, -0.4f), {2, 3, 4});
  struct CheckRegions {
    CheckRegions() { ::setenv("NPUCACHE_CHECK_REGIONS", "1", 1); }
    ~CheckRegions() { ::unsetenv("NPUCACHE_CHECK_REGIONS"); }
  } on;
  HiddenWindow hidden;
  expect_error<TraceError>([&] { (void)trace_method(hidden, &HiddenWindow::forward, TraceOptions{}, x); },
                           "computes another body than the first module of its signature");
  // Honest models check clean, static and dynamic, and compute as eager.
  Windowed m;
  EXPECT_EQ(trace_method(m, &Windowed::forward, TraceOptions{}, x).regions.size(), 2u);
  for (bool dynamic : {false, true}) {
    Stack s(3, 2, 8);
    Inputs in = inputs(s, 2, 3, 8), eager_in = inputs(s, 2, 3, 8);
    TraceOptions o;
    o.dynamic = dynamic;
    EXPECT_EQ(trace_method(s, &Stack::forward, o, in.x, in.positions, in.caches).regions.size(), 2u);
    CompileOptions co;
    co.fullgraph = true;
    co.dynamic = dynamic;
    auto f = compile(s, &Stack::forward, co);
    expect_close(f(in.x, in.positions, in.caches).to_vector(),
                 s.forward(eager_in.x, eager_in.positions, eager_in.caches).to_vector(), "checked", 1e-5f);
  }
}

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
