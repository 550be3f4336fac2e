// Two computations never share a key (format 11.0.0). A read of a cache
// before its update in place and the same read after it are two
// computations: the canonical hash counts each operand's writes before its
// reader (ir/storage_writes.h), so their graph keys, their compile
// regions and their stored programs differ -- before, a program compiled
// for one was served to the other, and a method calling both as regions
// ran one body twice, with or without a cache. So are two random draws,
// sends or receives in either order (the hash follows the order they
// run). Custom decomposition tables whose names joined alike
// ("gelu:a,silu:b" from one name holding ',') key apart, as do key fields
// holding the separator, and graph-break pieces reading parameters whose
// names joined alike ("a|b", "c" and "a", "b|c").
#include <npucache/cache.h>
#include <npucache/compile.h>
#include <npucache/ir/hash.h>
#include <npucache/module.h>
#include <npucache/ops.h>
#include <npucache/region.h>
#include <npucache/trace.h>

#include "format/keys.h"
#include "format/names.h"
#include "storage/store.h"
#include "support/expect_close.h"
#include "support/temp_dir_test.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

using namespace npucache;
using testing_support::expect_close;

namespace {

// A layer's two orders of one read and one update of its cache.
struct Order : nn::Module {
  std::string type_name() const override { return "Order"; }
  Tensor pre(const Tensor& x, const Tensor& positions, const Tensor& cache) const {
    Tensor r = cache * 2.0f;
    ops::buffer_update(cache, positions, x);
    return r;
  }
  Tensor post(const Tensor& x, const Tensor& positions, const Tensor& cache) const {
    ops::buffer_update(cache, positions, x);
    return cache * 2.0f;
  }
  // Two updates of one cache, in either order.
  Tensor ab(const Tensor& x, const Tensor& positions, const Tensor& cache) const {
    ops::buffer_update(cache, positions, x);
    ops::buffer_update(cache, positions, x * 3.0f);
    return cache + 0.0f;
  }
  Tensor ba(const Tensor& x, const Tensor& positions, const Tensor& cache) const {
    ops::buffer_update(cache, positions, x * 3.0f);
    ops::buffer_update(cache, positions, x);
    return cache + 0.0f;
  }
};

// Two layers of one shape: the first reads before it updates, the second after.
struct TwoOrders : nn::Module {
  std::shared_ptr<Order> a = register_module("a", std::make_shared<Order>());
  std::shared_ptr<Order> b = register_module("b", std::make_shared<Order>());
  std::string type_name() const override { return "TwoOrders"; }
  Tensor forward(const Tensor& x, const Tensor& positions, const Tensor& c0, const Tensor& c1) {
    Tensor p = nn::compile_region(*a, &Order::pre, x, positions, c0);
    Tensor q = nn::compile_region(*b, &Order::post, x, positions, c1);
    return p + q * 10.0f;
  }
};

struct In {
  Tensor x = Tensor::from_vector({5, 5, 5, 5}, {1, 2, 2});
  Tensor positions = Tensor::from_vector_i64({1, 3}, {1, 2});
  Tensor cache = Tensor::from_vector(std::vector<float>(16, 1.0f), {1, 8, 2});
  Tensor cache2 = Tensor::from_vector(std::vector<float>(16, 1.0f), {1, 8, 2});
};

using Method = Tensor (Order::*)(const Tensor&, const Tensor&, const Tensor&) const;

std::vector<float> eager(Order& m, Method f) {
  In in;
  return (m.*f)(in.x, in.positions, in.cache).to_vector();
}

Hash128 hash_of(Order& m, Method f) {
  In in;
  TraceOptions o;
  o.dynamic = false;
  return canonical_hash(trace_method(m, f, o, in.x, in.positions, in.cache).graph);
}

// A compile region updating its cache through a view of it (a send's
// result), read by the caller before the call or after it.
struct ViaSend : nn::Module {
  std::string type_name() const override { return "ViaSend"; }
  Tensor body(const Tensor& x, const Tensor& positions, const Tensor& cache) const {
    ops::buffer_update(ops::send(cache, "next"), positions, x);
    return x * 1.0f;
  }
};
struct CallsViaSend : nn::Module {
  std::shared_ptr<ViaSend> layer = register_module("layer", std::make_shared<ViaSend>());
  std::string type_name() const override { return "CallsViaSend"; }
  Tensor pre(const Tensor& x, const Tensor& positions, const Tensor& cache) {
    Tensor r = cache * 3.0f;
    return r + ops::sum(nn::compile_region(*layer, &ViaSend::body, x, positions, cache), {0, 1, 2});
  }
  Tensor post(const Tensor& x, const Tensor& positions, const Tensor& cache) {
    Tensor y = nn::compile_region(*layer, &ViaSend::body, x, positions, cache);
    return cache * 3.0f + ops::sum(y, {0, 1, 2});
  }
};

// Two draws, two sends, two receives, each in either order.
struct Ordered : nn::Module {
  std::string type_name() const override { return "Ordered"; }
  Tensor draws_ab(const Tensor& x) const {
    const Tensor a = ops::randn({1, 4}), b = ops::randn({1, 4});
    return x + a - b;
  }
  Tensor draws_ba(const Tensor& x) const {
    const Tensor a = ops::randn({1, 4}), b = ops::randn({1, 4});
    return x + b - a;
  }
  Tensor recvs_ab(const Tensor& x) const {
    const Tensor a = ops::recv({1, 4}, DType::f32, "prev"), b = ops::recv({1, 4}, DType::f32, "prev");
    return x + a - b;
  }
  Tensor recvs_ba(const Tensor& x) const {
    const Tensor a = ops::recv({1, 4}, DType::f32, "prev"), b = ops::recv({1, 4}, DType::f32, "prev");
    return x + b - a;
  }
  Tensor sends_ab(const Tensor& x) const {
    const Tensor a = ops::send(x, "next"), b = ops::send(x * 2.0f, "next");
    return a + b;
  }
  Tensor sends_ba(const Tensor& x) const {
    const Tensor b = ops::send(x * 2.0f, "next"), a = ops::send(x, "next");
    return a + b;
  }
};

Hash128 hash_of(Ordered& m, Tensor (Ordered::*f)(const Tensor&) const) {
  TraceOptions o;
  o.dynamic = false;
  return canonical_hash(trace_method(m, f, o, Tensor::from_vector({1, 2, 3, 4}, {1, 4})).graph);
}

// Three layers, each a host read after it (the pieces after the first
// have one structure): the second reads parameters "a|b" and "c", the
// third "a" and "b|c".
struct Piped : nn::Module {
  std::vector<Tensor> w;
  Piped() {
    const char* names[6] = {"p", "q", "a|b", "c", "a", "b|c"};
    for (int i = 0; i < 6; ++i) {
      std::vector<float> d(16, 0.0f);
      for (int k = 0; k < 4; ++k) d[static_cast<std::size_t>(k * 5)] = 0.1f * static_cast<float>(i + 1);
      w.push_back(register_parameter(names[i], Tensor::from_vector(d, {4, 4})));
    }
  }
  std::string type_name() const override { return "Piped"; }
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (std::size_t i = 0; i < w.size(); i += 2) {
      h = ops::tanh(ops::matmul(ops::matmul(h, w[i]), w[i + 1]));
      if (ops::sum(h, {0, 1}).item() > 1e30f) break;  // never taken: every layer runs
    }
    return h;
  }
};

class KeyCollisions : public testing_support::TempDirTest {
 protected:
  KeyCollisions() : TempDirTest("keys") {}
  CacheOptions options(const std::string& method) const {
    CacheOptions o;
    o.cache_dir = dir.string();
    o.compile.method_name = method;
    o.compile.config = CompilerConfig{};
    o.compile.config->autotune_candidates = 1;
    return o;
  }
  // The method cached under `name` in the directory, run once: its result.
  std::vector<float> cached(Order& m, Method f, const std::string& name) {
    auto fn = cache_compile(m, f, options(name));
    In in;
    return fn(in.x, in.positions, in.cache).to_vector();
  }
};

}  // namespace

TEST(WriteOrder, AReadBeforeAnUpdateAndOneAfterItHashApart) {
  Order m;
  ASSERT_NE(eager(m, &Order::pre), eager(m, &Order::post));
  EXPECT_NE(hash_of(m, &Order::pre), hash_of(m, &Order::post));
  ASSERT_NE(eager(m, &Order::ab), eager(m, &Order::ba));
  EXPECT_NE(hash_of(m, &Order::ab), hash_of(m, &Order::ba));
  EXPECT_EQ(hash_of(m, &Order::pre), hash_of(m, &Order::pre)) << "the hash is a function of the computation";
}

// The region declares the update it makes through the view (mutates), so
// the caller's read before the call and the one after it hash apart.
TEST(WriteOrder, AnUpdateThroughAViewInARegionOrdersTheCallersReads) {
  CallsViaSend m;
  In in;
  TraceOptions o;
  o.dynamic = false;
  const auto pre = trace_method(m, &CallsViaSend::pre, o, in.x, in.positions, in.cache);
  const auto post = trace_method(m, &CallsViaSend::post, o, in.x, in.positions, in.cache);
  ASSERT_EQ(pre.regions.size(), 1u);
  EXPECT_NE(canonical_hash(pre.graph), canonical_hash(post.graph));
}

TEST(WriteOrder, DrawsSendsAndReceivesInAnotherOrderHashApart) {
  Ordered m;
  EXPECT_NE(hash_of(m, &Ordered::draws_ab), hash_of(m, &Ordered::draws_ba));
  EXPECT_NE(hash_of(m, &Ordered::recvs_ab), hash_of(m, &Ordered::recvs_ba));
  EXPECT_NE(hash_of(m, &Ordered::sends_ab), hash_of(m, &Ordered::sends_ba));
  EXPECT_EQ(hash_of(m, &Ordered::draws_ab), hash_of(m, &Ordered::draws_ab));
}

// What `explain` shows for these misses: the read that moved across an
// update, and the draw that runs in another place.
TEST(WriteOrder, TheFirstDifferenceNamesTheWriteOrTheOrderThatChanged) {
  Order m;
  In in;
  TraceOptions o;
  o.dynamic = false;
  const auto pre = trace_method(m, &Order::pre, o, in.x, in.positions, in.cache).graph;
  const auto post = trace_method(m, &Order::post, o, in.x, in.positions, in.cache).graph;
  const std::string moved = first_difference(pre, post);
  EXPECT_NE(moved.find("is read after 0 write(s) in place stored, after 1 now"), std::string::npos) << moved;
  EXPECT_EQ(first_difference(pre, pre), "");
  Ordered d;
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 4});
  const auto ab = trace_method(d, &Ordered::draws_ab, o, x).graph;
  const auto ba = trace_method(d, &Ordered::draws_ba, o, x).graph;
  const std::string order = first_difference(ab, ba);
  EXPECT_NE(order.find("is number 1 of the 2 side-effecting nodes"), std::string::npos) << order;
  EXPECT_NE(order.find("number 2 stored"), std::string::npos) << order;
  EXPECT_EQ(first_difference(ab, ab), "");
}

// Graph-break pieces of one structure are told apart by the parameters
// they read, whatever those names hold: each runs with its own.
TEST(PieceKeys, PiecesReadingParametersWhoseNamesJoinedAlikeRunTheirOwn) {
  Piped m;
  CompileOptions co;
  auto f = compile(m, &Piped::forward, co);
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 4});
  const auto want = m.forward(x).to_vector();
  expect_close(f(x).to_vector(), want, "result", 1e-5f);
  expect_close(f(x).to_vector(), want, "second call", 1e-5f);
}

// Without a cache: the two bodies are two regions, each compiled and run.
TEST(WriteOrder, RegionsReadingBeforeAndAfterAnUpdateAreTwoRegions) {
  for (const bool regions : {true, false}) {
    SCOPED_TRACE(regions ? "regions" : "inline");
    TwoOrders m;
    CompileOptions co;
    co.regions = regions;
    co.fullgraph = true;
    auto f = compile(m, &TwoOrders::forward, co);
    In e, c;
    const auto want = m.forward(e.x, e.positions, e.cache, e.cache2).to_vector();
    const auto got = f(c.x, c.positions, c.cache, c.cache2).to_vector();
    expect_close(got, want, "result", 1e-6f);
    expect_close(c.cache.to_vector(), e.cache.to_vector(), "first cache", 1e-6f);
    expect_close(c.cache2.to_vector(), e.cache2.to_vector(), "second cache", 1e-6f);
  }
}

// A code edit (same method name, same directory) from one order to the
// other, and two methods of one model, one of each order: each runs its own
// program.
TEST_F(KeyCollisions, AProgramOfOneWriteOrderIsNeverServedToTheOther) {
  Order m;
  EXPECT_EQ(cached(m, &Order::pre, "run"), eager(m, &Order::pre));
  EXPECT_EQ(cached(m, &Order::post, "run"), eager(m, &Order::post)) << "served the other order's program";
  EXPECT_EQ(cached(m, &Order::ab, "prefill"), eager(m, &Order::ab));
  EXPECT_EQ(cached(m, &Order::ba, "decode"), eager(m, &Order::ba)) << "served the other order's program";
  EXPECT_EQ(cached(m, &Order::pre, "run"), eager(m, &Order::pre)) << "warm";
  EXPECT_EQ(storage::Store::open(dir.string(), storage::Create::no).object_keys().size(), 4u) << "four programs";
}

// One decomposition named "a,silu:b" for gelu, or two named "a" (gelu)
// and "b" (silu): joined alike before; each table now runs its own program.
TEST_F(KeyCollisions, DecompositionTablesWhoseNamesJoinedAlikeKeyApart) {
  struct Act : nn::Module {
    std::string type_name() const override { return "Act"; }
    Tensor run(const Tensor& x) const { return ops::gelu(x) + ops::silu(x); }
  };
  const auto twice = [](const std::vector<Tensor>& in, const Attrs&) { return in[0] * 2.0f; };
  const auto thrice = [](const std::vector<Tensor>& in, const Attrs&) { return in[0] * 3.0f; };
  DecompositionTable one, two;
  one[Op::gelu] = {"a,silu:b", twice};
  two[Op::gelu] = {"a", twice};
  two[Op::silu] = {"b", thrice};
  EXPECT_NE(format::decomposition_names(one), format::decomposition_names(two));
  EXPECT_NE(format::names::key_text({"a|b", "c"}), format::names::key_text({"a", "b|c"}));
  Act m;
  const Tensor x = Tensor::from_vector({1.0f}, {1, 1});
  std::vector<std::vector<float>> results;
  for (const auto& table : {two, one, two}) {
    CacheOptions o;
    o.cache_dir = dir.string();
    o.compile.method_name = "run";
    o.compile.custom_decompositions = table;
    auto fn = cache_compile(m, &Act::run, o);
    results.push_back(fn(x).to_vector());
  }
  ASSERT_EQ(results[0].size(), 1u);
  EXPECT_FLOAT_EQ(results[0][0], 5.0f);
  EXPECT_NE(results[1], results[0]) << "a table whose names joined alike was served the other's program";
  EXPECT_EQ(results[2], results[0]);
}
