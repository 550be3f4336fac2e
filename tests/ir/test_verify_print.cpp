#include <npucache/error.h>
#include <npucache/ir/graph.h>

#include <gtest/gtest.h>

using namespace npucache;

namespace {
Graph small_graph() {
  Graph g;
  auto x = g.add_placeholder(PlaceholderKind::input, "x.data", {DType::f32, {SymExpr::symbol("s0"), 2}});
  auto w = g.add_placeholder(PlaceholderKind::parameter, "linear2.weight", {DType::f32, {1, 2}});
  auto b = g.add_placeholder(PlaceholderKind::parameter, "linear2.bias", {DType::f32, {1}});
  auto y = g.add_node(Op::linear, {x, w, b});
  g.set_outputs({g.add_node(Op::relu, {y})});
  return g;
}
}  // namespace

TEST(Verify, AcceptsWellTypedGraph) { EXPECT_NO_THROW(verify(small_graph())); }

TEST(Verify, RejectsWrongRecordedTypeNamingNodeOpAndTypes) {
  Graph g = small_graph();
  g.mutable_nodes()[3].type.shape[1] = 5;  // linear's output
  try {
    verify(g);
    FAIL() << "ill-typed graph accepted";
  } catch (const VerifyError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("node 'linear' (linear)"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[s0, 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[s0, 1]"), std::string::npos) << m;
  }
}

TEST(Verify, RejectsOperandMismatchAndBadEdges) {
  Graph g = small_graph();
  g.mutable_nodes()[1].type = {DType::f32, {1, 3}};  // weight no longer matches x
  try {
    verify(g);
    FAIL();
  } catch (const VerifyError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("node 'linear' (linear)"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[1, 3]"), std::string::npos) << m;
  }
  Graph h = small_graph();
  h.mutable_nodes()[3].inputs[0] = 4;  // a later node
  EXPECT_THROW(verify(h), VerifyError);
  Graph none;
  none.add_placeholder(PlaceholderKind::input, "x", {DType::f32, {2}});
  EXPECT_THROW(verify(none), VerifyError);  // no outputs
}

TEST(Printer, FxLikeTextOneLinePerNode) {
  std::string text = print_graph(small_graph());
  EXPECT_EQ(text,
            "graph(\n"
            "    %x_data: f32[s0, 2] input 'x.data',\n"
            "    %linear2_weight: f32[1, 2] parameter 'linear2.weight',\n"
            "    %linear2_bias: f32[1] parameter 'linear2.bias'):\n"
            "  %linear = linear(%x_data, %linear2_weight, %linear2_bias) : f32[s0, 1]\n"
            "  %relu = relu(%linear) : f32[s0, 1]\n"
            "  return (%relu)\n");
}
