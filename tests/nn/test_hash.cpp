// The canonical graph hash: each invariance and each sensitivity.
#include <npucache/device.h>
#include <npucache/ir/hash.h>
#include <npucache/models/models.h>
#include <npucache/trace.h>

#include <gtest/gtest.h>

using namespace npucache;

namespace {

// x -> op1 -> (+ bias) with configurable pieces.
struct Spec {
  std::string x_name = "x";
  Op act = Op::relu;
  double eps = 1e-6;
  DType dtype = DType::f32;
  SymExpr batch = SymExpr::symbol("s0");
  bool swap = false;
  bool branches_reversed = false;
};

Graph build(const Spec& s) {
  Graph g;
  auto x = g.add_placeholder(PlaceholderKind::input, s.x_name, {s.dtype, {s.batch, 8}});
  auto w = g.add_placeholder(PlaceholderKind::parameter, "norm.weight", {s.dtype, {8}});
  auto n = g.add_node(Op::rmsnorm, {x, w}, Attrs{{"eps", s.eps}});
  ValueId a, b;
  if (!s.branches_reversed) {
    a = g.add_node(s.act, {n});
    b = g.add_node(Op::exp, {n});
  } else {
    b = g.add_node(Op::exp, {n});
    a = g.add_node(s.act, {n});
  }
  g.set_outputs({s.swap ? g.add_node(Op::sub, {b, a}) : g.add_node(Op::sub, {a, b})});
  return g;
}

Hash128 h(const Spec& s) { return canonical_hash(build(s)); }

std::vector<Tensor> kv_for(const models::TinyLlama& m) { return m.make_kv_cache(1); }

Hash128 stage_hash(int tp, int pp, int tp_rank, int pp_rank, bool decode = false, bool regions = true) {
  models::TinyLlamaConfig c;
  models::TinyLlama m(c, {tp, pp, tp_rank, pp_rank});
  int64_t s = decode ? 1 : 8;
  Tensor tokens = Tensor::from_vector_i64(std::vector<int64_t>(static_cast<std::size_t>(s), 3), {1, s});
  Tensor pos = Tensor::from_vector_i64(std::vector<int64_t>(static_cast<std::size_t>(s), 0), {1, s});
  TraceOptions o;
  o.method_name = decode ? "decode" : "prompt";
  o.regions = regions;
  auto method = decode ? &models::TinyLlama::decode : &models::TinyLlama::prompt;
  return canonical_hash(trace_method(m, method, o, tokens, pos, kv_for(m)).graph);
}

}  // namespace

TEST(Hash, StableAndHex) {
  Hash128 a = h({});
  EXPECT_EQ(a, h({}));
  EXPECT_EQ(a.hex().size(), 32u);
  EXPECT_NE(a.hi | a.lo, 0u);
}

TEST(Hash, InvariantToNamesSymbolNamesAndInsertionOrder) {
  Spec renamed;
  renamed.x_name = "input_ids";
  EXPECT_EQ(h({}), h(renamed));
  Spec other_symbol;
  other_symbol.batch = SymExpr::symbol("batch");
  EXPECT_EQ(h({}), h(other_symbol));
  Spec reordered;
  reordered.branches_reversed = true;
  EXPECT_EQ(h({}), h(reordered));
}

TEST(Hash, SensitiveToOpsAttributesTypesDimsAndEdges) {
  const Hash128 base = h({});
  Spec op;
  op.act = Op::sigmoid;
  Spec attr;
  attr.eps = 1e-5;
  Spec dtype;
  dtype.dtype = DType::f16;
  Spec dim;
  dim.batch = 4;
  Spec edge;
  edge.swap = true;
  for (const Spec& s : {op, attr, dtype, dim, edge}) EXPECT_NE(base, h(s));
}

TEST(Hash, InvariantToWeightValuesAndDevice) {
  models::SeedExample a;
  models::SeedExample b;
  b.linear2->weight.copy_from({5, -3});
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), true};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1}, {2, 2})};
  Hash128 ha = canonical_hash(trace_method(a, &models::SeedExample::prompt, {}, x, kv).graph);
  EXPECT_EQ(ha, canonical_hash(trace_method(b, &models::SeedExample::prompt, {}, x, kv).graph));
  DeviceGuard on3(3);
  models::SeedExample c;
  models::InputMeta x3{Tensor::from_vector({1, 2, 3, 4}, {2, 2}), true};
  std::vector<Tensor> kv3{Tensor::from_vector({1, 1, 1, 1}, {2, 2})};
  EXPECT_EQ(ha, canonical_hash(trace_method(c, &models::SeedExample::prompt, {}, x3, kv3).graph));
  // A guard value is part of the trace's signature, not of the graph's hash.
  x.is_prompt = false;
  EXPECT_EQ(ha, canonical_hash(trace_method(a, &models::SeedExample::prompt, {}, x, kv).graph));
}

TEST(Hash, TensorParallelRanksOfOneStageHashEqual) {
  EXPECT_EQ(stage_hash(2, 1, 0, 0), stage_hash(2, 1, 1, 0));
  EXPECT_EQ(stage_hash(2, 1, 0, 0, true), stage_hash(2, 1, 1, 0, true));
  EXPECT_NE(stage_hash(2, 1, 0, 0), stage_hash(1, 1, 0, 0));  // other shard sizes
  EXPECT_NE(stage_hash(2, 1, 0, 0), stage_hash(2, 1, 0, 0, true));
}

TEST(Hash, PipelineStagesFirstMiddleLastDifferMiddlesEqual) {
  Hash128 first = stage_hash(2, 4, 0, 0), mid1 = stage_hash(2, 4, 1, 1), mid2 = stage_hash(2, 4, 0, 2),
          last = stage_hash(2, 4, 1, 3);
  EXPECT_EQ(mid1, mid2);
  EXPECT_NE(first, mid1);
  EXPECT_NE(last, mid1);
  EXPECT_NE(first, last);
}

// Graph keys are part of the cache format: the hashed encoding may be
// computed faster, never differently. Values of hash encoding 3 (cache
// format 11.0.0: each operand with its storage's writes before its reader,
// the side-effecting nodes in graph order; encoding 1's, of formats 4.0.0
// to 10.0.0, were others): tiny-llama's
// traced prompt and decode, and a graph with symbolic and constant dims, a
// symbol product and a zero coefficient left out; the methods traced with
// compile regions too.
TEST(Hash, ValuesArePinned) {
  EXPECT_EQ(h({}).hex(), "501ebad258a254e00314e952db0cb708");
  Spec product;
  product.batch = SymExpr::symbol("a") * SymExpr::symbol("b") + SymExpr::symbol("a") - SymExpr::symbol("a") + 2;
  EXPECT_EQ(h(product).hex(), "38a889e13ce4303dc53633d0e5127aba");
  EXPECT_EQ(stage_hash(1, 1, 0, 0, false, false).hex(), "5adfe5e4f604002e3b7b67a7dd40752d");
  EXPECT_EQ(stage_hash(2, 2, 1, 1, true, false).hex(), "8e13a1a880fe4d389004c58736a3fc93");
  EXPECT_EQ(stage_hash(1, 1, 0, 0).hex(), "39e6ee85181b3779997018ce6230e748");
  EXPECT_EQ(stage_hash(2, 2, 1, 1, true).hex(), "895aab6ab4d00bc39b56881dae67bff6");
}
