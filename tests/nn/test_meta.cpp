// Meta tensors and parameters: shapes without memory that trace, and a
// clear MetaTensorError on every attempt to run, read or write them.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/trace.h>

#include <gtest/gtest.h>

using namespace npucache;

namespace {

struct Mlp : nn::Module {
  Mlp() {
    fc = register_module("fc", std::make_shared<nn::Linear>(1024, 4096));
    norm = register_module("norm", std::make_shared<nn::RMSNorm>(4096));
  }
  Tensor forward(const Tensor& x) { return norm->forward(ops::relu(fc->forward(x))); }
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::RMSNorm> norm;
};

template <class F>
std::string meta_error(F&& f) {
  try {
    f();
  } catch (const MetaTensorError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no MetaTensorError";
  return "";
}

bool says_not_materialised(const std::string& msg) {
  return msg.find("is a meta tensor") != std::string::npos &&
         msg.find("the weights were not materialised") != std::string::npos &&
         msg.find("build it with real weights to run it") != std::string::npos;
}

}  // namespace

TEST(Meta, ScopeMakesMetaParametersWithoutDeviceMemory) {
  Device& dev = Platform::get().device(current_device());
  const std::size_t before = dev.memory_stats().allocated;
  std::shared_ptr<Mlp> m;
  {
    nn::MetaScope scope;
    EXPECT_TRUE(nn::MetaScope::active());
    { nn::MetaScope nested; }
    EXPECT_TRUE(nn::MetaScope::active());  // nesting restores the outer scope
    m = std::make_shared<Mlp>();
  }
  EXPECT_FALSE(nn::MetaScope::active());
  EXPECT_EQ(dev.memory_stats().allocated, before);
  for (const auto& [name, t] : m->named_parameters()) {
    EXPECT_TRUE(t.is_meta()) << name;
    EXPECT_FALSE(t.is_traced());
  }
  EXPECT_EQ(m->fc->weight.dims(), (std::vector<int64_t>{4096, 1024}));
  EXPECT_EQ(m->fc->weight.device(), current_device());
  Mlp real;  // outside the scope: real parameters again
  EXPECT_FALSE(real.fc->weight.is_meta());
}

TEST(Meta, MetaParametersTraceToTheSameGraphAsRealOnes) {
  std::shared_ptr<Mlp> meta;
  {
    nn::MetaScope scope;
    meta = std::make_shared<Mlp>();
  }
  Mlp real;
  Tensor x = Tensor::from_vector(std::vector<float>(2 * 1024, 0.5f), {2, 1024});
  TraceOptions o;
  auto a = trace_method(*meta, &Mlp::forward, o, x);
  auto b = trace_method(real, &Mlp::forward, o, x);
  EXPECT_EQ(a.graph.size(), b.graph.size());
  // Meta inputs trace too (their types are all a trace needs).
  auto c = trace_method(real, &Mlp::forward, o, Tensor::meta({2, 1024}));
  EXPECT_EQ(c.graph.size(), b.graph.size());
}

TEST(Meta, RunningReadingOrWritingAMetaTensorIsAClearError) {
  std::shared_ptr<Mlp> m;
  {
    nn::MetaScope scope;
    m = std::make_shared<Mlp>();
  }
  Tensor x = Tensor::from_vector(std::vector<float>(2 * 1024, 0.5f), {2, 1024});
  std::string msg = meta_error([&] { m->forward(x); });
  EXPECT_TRUE(says_not_materialised(msg)) << msg;
  EXPECT_NE(msg.find("operand 1 is a meta tensor f32[4096, 1024]"), std::string::npos) << msg;
  msg = meta_error([&] { m->fc->weight.to_vector(); });
  EXPECT_TRUE(says_not_materialised(msg)) << msg;
  msg = meta_error([&] { m->fc->bias.copy_from(std::vector<float>(4096, 1.0f)); });
  EXPECT_TRUE(says_not_materialised(msg)) << msg;
  msg = meta_error([&] { ops::add(Tensor::meta({2}), Tensor::meta({2})); });
  EXPECT_TRUE(says_not_materialised(msg)) << msg;
}

TEST(Meta, ACompiledMethodPreparesWithMetaWeightsAndRefusesToRunThem) {
  std::shared_ptr<Mlp> m;
  {
    nn::MetaScope scope;
    m = std::make_shared<Mlp>();
  }
  CompileOptions o;
  CompilerConfig c;
  c.autotune_candidates = 2;
  c.autotune_repetitions = 1;
  c.autotune_min_time_us = 0;
  o.config = c;
  auto fast = compile(*m, &Mlp::forward, o);
  const CallStatus& s = fast.prepare(Tensor::meta({2, 1024}));
  EXPECT_EQ(s.outcome, Outcome::compiled);
  EXPECT_EQ(fast.compiles(), 1u);
  Tensor x = Tensor::from_vector(std::vector<float>(2 * 1024, 0.5f), {2, 1024});
  const std::string msg = meta_error([&] { fast(x); });
  EXPECT_TRUE(says_not_materialised(msg)) << msg;
  EXPECT_NE(msg.find("parameter 'fc.weight'"), std::string::npos) << msg;
  EXPECT_EQ(fast.compiles(), 1u);  // the prepared entry was used, not recompiled
}
