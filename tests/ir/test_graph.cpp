// Shape/dtype inference of the ops and the errors for bad operands.
#include <npucache/error.h>
#include <npucache/ir/graph.h>

#include "ir/symbols.h"

#include <gtest/gtest.h>

#include "support/error_message.h"

using namespace npucache;

namespace {

using npucache::testing::s;

struct G {
  Graph g;
  ValueId in(TensorType t) { return g.add_placeholder(PlaceholderKind::input, "x" + std::to_string(g.size()), t); }
  TensorType type(ValueId v) { return g.node(v).type; }
};

std::string error_of(const std::function<void()>& f) { return npucache::testing::error_message(f); }

}  // namespace

TEST(Infer, BroadcastingArithmeticAndComparisons) {
  G t;
  auto a = t.in({DType::f32, {s("b"), 1, 4}});
  auto b = t.in({DType::f32, {3, 4}});
  EXPECT_EQ(t.type(t.g.add_node(Op::add, {a, b})), (TensorType{DType::f32, {s("b"), 3, 4}}));
  EXPECT_EQ(t.type(t.g.add_node(Op::lt, {a, b})).dtype, DType::boolean);
  auto c = t.g.add_node(Op::gt, {a, b});
  EXPECT_EQ(t.type(t.g.add_node(Op::where, {c, a, b})).shape, (Shape{s("b"), 3, 4}));
  EXPECT_EQ(t.type(t.g.add_node(Op::silu, {a})), t.type(a));
}

TEST(Infer, ErrorsNameNodeOpAndShapes) {
  G t;
  auto a = t.in({DType::f32, {2, 3}});
  auto b = t.in({DType::f32, {4}});
  auto i = t.in({DType::i64, {2, 3}});
  std::string e = error_of([&] { t.g.add_node(Op::add, {a, b}); });
  EXPECT_NE(e.find("node 'add'"), std::string::npos) << e;
  EXPECT_NE(e.find("not broadcastable"), std::string::npos) << e;
  EXPECT_NE(e.find("f32[2, 3]"), std::string::npos) << e;
  EXPECT_NE(e.find("f32[4]"), std::string::npos) << e;
  e = error_of([&] { t.g.add_node(Op::mul, {a, i}); });
  EXPECT_NE(e.find("dtypes differ (f32 vs i64)"), std::string::npos) << e;
  e = error_of([&] { t.g.add_node(Op::exp, {i}); });
  EXPECT_NE(e.find("floating dtype"), std::string::npos) << e;
  e = error_of([&] { t.g.add_node(Op::matmul, {a, a}); });
  EXPECT_NE(e.find("inner dimensions differ: 3 != 2"), std::string::npos) << e;
  e = error_of([&] { t.g.add_node(Op::add, {a}); });
  EXPECT_NE(e.find("expects 2 inputs, got 1"), std::string::npos) << e;
}

TEST(Infer, LinearAlgebraAndReductions) {
  G t;
  auto x = t.in({DType::f32, {s("b"), s("s"), 8}});
  auto w = t.in({DType::f32, {16, 8}});
  auto bias = t.in({DType::f32, {16}});
  EXPECT_EQ(t.type(t.g.add_node(Op::linear, {x, w, bias})).shape, (Shape{s("b"), s("s"), 16}));
  auto m = t.in({DType::f32, {8, 5}});
  EXPECT_EQ(t.type(t.g.add_node(Op::matmul, {x, m})).shape, (Shape{s("b"), s("s"), 5}));
  EXPECT_EQ(t.type(t.g.add_node(Op::sum, {x}, Attrs{{"dims", std::vector<int64_t>{-1}}, {"keepdim", true}})).shape,
            (Shape{s("b"), s("s"), 1}));
  EXPECT_EQ(t.type(t.g.add_node(Op::mean, {x}, Attrs{{"dims", std::vector<int64_t>{0, 2}}})).shape, (Shape{s("s")}));
  auto am = t.g.add_node(Op::argmax, {x}, Attrs{{"dim", int64_t{-1}}});
  EXPECT_EQ(t.type(am), (TensorType{DType::i64, {s("b"), s("s")}}));
  auto nw = t.in({DType::f32, {8}});
  EXPECT_EQ(t.type(t.g.add_node(Op::rmsnorm, {x, nw}, Attrs{{"eps", 1e-6}})), t.type(x));
  EXPECT_THROW(t.g.add_node(Op::rmsnorm, {x, bias}, Attrs{{"eps", 1e-6}}), ShapeError);
}

TEST(Infer, AttentionRopeAndKvUpdate) {
  G t;
  auto q = t.in({DType::f32, {1, 4, s("s"), 16}});
  auto k = t.in({DType::f32, {1, 2, 64, 16}});
  auto pos = t.in({DType::i64, {1, s("s")}});
  auto a = t.g.add_node(Op::attention, {q, k, k, pos}, Attrs{{"causal", true}});
  EXPECT_EQ(t.type(a).shape, (Shape{1, 4, s("s"), 16}));
  auto bad_q = t.in({DType::f32, {1, 3, s("s"), 16}});
  EXPECT_THROW(t.g.add_node(Op::attention, {bad_q, k, k}), ShapeError);

  auto x = t.in({DType::f32, {1, s("s"), 2, 16}});
  EXPECT_EQ(t.type(t.g.add_node(Op::rope, {x, pos})), t.type(x));
  auto cache = t.in({DType::f32, {1, 64, 2, 16}});
  EXPECT_EQ(t.type(t.g.add_node(Op::buffer_update, {cache, pos, x})), t.type(cache));
  auto wrong = t.in({DType::f32, {1, s("s"), 2, 8}});
  EXPECT_THROW(t.g.add_node(Op::buffer_update, {cache, pos, wrong}), ShapeError);
}

TEST(Infer, LayoutOps) {
  G t;
  auto x = t.in({DType::f32, {s("b"), s("s"), 64}});
  auto r = t.g.add_node(Op::reshape, {x}, Attrs{{"shape", Shape{s("b"), s("s"), 4, -1}}});
  EXPECT_EQ(t.type(r).shape, (Shape{s("b"), s("s"), 4, 16}));
  auto flat = t.g.add_node(Op::reshape, {x}, Attrs{{"shape", Shape{-1}}});
  EXPECT_EQ(t.type(flat).shape, (Shape{s("b") * s("s") * 64}));
  EXPECT_THROW(t.g.add_node(Op::reshape, {x}, Attrs{{"shape", Shape{s("b"), 7, -1}}}), ShapeError);
  auto p = t.g.add_node(Op::permute, {r}, Attrs{{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  EXPECT_EQ(t.type(p).shape, (Shape{s("b"), 4, s("s"), 16}));
  EXPECT_THROW(t.g.add_node(Op::permute, {r}, Attrs{{"perm", std::vector<int64_t>{0, 0, 1, 3}}}), ShapeError);
  auto tr = t.g.add_node(Op::transpose, {x}, Attrs{{"dim0", int64_t{0}}, {"dim1", int64_t{2}}});
  EXPECT_EQ(t.type(tr).shape, (Shape{64, s("s"), s("b")}));
  auto c = t.g.add_node(Op::concat, {x, x}, Attrs{{"dim", int64_t{1}}});
  EXPECT_EQ(t.type(c).shape, (Shape{s("b"), s("s") * 2, 64}));
  auto sl = t.g.add_node(Op::slice, {x}, Attrs{{"dim", int64_t{2}}, {"bounds", Shape{8, 24}}});
  EXPECT_EQ(t.type(sl).shape, (Shape{s("b"), s("s"), 16}));
  EXPECT_THROW(t.g.add_node(Op::slice, {x}, Attrs{{"dim", int64_t{2}}, {"bounds", Shape{8, 80}}}), ShapeError);
  auto ids = t.in({DType::i64, {s("b"), s("s")}});
  auto w = t.in({DType::f32, {100, 32}});
  EXPECT_EQ(t.type(t.g.add_node(Op::embedding, {w, ids})).shape, (Shape{s("b"), s("s"), 32}));
  EXPECT_EQ(t.type(t.g.add_node(Op::cast, {ids}, Attrs{{"dtype", DType::f16}})).dtype, DType::f16);
  auto e = t.g.add_node(Op::expand, {t.in({DType::f32, {1, 64}})}, Attrs{{"shape", Shape{3, 5, 64}}});
  EXPECT_EQ(t.type(e).shape, (Shape{3, 5, 64}));
}

TEST(Infer, CommunicationConstantsAndRng) {
  G t;
  auto x = t.in({DType::f32, {2, 8}});
  EXPECT_EQ(t.type(t.g.add_node(Op::all_reduce, {x}, Attrs{{"group", std::string("tp")}})), t.type(x));
  auto ag = t.g.add_node(Op::all_gather, {x},
                         Attrs{{"group", std::string("tp")}, {"dim", int64_t{-1}}, {"size", int64_t{4}}});
  EXPECT_EQ(t.type(ag).shape, (Shape{2, 32}));
  EXPECT_THROW(t.g.add_node(Op::all_reduce, {x}, Attrs{{"group", std::string("ep")}}), ShapeError);
  EXPECT_THROW(t.g.add_node(Op::send, {x}, Attrs{{"peer", std::string("up")}}), ShapeError);
  auto gr = t.g.add_node(Op::group_rank, {}, Attrs{{"group", std::string("tp")}});
  EXPECT_EQ(t.type(gr), (TensorType{DType::i64, {}}));
  auto rv =
      t.g.add_node(Op::recv, {}, Attrs{{"shape", Shape{2, 8}}, {"dtype", DType::f32}, {"peer", std::string("prev")}});
  EXPECT_EQ(t.type(rv), t.type(x));
  auto f = t.g.add_node(Op::full, {}, Attrs{{"shape", Shape{}}, {"value", 1.5}, {"dtype", DType::f32}});
  EXPECT_EQ(t.type(f).shape, Shape{});
  EXPECT_EQ(t.type(t.g.add_node(Op::arange, {}, Attrs{{"shape", Shape{s("n")}}, {"dtype", DType::i64}})).shape,
            Shape{s("n")});
  EXPECT_EQ(t.type(t.g.add_node(Op::dropout, {x}, Attrs{{"p", 0.1}})), t.type(x));
  EXPECT_TRUE(op_info(Op::randn).rng);
  EXPECT_TRUE(op_info(Op::dropout).composite);
  EXPECT_FALSE(op_info(Op::matmul).composite);
  EXPECT_EQ(op_from_name("rmsnorm"), Op::rmsnorm);
  EXPECT_THROW(op_from_name("conv2d"), ShapeError);
}

// Attrs::with: a copy with one key set, replaced in place or inserted in
// key order, the original untouched.
TEST(Attrs, WithReplacesOrInsertsInKeyOrder) {
  const Attrs a{{"causal", true}, {"kv_len", std::vector<SymExpr>{SymExpr::symbol("s0")}}, {"scale", 0.5}};
  const Attrs replaced = a.with("kv_len", int64_t{7});
  ASSERT_EQ(replaced.items().size(), 3u);
  EXPECT_EQ(replaced.get_int("kv_len"), 7);
  EXPECT_TRUE(replaced.get_bool_or("causal", false));
  EXPECT_EQ(replaced.get_double_or("scale", 0), 0.5);
  EXPECT_TRUE(a.find("kv_len") && std::holds_alternative<std::vector<SymExpr>>(*a.find("kv_len")));
  for (const char* key : {"a", "d", "z", "causal", "scale"}) {
    Attrs want = a;
    want.set(key, int64_t{1});
    EXPECT_EQ(a.with(key, int64_t{1}), want) << key;
  }
  EXPECT_EQ(Attrs{}.with("k", 2.0), (Attrs{{"k", 2.0}}));
}
