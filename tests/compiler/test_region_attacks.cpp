// Attacks on compile regions (npucache/region.h), each a way a shared body
// could compute the wrong thing or be taken for another: a stored body
// swapped or edited, a module or tensor the body was not given, a body
// that throws, plain values, strings, lists, tied weights and classes a
// signature must tell apart, arguments sharing a storage, a body returning
// its operand, threads tracing at once, and members the signature cannot
// see (NPUCACHE_CHECK_REGIONS). Each either gets a body of its own, runs
// inline, or is refused with an error that says so; results equal eager.
#include <npucache/compile.h>
#include <npucache/error.h>
#include <npucache/ir/hash.h>
#include <npucache/module.h>
#include <npucache/ops.h>
#include <npucache/region.h>
#include <npucache/trace.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "compiler/compiled_graph.h"
#include "compiler/passes.h"
#include "compiler/region_stack.h"
#include "compiler/serialize.h"
#include "nn/detail/trace_state.h"
#include "support/expect_close.h"
#include "support/expect_error.h"
#include "support/small_models.h"

using namespace npucache;
using namespace npucache::region_stack;
using npucache::testing::expect_error;
using testing_support::expect_close;
using testing_support::ramp;

namespace region_attacks {

// region_stack's, not another test file's of this unity batch.
using region_stack::Block;

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

// A 4x4 weight of its own for each seed.
Tensor weight(float seed) { return Tensor::from_vector(ramp(16, 0.05f * seed, -0.1f), {4, 4}); }

// A [2, 8, 4] cache of its own for each seed.
Tensor cache(float seed) { return Tensor::from_vector(ramp(2 * 8 * 4, 0.1f * seed, -0.3f), {2, 8, 4}); }

// A layer with a weight `w` of its seed.
struct Weighted : nn::Module {
  Tensor w;
  explicit Weighted(float seed) { w = register_parameter("w", weight(seed)); }
};

// A model of the layers it is given, registered as l0, l1, ...
template <class L>
struct Layers : nn::Module {
  std::vector<std::shared_ptr<L>> l;
  explicit Layers(std::vector<std::shared_ptr<L>> layers) {
    for (std::size_t i = 0; i < layers.size(); ++i) l.push_back(register_module("l" + std::to_string(i), layers[i]));
  }
};

// One layer of L per seed.
template <class L>
std::vector<std::shared_ptr<L>> seeded(std::initializer_list<float> seeds) {
  std::vector<std::shared_ptr<L>> out;
  for (float s : seeds) out.push_back(std::make_shared<L>(s));
  return out;
}

}  // namespace attacks

using attacks::Layers;
using attacks::seeded;
using attacks::Weighted;

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
struct WindowLayer : Weighted {
  int64_t window;
  WindowLayer(int64_t win, float seed) : Weighted(seed), window(win) {}
  Tensor forward(const Tensor& x, int64_t win) const {
    return ops::tanh(ops::matmul(x, w)) + ops::sum(x.slice(1, 0, win), {1}, true);
  }
  Tensor forward_member(const Tensor& x) const { return forward(x, window); }
};
// Windows 1, 2, 1, 2.
std::vector<std::shared_ptr<WindowLayer>> windows() {
  std::vector<std::shared_ptr<WindowLayer>> out;
  for (int i = 0; i < 4; ++i) out.push_back(std::make_shared<WindowLayer>(1 + i % 2, 1.0f + static_cast<float>(i)));
  return out;
}
struct Windowed : Layers<WindowLayer> {
  Windowed() : Layers(windows()) {}
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const auto& layer : l) h = nn::compile_region(*layer, &WindowLayer::forward, h, layer->window);
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
struct WordLayer : Weighted {
  using Weighted::Weighted;
  Tensor forward(const Tensor& x, const std::vector<std::string>& words) const {
    Tensor h = x;
    for (const auto& word : words)
      h = !word.empty() && word.back() == 'b' ? ops::sigmoid(ops::matmul(h, w)) : ops::tanh(ops::matmul(h, w));
    return h;
  }
  Tensor forward_pair(const Tensor& x, const std::string& a, const std::string& b) const { return forward(x, {a, b}); }
};
struct Worded : Layers<WordLayer> {
  Worded() : Layers(seeded<WordLayer>({1.0f, 2.0f, 3.0f, 4.0f})) {}
  Tensor forward(const Tensor& x) {
    Tensor h = nn::compile_region(*l[0], &WordLayer::forward, x, std::vector<std::string>{"a", "b"});
    h = nn::compile_region(*l[1], &WordLayer::forward, h, std::vector<std::string>{"a'|varg1[1]='b"});
    h = nn::compile_region(*l[2], &WordLayer::forward_pair, h, std::string("x'|varg2='b"), std::string("z"));
    return nn::compile_region(*l[3], &WordLayer::forward_pair, h, std::string("x"), std::string("b'|varg2='z"));
  }
};

TEST(RegionAttacks, WordsHoldingTheSignaturesSeparatorsGetABodyEach) {
  Worded m;
  expect_bodies_and_eager_results(m, 4, "four signatures, each its own words");
}

// Lists of lists: [[], []] and [[]] flatten to no element either way; the
// signature holds each list's length, so they are two bodies.
struct ListLayer : Weighted {
  using Weighted::Weighted;
  Tensor forward(const Tensor& x, const std::vector<std::vector<int64_t>>& lists) const {
    Tensor h = x;
    for (std::size_t i = 0; i < lists.size(); ++i) h = ops::tanh(ops::matmul(h, w));
    return h;
  }
};
struct Nested : Layers<ListLayer> {
  Nested() : Layers(seeded<ListLayer>({1.0f, 2.0f})) {}
  Tensor forward(const Tensor& x) {
    Tensor h = nn::compile_region(*l[0], &ListLayer::forward, x, std::vector<std::vector<int64_t>>{{}, {}});
    return nn::compile_region(*l[1], &ListLayer::forward, h, std::vector<std::vector<int64_t>>{{}});
  }
};

TEST(RegionAttacks, ListsOfOtherLengthsGetABodyEach) {
  Nested m;
  expect_bodies_and_eager_results(m, 2, "two lists and one");
}

// Tied weights: a layer whose two matrices are one tensor, then one of the
// same class whose two are two. The tied body reads one placeholder; the
// untied call must not be recorded with it.
struct TiedLayer : nn::Module {
  Tensor a, b;
  TiedLayer(float seed, bool tie) {
    a = register_parameter("a", attacks::weight(seed));
    b = register_parameter("b", tie ? a : Tensor::from_vector(ramp(16, -0.03f * seed, 0.2f), {4, 4}));
  }
  Tensor forward(const Tensor& x) const { return ops::tanh(ops::matmul(ops::tanh(ops::matmul(x, a)), b)); }
};
struct Tied : Layers<TiedLayer> {
  Tied()
      : Layers({std::make_shared<TiedLayer>(1.0f, true), std::make_shared<TiedLayer>(2.0f, false),
                std::make_shared<TiedLayer>(3.0f, true)}) {}
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const auto& layer : l) h = nn::compile_region(*layer, &TiedLayer::forward, h);
    return h;
  }
};

TEST(RegionAttacks, TiedAndUntiedModulesOfOneClassGetABodyEach) {
  Tied m;
  expect_bodies_and_eager_results(m, 2, "tied, untied, tied");
}

// A layer with a cache of its seed beside its weight.
struct CachedLayer : Weighted {
  Tensor cache;
  explicit CachedLayer(float seed) : Weighted(seed) { cache = register_buffer("cache", attacks::cache(seed)); }
  // `a` updated in place at `pos`, `b` read.
  Tensor update_and_read(const Tensor& a, const Tensor& pos, const Tensor& v, const Tensor& b) const {
    ops::buffer_update(a, pos, ops::tanh(ops::matmul(v, w)));
    return ops::sum(b, {1}, true);
  }
  Tensor update(const Tensor& c, const Tensor& pos, const Tensor& v) const {
    return ops::buffer_update(c, pos, ops::tanh(ops::matmul(v, w)));
  }
  Tensor flat(const Tensor& x) const { return x.reshape({2, 32}); }
};

// A body that updates one argument in place and reads another, called
// with one storage as both: its cache twice, or its cache and a view of
// it. In the body's program the two are operands of their own, so the
// update and the read would be ordered by nothing once linked onto one
// buffer; such a call is traced inline instead, as with regions off.
struct Aliased : Layers<CachedLayer> {
  Aliased() : Layers(seeded<CachedLayer>({1.0f, 2.0f, 3.0f, 4.0f})) {}
  Tensor forward(const Tensor& pos, const Tensor& v) {
    const auto f = &CachedLayer::update_and_read;
    Tensor h = nn::compile_region(*l[0], f, l[0]->cache, pos, v, l[0]->cache);
    h = h + nn::compile_region(*l[1], f, l[1]->cache, pos, v, l[1]->cache.reshape({2, 32}).reshape({2, 8, 4}));
    // Its own cache as the argument read, another layer's as the one
    // updated: the body reads its module's cache through the argument.
    h = h + nn::compile_region(*l[2], f, l[3]->cache, pos, v, l[2]->cache);
    // Two storages, as the body expects: a region call.
    return h + nn::compile_region(*l[3], f, l[1]->cache, pos, v, l[0]->cache);
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
    expect_close(compiled_model.l[1]->cache.to_vector(), eager_model.l[1]->cache.to_vector(), "l1's cache, " + mode,
                 1e-5f);
  }
}

// A body whose result is one of its operands or a view of one: the
// cache it updated in place and returns, a reshape of its argument. To
// the calling program a region's result is a buffer of its own, so the
// caller's later update of that cache and its reads of the result would
// be ordered by nothing; such a body is traced inline.
struct Returning : Layers<CachedLayer> {
  Returning() : Layers(seeded<CachedLayer>({1.0f, 2.0f})) {}
  Tensor forward(const Tensor& pos, const Tensor& v, const Tensor& pos2) {
    const Tensor h = nn::compile_region(*l[0], &CachedLayer::update, l[0]->cache, pos, v);
    const Tensor before = ops::sum(h, {1}, true);
    ops::buffer_update(l[0]->cache, pos2, v);  // the result is the cache: it sees this update
    const Tensor after = ops::sum(h, {1}, true);
    const Tensor f = nn::compile_region(*l[1], &CachedLayer::flat, l[1]->cache);
    ops::buffer_update(l[1]->cache, pos2, v * 3.0f);
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
struct MixedBase : Weighted {
  using Weighted::Weighted;
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
std::vector<std::shared_ptr<MixedBase>> mixed() {
  std::vector<std::shared_ptr<MixedBase>> out;
  for (int i = 0; i < 4; ++i) {
    const float seed = 1.0f + static_cast<float>(i);
    if (i % 2)
      out.push_back(std::make_shared<SigmoidLayer>(seed));
    else
      out.push_back(std::make_shared<TanhLayer>(seed));
  }
  return out;
}
struct Mixed : Layers<MixedBase> {
  Mixed() : Layers(mixed()) {}
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const auto& layer : l) h = nn::compile_region(*layer, &MixedBase::forward, h);
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
struct HiddenWindow : Layers<WindowLayer> {
  HiddenWindow() : Layers(windows()) {}
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const auto& layer : l) h = nn::compile_region(*layer, &WindowLayer::forward_member, h);
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

}  // namespace region_attacks
