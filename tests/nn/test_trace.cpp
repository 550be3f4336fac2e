#include <npucache/error.h>
#include <npucache/models/models.h>
#include <npucache/ops.h>
#include <npucache/trace.h>

#include <gtest/gtest.h>

#include "support/error_message.h"

using namespace npucache;

namespace {

struct NoVisit {
  Tensor t;
};

struct Toy : nn::Module {
  Toy() { w = register_parameter("w", Tensor::from_vector({1, 2, 3, 4}, {2, 2})); }
  Tensor mm(const Tensor& x) { return ops::matmul(x, w); }
  Tensor branchy(const Tensor& x) {
    if (ops::sum(x, {0, 1}).item() > 0) return x;  // data-dependent control flow
    return -x;
  }
  Tensor no_visit(const NoVisit& n) { return n.t; }
  std::vector<Tensor> nothing(const Tensor&) { return {}; }
  Tensor captured(const Tensor& x) { return x + Tensor::from_vector({1, 1}, {2}); }
  Tensor reshaped(const Tensor& x) { return x.reshape({x.size(0) * x.size(1)}); }
  Tensor w;
};

std::string message(const std::function<void()>& f) { return npucache::testing::error_message(f); }

}  // namespace

TEST(Trace, SeedExampleStructuredInputsAndGuards) {
  models::SeedExample m;
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}), true};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1, 1, 1}, {3, 2})};
  TraceOptions o;
  o.method_name = "prompt";
  o.arg_names = {"x", "kv"};
  TraceResult r = trace_method(m, &models::SeedExample::prompt, o, x, kv);
  EXPECT_EQ(r.name, "Model.prompt(x, kv)");
  ASSERT_EQ(r.signature.inputs.size(), 2u);
  EXPECT_EQ(r.signature.inputs[0].path, "x.data");
  EXPECT_EQ(r.signature.inputs[1].path, "kv[0]");
  ASSERT_EQ(r.signature.guards.size(), 1u);
  EXPECT_EQ(r.signature.guards[0].path, "x.is_prompt");
  EXPECT_EQ(r.signature.guards[0].value, "true");
  // batch (3) stays symbolic; the feature dim is specialised by the weight.
  EXPECT_EQ(type_str(r.signature.inputs[0].type), "f32[s0, 2]");
  EXPECT_EQ(type_str(r.signature.inputs[1].type), "f32[s0, 2]");
  // Parameters are bound by name; only linear2 is used.
  std::vector<std::string> params;
  for (ValueId v : r.graph.placeholders(PlaceholderKind::parameter)) params.push_back(r.graph.node(v).target);
  EXPECT_EQ(params, (std::vector<std::string>{"linear2.weight", "linear2.bias"}));
  EXPECT_NO_THROW(verify(r.graph));
  EXPECT_NE(print_graph(r.graph).find("linear("), std::string::npos);
  // Tracing ran no kernel and left the module usable eagerly.
  EXPECT_EQ(m.prompt(x, kv).to_vector(), (std::vector<float>{7, 11, 15}));
}

TEST(Trace, SignatureBindsAndRejectsMismatches) {
  models::SeedExample m;
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}), true};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1, 1, 1}, {3, 2})};
  TraceResult r = trace_method(m, &models::SeedExample::prompt, {}, x, kv);
  auto call = [](int64_t b0, int64_t b1, const std::string& guard) {
    return std::make_pair(std::vector<std::pair<std::string, TensorType>>{{"arg0.data", {DType::f32, {b0, 2}}},
                                                                          {"arg1[0]", {DType::f32, {b1, 2}}}},
                          std::vector<GuardSpec>{{"arg0.is_prompt", guard}});
  };
  auto [t1, g1] = call(5, 5, "true");
  EXPECT_EQ(r.signature.bind(t1, g1).at("s0"), 5);
  auto [t2, g2] = call(5, 4, "true");
  EXPECT_NE(message([&] { r.signature.bind(t2, g2); }).find("requires it to equal s0"), std::string::npos);
  auto [t3, g3] = call(5, 5, "false");
  EXPECT_NE(message([&] { r.signature.bind(t3, g3); }).find("guard failed: 'arg0.is_prompt'"), std::string::npos);
}

TEST(Trace, StaticTraceHasConcreteShapes) {
  models::SeedExample m;
  models::InputMeta x{Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}), false};
  std::vector<Tensor> kv{Tensor::from_vector({1, 1, 1, 1, 1, 1}, {3, 2})};
  TraceOptions o;
  o.dynamic = false;
  TraceResult r = trace_method(m, &models::SeedExample::decode, o, x, kv);
  EXPECT_EQ(type_str(r.signature.inputs[0].type), "f32[3, 2]");
}

TEST(Trace, SymbolicReshape) {
  Toy t;
  TraceResult r = trace_method(t, &Toy::reshaped, {}, Tensor::from_vector(std::vector<float>(12), {3, 4}));
  EXPECT_EQ(type_str(r.graph.node(r.graph.outputs()[0]).type), "f32[s0*s1]");
}

TEST(Trace, BadInputsAreClearErrors) {
  Toy t;
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  std::string m = message([&] { trace_method(t, &Toy::branchy, {}, x); });
  EXPECT_NE(m.find("data-dependent control flow"), std::string::npos) << m;
  m = message([&] { trace_method(t, &Toy::no_visit, {}, NoVisit{x}); });
  EXPECT_NE(m.find("argument 'arg0' has type"), std::string::npos) << m;
  EXPECT_NE(m.find("NoVisit'"), std::string::npos) << m;
  EXPECT_NE(m.find("visit"), std::string::npos) << m;
  m = message([&] { trace_method(t, &Toy::nothing, {}, x); });
  EXPECT_NE(m.find("returns no tensor"), std::string::npos) << m;
  m = message([&] { trace_method(t, &Toy::captured, {}, x); });
  EXPECT_NE(m.find("neither an input of the traced method nor a parameter"), std::string::npos) << m;
  m = message([&] { trace_method(t, &Toy::mm, {}, Tensor::from_vector({1, 2, 3}, {1, 3})); });
  EXPECT_NE(m.find("inner dimensions differ"), std::string::npos) << m;
  EXPECT_NE(m.find("matmul"), std::string::npos) << m;
  // The failed traces left no trace active: eager work still runs.
  EXPECT_EQ(t.mm(x).to_vector(), (std::vector<float>{7, 10, 15, 22}));
}

TEST(Trace, RngOpsAreRecorded) {
  struct Noisy : nn::Module {
    Tensor f(const Tensor& x) { return ops::dropout(x, 0.5) + ops::randn(x.shape()); }
  } n;
  TraceResult r = trace_method(n, &Noisy::f, {}, Tensor::from_vector({1, 2, 3, 4}, {2, 2}));
  int rng = 0;
  for (const auto& node : r.graph.nodes()) rng += op_info(node.op).rng;
  EXPECT_EQ(rng, 2);
}
