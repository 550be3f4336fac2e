#include <npucache/error.h>
#include <npucache/ir/symbolic.h>

#include "ir/symbols.h"

#include <gtest/gtest.h>

using namespace npucache;

namespace {
using npucache::testing::s;
}  // namespace

TEST(SymExpr, CanonicalFormMakesEqualExpressionsEqual) {
  EXPECT_EQ(s("a") + s("b") * 2, SymExpr(2) * s("b") + s("a"));
  EXPECT_EQ((s("a") + 1) * (s("a") + 1), s("a") * s("a") + s("a") * 2 + 1);
  EXPECT_EQ(s("a") - s("a"), SymExpr(0));
  EXPECT_EQ(s("x") * s("y"), s("y") * s("x"));
  EXPECT_FALSE(s("a") == s("b"));
  EXPECT_EQ((s("a") * 2 + 3).str(), "2*a + 3");
  EXPECT_EQ(SymExpr(0).str(), "0");
}

TEST(SymExpr, ConstantsAndSymbols) {
  EXPECT_TRUE(SymExpr(5).is_constant());
  EXPECT_EQ(SymExpr(5).constant(), 5);
  EXPECT_FALSE(s("a").is_constant());
  EXPECT_EQ(s("a").as_symbol(), "a");
  EXPECT_FALSE((s("a") * 2).as_symbol().has_value());
  ASSERT_NE(s("a").symbol_name(), nullptr);
  EXPECT_EQ(*s("a").symbol_name(), "a");
  EXPECT_EQ((s("a") * 2).symbol_name(), nullptr);
  EXPECT_EQ((s("a") + 1).symbol_name(), nullptr);
  EXPECT_EQ(SymExpr(3).symbol_name(), nullptr);
  EXPECT_THROW(s("a").constant(), ShapeError);
  EXPECT_EQ((s("a") * s("b") + s("a")).symbols(), (std::set<std::string>{"a", "b"}));
}

TEST(SymExpr, EvaluateAndSubstitute) {
  SymExpr e = s("b") * s("s") * 4 + 2;
  EXPECT_EQ(e.evaluate({{"b", 3}, {"s", 5}}), 62);
  try {
    e.evaluate({{"b", 3}});
    FAIL() << "unknown symbol accepted";
  } catch (const ShapeError& err) {
    EXPECT_NE(std::string(err.what()).find("unknown symbol 's'"), std::string::npos) << err.what();
  }
  EXPECT_EQ(e.substitute({{"s", SymExpr(2)}}), s("b") * 8 + 2);
  EXPECT_EQ(e.substitute({{"b", s("s")}}), s("s") * s("s") * 4 + 2);
}

TEST(SymExpr, ExactDivisionForReshapeInference) {
  SymExpr numel = s("b") * s("s") * 64;
  EXPECT_EQ(numel.div_exact(SymExpr(64)), s("b") * s("s"));
  EXPECT_EQ(numel.div_exact(s("b") * 16), s("s") * 4);
  EXPECT_FALSE(numel.div_exact(SymExpr(3)).has_value());
  EXPECT_FALSE(numel.div_exact(s("c")).has_value());
  EXPECT_FALSE(numel.div_exact(s("b") + 1).has_value());  // not a single term
}

TEST(Shape, Helpers) {
  Shape sh{2, s("s0"), 4};
  EXPECT_EQ(numel(sh), s("s0") * 8);
  EXPECT_EQ(shape_str(sh), "[2, s0, 4]");
  EXPECT_THROW(concrete_dims(sh), ShapeError);
  EXPECT_EQ(evaluate_dims(sh, {{"s0", 3}}), (std::vector<int64_t>{2, 3, 4}));
}
