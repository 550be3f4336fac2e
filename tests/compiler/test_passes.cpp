// Each compiler pass on small graphs: what it must change and what it must
// keep.
#include <npucache/error.h>
#include <npucache/ops.h>

#include "compiler/memory_plan.h"
#include "compiler/passes.h"
#include "compiler/serialize.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace npucache;
using namespace npucache::compiler;

namespace {

int count(const Graph& g, Op op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op == op;
  return n;
}

Attrs scalar_attrs(double v) { return Attrs{{"shape", Shape{}}, {"value", v}, {"dtype", DType::f32}}; }

struct Builder {
  Graph g;
  ValueId in(Shape s, DType t = DType::f32) {
    return g.add_placeholder(PlaceholderKind::input, "x" + std::to_string(g.size()), {t, s});
  }
  ValueId param(Shape s) {
    return g.add_placeholder(PlaceholderKind::parameter, "w" + std::to_string(g.size()), {DType::f32, s});
  }
  ValueId op(Op o, std::vector<ValueId> in, Attrs a = {}) { return g.add_node(o, std::move(in), std::move(a)); }
};

}  // namespace

TEST(Decompose, RemovesCompositeOpsAndKeepsTypes) {
  Builder b;
  auto x = b.in({SymExpr::symbol("s0"), 8});
  auto w = b.param({16, 8});
  auto nw = b.param({16});
  auto y = b.op(Op::rmsnorm, {b.op(Op::silu, {b.op(Op::linear, {x, w})}), nw}, Attrs{{"eps", 1e-5}});
  b.g.set_outputs({y});
  Graph d = decompose(b.g);
  EXPECT_EQ(count(d, Op::linear) + count(d, Op::silu) + count(d, Op::rmsnorm), 0);
  EXPECT_EQ(count(d, Op::matmul), 1);
  EXPECT_EQ(d.node(d.outputs()[0]).type, b.g.node(y).type);
  EXPECT_NO_THROW(verify(d));
}

TEST(Decompose, CustomDecompositionTakesPrecedence) {
  Builder b;
  auto x = b.in({4});
  auto y = b.in({4});
  b.g.set_outputs({b.op(Op::add, {x, y})});
  DecompositionTable t;
  t[Op::add] = {"test.add_as_sub_neg",
                [](const std::vector<Tensor>& in, const Attrs&) { return in[0] - ops::neg(in[1]); }};
  Graph d = decompose(b.g, t);
  EXPECT_EQ(count(d, Op::add), 0);
  EXPECT_EQ(count(d, Op::sub), 1);
  EXPECT_EQ(count(d, Op::neg), 1);
}

TEST(Decompose, IllTypedDecompositionNamesTheNode) {
  Builder b;
  auto x = b.in({4});
  b.g.set_outputs({b.op(Op::relu, {x})});
  DecompositionTable t;
  t[Op::relu] = {"test.bad", [](const std::vector<Tensor>& in, const Attrs&) { return ops::sum(in[0], {0}); }};
  try {
    decompose(b.g, t);
    FAIL();
  } catch (const VerifyError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("node 'relu' (relu)"), std::string::npos) << m;
    EXPECT_NE(m.find("'test.bad' returned f32[] but the op's type is f32[4]"), std::string::npos) << m;
  }
}

TEST(ConstantFold, FoldsConstantArithmetic) {
  Builder b;
  auto x = b.in({4});
  auto c = b.op(Op::mul, {b.op(Op::full, {}, scalar_attrs(2)), b.op(Op::full, {}, scalar_attrs(3))});
  auto r = b.op(Op::rsqrt, {b.op(Op::full, {}, scalar_attrs(4))});
  b.g.set_outputs({b.op(Op::add, {b.op(Op::mul, {x, c}), r})});
  Graph f = eliminate_dead_code(fold_constants(b.g));
  EXPECT_EQ(count(f, Op::rsqrt), 0);
  EXPECT_EQ(count(f, Op::full), 2);
  std::vector<double> values;
  for (const auto& n : f.nodes())
    if (n.op == Op::full) values.push_back(n.attrs.get<double>("value"));
  EXPECT_EQ(values, (std::vector<double>{6.0, 0.5}));
}

// Unary ops fold through the kernels' scalar math (f32), erf among them;
// integer operands fold exactly.
TEST(ConstantFold, UnaryOpsFoldAsTheKernelsCompute) {
  Builder b;
  auto e = b.op(Op::erf, {b.op(Op::full, {}, scalar_attrs(0.5))});
  auto n = b.op(Op::neg, {b.op(Op::full, {}, Attrs{{"shape", Shape{}}, {"value", 7.0}, {"dtype", DType::i64}})});
  b.g.set_outputs({e, n});
  Graph f = eliminate_dead_code(fold_constants(b.g));
  EXPECT_EQ(count(f, Op::erf) + count(f, Op::neg), 0);
  ASSERT_EQ(f.outputs().size(), 2u);
  EXPECT_EQ(f.node(f.outputs()[0]).attrs.get<double>("value"), static_cast<double>(std::erf(0.5f)));
  EXPECT_EQ(f.node(f.outputs()[1]).attrs.get<double>("value"), -7.0);
}

// erf joins a fused chain like any elementwise op with a kernel.
TEST(Fusion, TakesEveryFusibleOp) {
  Builder b;
  auto x = b.in({4, 8});
  b.g.set_outputs({b.op(Op::mul, {b.op(Op::erf, {b.op(Op::exp, {x})}), x})});
  FusionStats st;
  Graph f = fuse(b.g, &st);
  EXPECT_EQ(count(f, Op::fused), 1);
  EXPECT_EQ(count(f, Op::erf), 0);
  EXPECT_NO_THROW(verify(f));
}

TEST(Cse, MergesDuplicatesButNotSideEffects) {
  Builder b;
  auto x = b.in({4});
  auto e1 = b.op(Op::exp, {x});
  auto e2 = b.op(Op::exp, {x});
  auto r1 = b.op(Op::bernoulli, {e1});
  auto r2 = b.op(Op::bernoulli, {e2});
  b.g.set_outputs({b.op(Op::add, {r1, r2})});
  Graph c = eliminate_common_subexpressions(b.g);
  EXPECT_EQ(count(c, Op::exp), 1);
  EXPECT_EQ(count(c, Op::bernoulli), 2);
}

// A cache updated in place between two equal reads: the reads see other
// contents and stay two (eagerly, the second sum sees the update); equal
// reads with no write between them still merge, through views too.
TEST(Cse, ReadsOnEitherSideOfAnUpdateInPlaceStayTwo) {
  Builder b;
  auto cache = b.g.add_placeholder(PlaceholderKind::buffer, "cache", {DType::f32, {2, 8, 4}});
  auto pos = b.in({2, 2}, DType::i64);
  auto v = b.in({2, 2, 4});
  auto u1 = b.op(Op::buffer_update, {cache, pos, v});
  auto before = b.op(Op::sum, {u1}, Attrs{{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
  auto before_again = b.op(Op::sum, {u1}, Attrs{{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
  auto u2 = b.op(Op::buffer_update, {cache, pos, b.op(Op::exp, {v})});
  auto after = b.op(Op::sum, {u1}, Attrs{{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
  auto view = b.op(Op::reshape, {cache}, Attrs{{"shape", std::vector<SymExpr>{2, 32}}});
  auto after_view = b.op(Op::sum, {view}, Attrs{{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
  auto after_view_again = b.op(Op::sum, {view}, Attrs{{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
  (void)u2;
  b.g.set_outputs({before, before_again, after, after_view, after_view_again});
  Graph c = eliminate_common_subexpressions(b.g);
  EXPECT_EQ(count(c, Op::buffer_update), 2);
  const auto& outs = c.outputs();
  EXPECT_EQ(outs[0], outs[1]) << "two reads with no write between them are one";
  EXPECT_NE(outs[0], outs[2]) << "a read after the update is another read";
  EXPECT_EQ(outs[3], outs[4]);
  EXPECT_EQ(count(c, Op::sum), 3);
  EXPECT_NO_THROW(verify(c));
}

// Each pass that merges, folds or moves nodes against writes in place
// (compiler/passes/storage_writes.h): a cache [2, 8, 4] updated at
// positions [2, 2] with values [2, 2, 4].
namespace {
struct Written {
  Builder b;
  ValueId pos = b.in({2, 2}, DType::i64);
  ValueId v = b.in({2, 2, 4});
  Attrs zeros{{"shape", Shape{2, 8, 4}}, {"value", 0.0}, {"dtype", DType::f32}};
  ValueId update(ValueId cache) { return b.op(Op::buffer_update, {cache, pos, v}); }
};
}  // namespace

// Two zero-filled caches of one shape, each updated: two buffers, never
// one (the K and V caches of a method that makes its own).
TEST(Cse, CachesWrittenInPlaceAreNeverMerged) {
  Written w;
  auto k = w.b.op(Op::full, {}, w.zeros);
  auto vc = w.b.op(Op::full, {}, w.zeros);
  auto zeros = w.b.op(Op::full, {}, w.zeros);
  auto zeros_again = w.b.op(Op::full, {}, w.zeros);
  w.b.g.set_outputs({w.update(k), w.update(vc), zeros, zeros_again});
  Graph c = eliminate_common_subexpressions(w.b.g);
  EXPECT_EQ(count(c, Op::full), 3) << "the two caches stay two; the two plain zeros are one";
  EXPECT_NE(c.node(c.outputs()[0]).inputs[0], c.node(c.outputs()[1]).inputs[0]);
  EXPECT_EQ(c.outputs()[2], c.outputs()[3]);
}

// A constant updated in place is no constant after (nor before: one
// storage); an unwritten one still folds.
TEST(ConstantFold, AConstantWrittenInPlaceIsNotFolded) {
  Written w;
  auto cache = w.b.op(Op::full, {}, w.zeros);
  auto u = w.update(cache);
  auto e = w.b.op(Op::exp, {cache});
  auto plain = w.b.op(Op::exp, {w.b.op(Op::full, {}, w.zeros)});
  w.b.g.set_outputs({u, e, plain});
  Graph f = eliminate_dead_code(fold_constants(w.b.g));
  EXPECT_EQ(count(f, Op::exp), 1) << "exp of the written cache stays; exp of plain zeros folds";
  EXPECT_EQ(f.node(f.outputs()[1]).op, Op::exp);
  EXPECT_EQ(f.node(f.outputs()[2]).op, Op::full);
}

// neg(cache) read before an update, used after it: fusing neg into exp's
// group would run it where exp is, after the update.
TEST(Fusion, NoMemberMovesAcrossAWriteOfWhatItReads) {
  Written w;
  auto cache = w.b.g.add_placeholder(PlaceholderKind::buffer, "cache", {DType::f32, {2, 8, 4}});
  auto y = w.b.op(Op::neg, {cache});
  auto u = w.update(cache);
  auto z = w.b.op(Op::exp, {y});
  auto x = w.b.in({2, 8, 4});
  auto chain = w.b.op(Op::exp, {w.b.op(Op::neg, {x})});  // no write between: one group
  w.b.g.set_outputs({u, z, chain});
  FusionStats stats;
  Graph f = fuse(w.b.g, &stats);
  EXPECT_EQ(stats.groups, 1) << "only neg(x) -> exp";
  EXPECT_EQ(f.node(f.outputs()[1]).op, Op::exp);
  EXPECT_EQ(f.node(f.outputs()[2]).op, Op::fused);
  // A written constant is a buffer, an input of the group, not a constant.
  Written w2;
  auto zc = w2.b.op(Op::full, {}, w2.zeros);
  auto u2 = w2.update(zc);
  auto in = w2.b.in({2, 8, 4});
  auto sum = w2.b.op(Op::exp, {w2.b.op(Op::add, {w2.b.op(Op::neg, {in}), zc})});
  w2.b.g.set_outputs({u2, sum});
  Graph f2 = fuse(w2.b.g);
  const Node& fused = f2.node(f2.outputs()[1]);
  ASSERT_EQ(fused.op, Op::fused);
  EXPECT_EQ(fused.attrs.get_int("num_consts"), 0);
  EXPECT_EQ(fused.inputs.size(), 2u) << "the input and the written zeros";
}

// matmul(q, permute(cache)) with the cache updated between the two: the
// folded matmul would read the cache where the matmul is, after the update.
TEST(FoldTransposes, NotAcrossAWriteOfTheTransposedOperand) {
  Written w;
  auto cache = w.b.g.add_placeholder(PlaceholderKind::buffer, "cache", {DType::f32, {2, 8, 4}});
  auto q = w.b.in({2, 3, 4});
  auto kt = w.b.op(Op::permute, {cache}, Attrs{{"perm", std::vector<int64_t>{0, 2, 1}}});
  auto u = w.update(cache);
  auto m = w.b.op(Op::matmul, {q, kt});
  auto kt2 = w.b.op(Op::permute, {cache}, Attrs{{"perm", std::vector<int64_t>{0, 2, 1}}});
  auto m2 = w.b.op(Op::matmul, {q, kt2});  // no write between: folded
  w.b.g.set_outputs({u, m, m2});
  Graph f = fold_transposes(w.b.g);
  EXPECT_EQ(count(f, Op::permute), 1);
  EXPECT_EQ(f.node(f.outputs()[1]).op, Op::matmul);
  EXPECT_FALSE(f.node(f.outputs()[1]).attrs.get_bool_or("trans_b", false));
  EXPECT_TRUE(f.node(f.outputs()[2]).attrs.get_bool_or("trans_b", false));
}

TEST(Dce, DropsUnusedKeepsSideEffectsAndInputs) {
  Builder b;
  auto x = b.in({4});
  auto unused_in = b.in({2});
  b.op(Op::exp, {x});                                              // dead
  b.op(Op::all_reduce, {x}, Attrs{{"group", std::string("tp")}});  // side effect
  b.g.set_outputs({b.op(Op::relu, {x})});
  Graph d = eliminate_dead_code(b.g);
  EXPECT_EQ(count(d, Op::exp), 0);
  EXPECT_EQ(count(d, Op::all_reduce), 1);
  EXPECT_EQ(d.placeholders(PlaceholderKind::input).size(), 2u);
  (void)unused_in;
}

TEST(Fusion, ChainsBecomeOneKernelAndReductionsAbsorbProducers) {
  Builder b;
  auto x = b.in({SymExpr::symbol("s0"), 64});
  auto w = b.param({64});
  auto sq = b.op(Op::mul, {x, x});
  auto ms = b.op(Op::mean, {sq}, Attrs{{"dims", std::vector<int64_t>{-1}}, {"keepdim", true}});
  auto r = b.op(Op::rsqrt, {b.op(Op::add, {ms, b.op(Op::full, {}, scalar_attrs(1e-6))})});
  auto y = b.op(Op::mul, {b.op(Op::mul, {x, r}), w});
  b.g.set_outputs({y});
  FusionStats st;
  Graph f = fuse(b.g, &st);
  EXPECT_EQ(count(f, Op::fused), 2);  // mean(x*x) | x * rsqrt(ms + eps) * w
  EXPECT_EQ(count(f, Op::mul) + count(f, Op::mean) + count(f, Op::rsqrt), 0);
  EXPECT_EQ(st.groups, 2);
  EXPECT_NO_THROW(verify(f));
}

TEST(Fusion, KeepsValuesUsedOutsideTheGroup) {
  Builder b;
  auto x = b.in({8});
  auto e = b.op(Op::exp, {x});
  auto a = b.op(Op::add, {e, x});
  auto m = b.op(Op::mul, {a, a});
  b.g.set_outputs({m, e});  // e is an output: it must be materialised
  Graph f = fuse(b.g);
  EXPECT_EQ(count(f, Op::exp), 1);
  EXPECT_EQ(count(f, Op::fused), 1);
}

TEST(Lower, ViewsAndOutputs) {
  Builder b;
  auto x = b.in({2, 8});
  auto r = b.op(Op::reshape, {b.op(Op::relu, {x})}, Attrs{{"shape", Shape{16}}});
  b.g.set_outputs({r});
  DeviceProgram p = lower(b.g, true);
  EXPECT_EQ(p.steps.size(), 1u);  // reshape is a view
  EXPECT_EQ(p.buffers[static_cast<std::size_t>(r)].kind, BufferKind::view);
  EXPECT_EQ(p.buffers[static_cast<std::size_t>(p.root(r))].kind, BufferKind::output);
  Builder c;
  c.g.set_outputs({c.op(Op::gelu, {c.in({2})})});
  EXPECT_THROW(lower(c.g, true), VerifyError);
}

TEST(Streams, BranchesSplitCommunicationStaysOnStreamZero) {
  Builder b;
  auto x = b.in({4, 4});
  auto q = b.op(Op::exp, {x});
  auto k = b.op(Op::sin, {x});
  auto v = b.op(Op::cos, {x});
  auto ar = b.op(Op::all_reduce, {b.op(Op::add, {b.op(Op::add, {q, k}), v})}, Attrs{{"group", std::string("tp")}});
  b.g.set_outputs({ar});
  DeviceProgram p = lower(b.g, true);
  assign_streams(p, false, 4);
  std::set<int> branch_streams{p.steps[0].stream, p.steps[1].stream, p.steps[2].stream};
  EXPECT_EQ(branch_streams.size(), 3u);
  EXPECT_EQ(p.steps.back().stream, 0);
  assign_streams(p, true, 4);
  for (const auto& s : p.steps) EXPECT_EQ(s.stream, 0);
  EXPECT_EQ(p.num_streams, 1);
}

TEST(MemoryPlan, ReusesMemoryOnlyBetweenOrderedBuffers) {
  Builder b;
  auto x = b.in({1024});
  ValueId v = x;
  for (int i = 0; i < 10; ++i) v = b.op(i % 2 ? Op::exp : Op::neg, {v});
  b.g.set_outputs({v});
  for (bool single : {true, false}) {
    DeviceProgram p = lower(b.g, true);
    assign_streams(p, single, 3);
    HappensBefore hb(p);
    std::vector<std::size_t> bytes(p.buffers.size(), 4096);
    MemoryPlan plan = plan_memory(p, hb, bytes);
    EXPECT_EQ(plan.sum_bytes, 9u * 4096);                                  // 9 intermediates, the last is an output
    EXPECT_LE(plan.arena_bytes, 2u * 4096) << "single stream " << single;  // a chain needs two slots
    // No two buffers that may be live together overlap.
    for (std::size_t a = 0; a < p.buffers.size(); ++a)
      for (std::size_t c = a + 1; c < p.buffers.size(); ++c) {
        if (plan.offsets[a] < 0 || plan.offsets[c] < 0 || plan.offsets[a] != plan.offsets[c]) continue;
        int pa = -1, pc = -1;
        for (std::size_t s = 0; s < p.steps.size(); ++s) {
          if (p.steps[s].result == static_cast<int>(a)) pa = static_cast<int>(s);
          if (p.steps[s].result == static_cast<int>(c)) pc = static_cast<int>(s);
        }
        // a's last reader happens before c is written (a chain: a's reader is pa + 1)
        EXPECT_TRUE(hb.before(pa + 1, pc) || pa + 1 == pc);
      }
  }
}

TEST(Serialize, RoundTripIsByteIdentical) {
  Builder b;
  auto x = b.in({SymExpr::symbol("s0"), 8});
  auto w = b.param({16, 8});
  b.g.set_outputs(
      {b.op(Op::relu, {b.op(Op::matmul, {x, b.op(Op::permute, {w}, Attrs{{"perm", std::vector<int64_t>{1, 0}}})})})});
  DeviceProgram p = lower(decompose(b.g), true);
  p.steps[1].attrs.set("tile_m", int64_t{16});
  std::string bytes = serialize_program(p);
  EXPECT_EQ(bytes, serialize_program(deserialize_program(bytes)));
  EXPECT_EQ(bytes, serialize_program(lower(decompose(b.g), true)) == bytes ? bytes : serialize_program(p));
  DeviceProgram again = lower(decompose(b.g), true);
  again.steps[1].attrs.set("tile_m", int64_t{16});
  EXPECT_EQ(serialize_program(again), bytes);  // same graph + same decisions
  EXPECT_THROW(deserialize_program(bytes.substr(0, bytes.size() / 2)), Error);
}

// A decoded program's input and output counts are what its buffers name, one
// buffer each: a count the buffers do not back (a crafted 200-million-input
// program) is refused before any runner sizes a table by it.
TEST(Serialize, CountsTheBuffersDoNotBackAreRefused) {
  Builder b;
  auto x = b.in({4, 8});
  auto y = b.in({4, 8});
  b.g.set_outputs({b.op(Op::add, {x, y})});
  const DeviceProgram good = lower(decompose(b.g), true);
  ASSERT_EQ(good.num_inputs, 2);
  EXPECT_NO_THROW(deserialize_program(serialize_program(good)));
  const auto refused = [](DeviceProgram p, const std::string& says) {
    try {
      deserialize_program(serialize_program(p));
      ADD_FAILURE() << "accepted a program that " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("invalid program"), std::string::npos) << e.what();
    }
  };
  DeviceProgram many = good;
  many.num_inputs = 200'000'000;
  refused(many, "declares 200M inputs");
  DeviceProgram unbacked = good;
  unbacked.num_inputs = 3;  // one more than the input buffers
  refused(unbacked, "has an input without a buffer");
  DeviceProgram twice = good;
  for (auto& buf : twice.buffers)
    if (buf.kind == BufferKind::input) buf.index = 0;
  refused(twice, "names input 0 twice");
  DeviceProgram outputs = good;
  outputs.num_output_buffers += 1;
  refused(outputs, "has an output without a buffer");
}
