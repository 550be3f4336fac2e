// Calling patterns of a serving program against the compile surface: split
// methods (fullgraph=false) whose pieces hand tensors to one another and to
// eager code, in-place updates pending in a piece, compiled methods called
// from inside other compiled methods, exceptions in the middle of a split
// method, lazy tensors kept in members and structs, int64/f16/bool and
// zero-size tensors through pieces, enable_shape_handling with
// computations that mix rows. Every result must equal eager.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <latch>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "support/error_message.h"
#include "support/expect_close.h"
#include "support/small_models.h"

using namespace npucache;
using testing_support::expect_close;
using testing_support::ramp;

namespace {

using npucache::testing::message;

CompileOptions mode(const char* m) {
  CompileOptions o;
  o.mode = m;
  return o;
}

struct Layer : nn::Module {
  Tensor w;
  Layer() { w = register_parameter("w", Tensor::from_vector(ramp(16 * 16, 0.01f, -0.06f), {16, 16})); }
  std::string type_name() const override { return "Layer"; }

  // Three pieces; the first piece's output is read by the third, after the
  // second piece ran.
  Tensor three_pieces(const Tensor& x) {
    Tensor h = ops::matmul(x, w);                     // piece 1
    const float a = ops::sum(h, {0, 1}).item();       // break 1
    Tensor g = ops::tanh(h * (a > 0 ? 0.5f : 2.0f));  // piece 2
    const float b = ops::sum(g, {0, 1}).item();       // break 2
    return g + h * (b > 0 ? 1.0f : -1.0f);            // piece 3 reads h and g
  }

  // A cache update whose result is dropped, after a break: the method
  // returns the cache itself (an eager tensor).
  Tensor update_and_return_cache(const Tensor& kc, const Tensor& pos, const Tensor& v) {
    const float s = ops::sum(v, {0, 1, 2}).item();  // break
    ops::buffer_update(kc, pos, v * (s > 0 ? 2.0f : 3.0f));
    return kc;
  }

  // A cache update pending in a piece, then a host read of the cache.
  Tensor update_then_read(const Tensor& kc, const Tensor& pos, const Tensor& v) {
    Tensor upd = ops::buffer_update(kc, pos, v * 2.0f);
    const std::vector<float> seen = kc.to_vector();  // a break? kc is eager
    float total = 0;
    for (float f : seen) total += f;
    return upd * total;
  }

  // A computation pending on x, then x overwritten from the host.
  Tensor read_then_overwrite(Tensor x) {  // x shares the caller's storage
    Tensor h = ops::matmul(x, w);
    x.copy_from(std::vector<float>(4 * 16, 0.0f));  // x is [4, 16]
    return h + 1.0f;
  }

  // A host read between two computations.
  Tensor inner(const Tensor& x) {
    Tensor h = ops::matmul(x, w);
    const float s = ops::sum(h, {0, 1}).item();
    return s > 0 ? ops::relu(h) : ops::tanh(h);
  }
  Tensor plain(const Tensor& x) { return ops::sigmoid(ops::matmul(x, w)) * 2.0f; }

  // Throws after its first piece when asked to.
  Tensor maybe_throw(const Tensor& x, bool fail) {
    Tensor h = ops::matmul(x, w);
    const float s = ops::sum(h, {0, 1}).item();
    if (fail) throw std::runtime_error("user code failed");
    return h * (s > 0 ? 1.0f : -1.0f);
  }

  // Keeps a lazy tensor in a member.
  Tensor last;
  Tensor keeps_member(const Tensor& x) {
    Tensor h = ops::matmul(x, w);
    const float s = ops::sum(h, {0, 1}).item();
    last = h * 3.0f;
    return h + s;
  }

  // int64, f16 and bool tensors through pieces.
  Tensor dtypes(const Tensor& x) {
    Tensor h = ops::matmul(x, w);
    Tensor idx = ops::argmax(h, 1);                           // i64 [B]
    Tensor half = ops::cast(h, DType::f16);                   // f16
    Tensor pos = ops::gt(h, ops::scalar(0.0));                // bool
    const std::vector<int64_t> picked = idx.to_vector_i64();  // break
    int64_t total = 0;
    for (int64_t p : picked) total += p;
    Tensor back = ops::cast(half, DType::f32) + ops::cast(pos, DType::f32);
    return back * static_cast<float>(total % 7 + 1) + ops::cast(idx, DType::f32).reshape({x.size(0), 1});
  }
};

// Compiles `Layer::inner` as a member, so another method can call it.
struct Outer : nn::Module {
  std::shared_ptr<Layer> layer;
  CompiledMethod<Layer, Tensor, const Tensor&> inner_fast;
  Outer() { layer = register_module("layer", std::make_shared<Layer>()); }
  std::string type_name() const override { return "Outer"; }
  // A split method calling a compiled (itself split) method.
  Tensor split_calls_compiled(const Tensor& x) {
    const float s = ops::sum(x, {0, 1}).item();  // break
    Tensor y = inner_fast(x * (s > 0 ? 1.0f : -1.0f));
    return y + 1.0f;
  }
  // A whole graph calling a compiled method.
  Tensor whole_calls_compiled(const Tensor& x) { return inner_fast(x) * 2.0f; }
};

Tensor input(int64_t rows, float sign) {
  return Tensor::from_vector(ramp(rows * 16, 0.1f * sign, -0.3f * sign), {rows, 16});
}

Tensor zeros(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(n), 0.0f), dims);
}

}  // namespace

// Piece 1's output read by piece 3 after piece 2 replayed: in
// reduce-overhead the pieces' captures share the thread's pool, so piece 2
// must not overwrite what piece 1 left for piece 3.
TEST(CallingPatterns, EarlierPieceOutputsSurviveLaterPieces) {
  for (const char* m : {"default", "reduce-overhead"}) {
    Layer l;
    auto f = compile(l, &Layer::three_pieces, mode(m));
    for (int i = 0; i < 3; ++i)
      for (float sign : {1.0f, -1.0f}) {
        Tensor x = input(4, sign);
        std::vector<float> got;
        const std::string err = message([&] { got = f(x).to_vector(); });
        ASSERT_EQ(err, "") << m;
        expect_close(got, l.three_pieces(x).to_vector(), std::string(m) + " call " + std::to_string(i));
        EXPECT_EQ(f.status().graph_breaks.size(), 2u) << m;
      }
  }
}

// An update pending in the last piece runs even when no tensor of that
// piece is live (its result dropped, the method returning the cache).
TEST(CallingPatterns, PendingUpdateWithDroppedResultRuns) {
  for (const char* m : {"default", "reduce-overhead"}) {
    Layer l;
    auto f = compile(l, &Layer::update_and_return_cache, mode(m));
    Tensor kc = zeros({1, 4, 8}), ke = zeros({1, 4, 8});
    for (int64_t p = 0; p < 4; ++p) {
      Tensor pos = Tensor::from_vector_i64({p}, {1, 1});
      Tensor v = Tensor::from_vector(ramp(8, 0.1f, p % 2 ? -0.9f : 0.2f), {1, 1, 8});
      Tensor out = f(kc, pos, v);
      (void)l.update_and_return_cache(ke, pos, v);
      expect_close(kc.to_vector(), ke.to_vector(), std::string(m) + " cache after step " + std::to_string(p));
      expect_close(out.to_vector(), ke.to_vector(), std::string(m) + " result of step " + std::to_string(p));
    }
  }
}

// A host read of a tensor that the pending piece updates in place sees the
// update, as eager code does.
TEST(CallingPatterns, HostReadSeesAPendingInPlaceUpdate) {
  Layer l;
  CompileOptions o;
  o.dynamic = false;
  auto f = compile(l, &Layer::update_then_read, o);
  Tensor kc = zeros({1, 4, 8}), ke = zeros({1, 4, 8});
  for (int64_t p = 0; p < 4; ++p) {
    Tensor pos = Tensor::from_vector_i64({p}, {1, 1});
    Tensor v = Tensor::from_vector(ramp(8, 0.1f, 0.3f), {1, 1, 8});
    const auto want = l.update_then_read(ke, pos, v).to_vector();
    expect_close(f(kc, pos, v).to_vector(), want, "step " + std::to_string(p));
    expect_close(kc.to_vector(), ke.to_vector(), "cache after step " + std::to_string(p));
  }
}

// A host write to a tensor the pending piece reads: the piece reads the
// value from before the write, as eager code does.
TEST(CallingPatterns, HostWriteAfterAPendingReadKeepsTheOldValue) {
  Layer l;
  CompileOptions o;
  o.dynamic = false;
  // The write is a graph break of the whole-graph trace (copy_from on a
  // traced input), so the method runs split.
  auto f = compile(l, &Layer::read_then_overwrite, o);
  for (int i = 0; i < 3; ++i) {
    Tensor x = input(4, 1.0f), xe = input(4, 1.0f);
    std::vector<float> got;
    const std::string err = message([&] { got = f(x).to_vector(); });
    ASSERT_EQ(err, "") << "call " << i;
    expect_close(got, l.read_then_overwrite(xe).to_vector(), "call " + std::to_string(i));
    expect_close(x.to_vector(), xe.to_vector(), "x after call " + std::to_string(i));
  }
}

// A compiled method called from inside another compiled method (split or
// whole) runs as part of it, as torch.compile inlines a compiled function
// called from compiled code.
TEST(CallingPatterns, CompiledMethodCalledFromInsideAnother) {
  for (const char* m : {"default", "reduce-overhead"}) {
    Outer o;
    o.inner_fast = compile(*o.layer, &Layer::inner, mode(m));
    auto split = compile(o, &Outer::split_calls_compiled, mode(m));
    auto whole = compile(o, &Outer::whole_calls_compiled, mode(m));
    for (float sign : {1.0f, -1.0f, 1.0f}) {
      Tensor x = input(4, sign);
      std::vector<float> a, b, c;
      std::string err = message([&] { a = split(x).to_vector(); });
      ASSERT_EQ(err, "") << m;
      // The eager reference calls the compiled inner method outside any trace.
      const auto want_split = (o.layer->inner(x * (ops::sum(x, {0, 1}).item() > 0 ? 1.0f : -1.0f)) + 1.0f).to_vector();
      expect_close(a, want_split, std::string(m) + " split");
      err = message([&] { b = whole(x).to_vector(); });
      ASSERT_EQ(err, "") << m;
      expect_close(b, (o.layer->inner(x) * 2.0f).to_vector(), std::string(m) + " whole");
      // The inner method called on its own still works.
      err = message([&] { c = o.inner_fast(x).to_vector(); });
      ASSERT_EQ(err, "") << m;
      expect_close(c, o.layer->inner(x).to_vector(), std::string(m) + " inner alone");
    }
  }
}

// User code that throws in the middle of a split method: the exception
// reaches the caller, and the next call runs normally and equals eager.
TEST(CallingPatterns, ExceptionInTheMiddleOfASplitMethod) {
  for (const char* m : {"default", "reduce-overhead"}) {
    Layer l;
    auto f = compile(l, &Layer::maybe_throw, mode(m));
    Tensor x = input(4, 1.0f);
    expect_close(f(x, false).to_vector(), l.maybe_throw(x, false).to_vector(), std::string(m) + " first");
    EXPECT_THROW((void)f(x, true), std::runtime_error);
    for (float sign : {1.0f, -1.0f}) {
      Tensor y = input(4, sign);
      expect_close(f(y, false).to_vector(), l.maybe_throw(y, false).to_vector(), std::string(m) + " after");
    }
    // An eager op on this thread is not recorded by a leftover session.
    Tensor e = ops::matmul(x, l.w);
    EXPECT_FALSE(e.is_traced());
  }
}

// A lazy tensor kept in a member and the result are both eager and right
// after the call.
TEST(CallingPatterns, LazyTensorKeptInAMember) {
  for (const char* m : {"default", "reduce-overhead"}) {
    Layer l, ref;
    auto f = compile(l, &Layer::keeps_member, mode(m));
    for (float sign : {1.0f, -1.0f}) {
      Tensor x = input(4, sign);
      Tensor got = f(x);
      const auto want = ref.keeps_member(x).to_vector();
      EXPECT_FALSE(l.last.is_traced()) << m;
      expect_close(got.to_vector(), want, std::string(m) + " result");
      std::vector<float> kept;
      const std::string err = message([&] { kept = l.last.to_vector(); });
      // reduce-overhead: a kept pool tensor may be overwritten by a later
      // call, never by the same call.
      ASSERT_EQ(err, "") << m;
      expect_close(kept, ref.last.to_vector(), std::string(m) + " member");
    }
  }
}

// int64, f16 and bool tensors flow through pieces and host reads.
TEST(CallingPatterns, IntegerHalfAndBoolTensorsThroughPieces) {
  for (const char* m : {"default", "reduce-overhead"}) {
    Layer l;
    auto f = compile(l, &Layer::dtypes, mode(m));
    for (float sign : {1.0f, -1.0f, 1.0f}) {
      Tensor x = input(4, sign);
      expect_close(f(x).to_vector(), l.dtypes(x).to_vector(), std::string(m) + " sign " + std::to_string(sign));
    }
  }
}

// The same tensor as two arguments and an output fed back across graph
// breaks, in reduce-overhead.
TEST(CallingPatterns, OutputFedBackIntoASplitMethod) {
  struct Pair : nn::Module {
    Tensor w;
    Pair() { w = register_parameter("w", Tensor::from_vector(ramp(16 * 16, 0.01f, -0.06f), {16, 16})); }
    std::string type_name() const override { return "Pair"; }
    Tensor step(const Tensor& a, const Tensor& b) {
      Tensor h = ops::matmul(a - b * 0.5f, w);
      const float s = ops::sum(h, {0, 1}).item();
      return ops::tanh(h * (s > 0 ? 1.0f : -1.0f) + a);
    }
  } p;
  auto f = compile(p, &Pair::step, mode("reduce-overhead"));
  Tensor h = input(4, 1.0f), e = input(4, 1.0f);
  for (int i = 0; i < 6; ++i) {
    h = f(h, h);
    e = p.step(e, e);
    expect_close(h.to_vector(), e.to_vector(), "step " + std::to_string(i));
  }
}

// Zero rows through a split method and a compiled one, and automatic
// dynamic going from batch 1 to 0 and back.
TEST(CallingPatterns, ZeroSizeBatches) {
  for (const char* m : {"default", "reduce-overhead"}) {
    Layer l;
    auto split = compile(l, &Layer::inner, mode(m));
    auto whole = compile(l, &Layer::plain, mode(m));
    for (int64_t rows : {1, 0, 3, 0, 1}) {
      Tensor x = input(rows, 1.0f);
      std::vector<float> a, b;
      std::string err = message([&] { a = split(x).to_vector(); });
      ASSERT_EQ(err, "") << m << " split, rows " << rows;
      expect_close(a, l.inner(x).to_vector(), std::string(m) + " split rows " + std::to_string(rows));
      err = message([&] { b = whole(x).to_vector(); });
      ASSERT_EQ(err, "") << m << " whole, rows " << rows;
      expect_close(b, l.plain(x).to_vector(), std::string(m) + " whole rows " + std::to_string(rows));
    }
  }
}

namespace {
// Adds the batch mean: padding the batch dim changes every row.
struct Mixer : nn::Module {
  Tensor w;
  Mixer() { w = register_parameter("w", Tensor::from_vector(ramp(16 * 16, 0.01f, -0.05f), {16, 16})); }
  std::string type_name() const override { return "Mixer"; }
  Tensor forward(const Tensor& x) { return ops::matmul(x, w) + ops::mean(x, {0}, true); }
};
// Rows x and -x (and a zero row when odd): every column sums to zero.
Tensor balanced(int64_t rows) {
  std::vector<float> v(static_cast<std::size_t>(rows * 16), 0.0f);
  for (int64_t r = 0; r + 1 < rows; r += 2)
    for (int64_t c = 0; c < 16; ++c) {
      const float x = 0.1f * static_cast<float>((r * 16 + c) % 7) - 0.2f;
      v[static_cast<std::size_t>(r * 16 + c)] = x;
      v[static_cast<std::size_t>((r + 1) * 16 + c)] = -x;
    }
  return Tensor::from_vector(v, {rows, 16});
}
CompileOptions shape_handling() {
  CompileOptions o;
  o.dynamic = true;
  o.options = {{"triton.cudagraphs", true}, {"enable_shape_handling", true}};
  return o;
}
}  // namespace

// enable_shape_handling never returns a padded result that differs from
// eager, whatever the data of the call that checked the padding.
TEST(CallingPatterns, ShapeHandlingIsNotFooledByTheCheckingCallsData) {
  Mixer m;
  auto f = compile(m, &Mixer::forward, shape_handling());
  Tensor big = input(8, 1.0f);
  expect_close(f(big).to_vector(), m.forward(big).to_vector(), "batch 8");
  Tensor even = balanced(5);  // the padded mean equals the unpadded one here
  expect_close(f(even).to_vector(), m.forward(even).to_vector(), "balanced batch 5");
  for (float sign : {1.0f, -1.0f}) {
    Tensor x = input(5, sign);
    expect_close(f(x).to_vector(), m.forward(x).to_vector(), "batch 5 sign " + std::to_string(sign));
  }
}

// Threads padding the same size to the same bucket at once: no thread gets
// a padded result the check has not passed yet.
TEST(CallingPatterns, ConcurrentFirstPaddedCalls) {
  constexpr int kThreads = 6;
  for (int round = 0; round < 4; ++round) {
    Mixer m;
    auto f = compile(m, &Mixer::forward, shape_handling());
    Tensor big = input(8, 1.0f);
    (void)f(big);  // captures 8 on this thread only; the others capture their own
    std::atomic<int> wrong{0};
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    const auto want8 = m.forward(big).to_vector();
    Tensor x = input(5, 1.0f);
    const auto want5 = m.forward(x).to_vector();
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
          if (a.size() != b.size()) return false;
          for (std::size_t i = 0; i < a.size(); ++i)
            if (std::fabs(a[i] - b[i]) > 1e-4f) return false;
          return true;
        };
        if (!same(f(big).to_vector(), want8)) ++wrong;  // this thread's capture of 8
        start.arrive_and_wait();
        if (!same(f(x).to_vector(), want5)) ++wrong;
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0) << "round " << round;
  }
}

namespace {
// Writes the new tokens into a KV cache registered on the module (not
// passed as an argument), as models that own their cache do.
struct OwnCache : nn::Module {
  Tensor cache;
  OwnCache() { cache = register_buffer("cache", Tensor::from_vector(std::vector<float>(16 * 8, 0.0f), {1, 16, 8})); }
  std::string type_name() const override { return "OwnCache"; }
  Tensor forward(const Tensor& x, const Tensor& pos) {
    ops::buffer_update(cache, pos, x);
    return x * 2.0f;
  }
};
}  // namespace

// enable_shape_handling never writes the padding rows into a buffer the
// program updates in place, an argument or the module's own.
TEST(CallingPatterns, ShapeHandlingNeverWritesPaddingIntoAModuleBuffer) {
  OwnCache m, ref;
  auto f = compile(m, &OwnCache::forward, shape_handling());
  auto tokens = [](int64_t first, int64_t n) {
    std::vector<int64_t> p;
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i) {
      p.push_back(first + i);
      for (int64_t d = 0; d < 8; ++d) v.push_back(static_cast<float>(first + i + 1) + 0.1f * static_cast<float>(d));
    }
    return std::pair{Tensor::from_vector(v, {1, n, 8}), Tensor::from_vector_i64(p, {1, n})};
  };
  for (auto [first, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 2}, {6, 3}, {9, 1}}) {
    auto [x, pos] = tokens(first, n);
    expect_close(f(x, pos).to_vector(), ref.forward(x, pos).to_vector(), "tokens from " + std::to_string(first));
    expect_close(m.cache.to_vector(), ref.cache.to_vector(), "cache after tokens from " + std::to_string(first));
  }
}

// Request threads on a split method's first calls in reduce-overhead (each
// thread replays the pieces into its own pool), and on a method whose
// automatic dynamic decision is made while they call it: every result
// equals eager.
TEST(CallingPatterns, ConcurrentFirstCallsOfSplitAndAutomaticDynamicMethods) {
  constexpr int kThreads = 6;
  Layer l;
  auto split = compile(l, &Layer::three_pieces, mode("reduce-overhead"));
  auto automatic = compile(l, &Layer::plain, mode("reduce-overhead"));
  std::vector<std::vector<float>> want_split, want_auto;
  for (int t = 0; t < kThreads; ++t) {
    want_split.push_back(l.three_pieces(input(2 + t % 3, t % 2 ? 1.0f : -1.0f)).to_vector());
    want_auto.push_back(l.plain(input(1 + t, 1.0f)).to_vector());
  }
  std::atomic<int> wrong{0};
  std::mutex mu;
  std::vector<std::string> errors;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        if (a.size() != b.size()) return false;
        for (std::size_t i = 0; i < a.size(); ++i)
          if (std::fabs(a[i] - b[i]) > 1e-4f) return false;
        return true;
      };
      start.arrive_and_wait();
      try {
        for (int i = 0; i < 4; ++i) {
          if (!same(split(input(2 + t % 3, t % 2 ? 1.0f : -1.0f)).to_vector(), want_split[t])) ++wrong;
          if (!same(automatic(input(1 + t, 1.0f)).to_vector(), want_auto[t])) ++wrong;
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        errors.push_back(e.what());
        ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0) << (errors.empty() ? "" : errors.front());
  EXPECT_LE(automatic.compiles(), 3u);
}

// Hostile options: a debug directory that is a file only costs a warning;
// option values of the wrong type are ConfigErrors; a huge capture limit is
// a limit like any other.
TEST(CallingPatterns, HostileCompileOptions) {
  Layer l;
  const std::string file = ::testing::TempDir() + "npucache-debug-dir-is-a-file";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("a file, not a directory", f);
    std::fclose(f);
  }
  CompileOptions o;
  o.options = {{"trace.enabled", true}, {"trace.debug_dir", file}};
  auto traced = compile(l, &Layer::plain, o);
  Tensor x = input(3, 1.0f);
  std::vector<float> got;
  EXPECT_EQ(message([&] { got = traced(x).to_vector(); }), "");
  expect_close(got, l.plain(x).to_vector(), "debug dir is a file");
  std::remove(file.c_str());
  for (const auto& [key, value] : std::vector<std::pair<std::string, OptionValue>>{
           {"trace.debug_dir", true}, {"enable_shape_handling", int64_t{1}}, {"triton.cudagraphs", 1.0}}) {
    o = {};
    o.options = {{key, value}};
    const std::string m = message([&] { compile(l, &Layer::plain, o); });
    EXPECT_NE(m.find("compile option '" + key + "'"), std::string::npos) << m;
  }
  o = {};
  o.mode = "reduce-overhead";
  o.dynamic = true;
  o.capture_limit = std::numeric_limits<std::size_t>::max();
  auto unlimited = compile(l, &Layer::plain, o);
  for (int64_t b : {2, 3, 4}) {
    Tensor y = input(b, 1.0f);
    expect_close(unlimited(y).to_vector(), l.plain(y).to_vector(), "batch " + std::to_string(b));
    EXPECT_TRUE(unlimited.status().replayed);
  }
}

namespace {
// Row by row along the batch: an embedding, a linear layer, a norm and a
// softmax over features, a reshape that splits the features.
struct RowWise : nn::Module {
  Tensor table, w, norm;
  RowWise() {
    table = register_parameter("table", Tensor::from_vector(ramp(10 * 16, 0.03f, -0.2f), {10, 16}));
    w = register_parameter("w", Tensor::from_vector(ramp(16 * 16, 0.01f, -0.05f), {16, 16}));
    norm = register_parameter("norm", Tensor::from_vector(ramp(16, 0.05f, 0.8f), {16}));
  }
  std::string type_name() const override { return "RowWise"; }
  Tensor forward(const Tensor& ids, const Tensor& x) {
    Tensor h = ops::embedding(table, ids) + ops::linear(x, w);
    h = ops::rmsnorm(h, norm, 1e-6);
    Tensor split = h.reshape({h.size(0), 2, 8}).permute({0, 2, 1}).reshape({h.size(0), 16});
    return ops::softmax(split, -1) + ops::relu(h);
  }
};
}  // namespace

// enable_shape_handling still pads what is computed row by row: a smaller
// batch replays the captured one, and equals eager.
TEST(CallingPatterns, ShapeHandlingPadsRowByRowModels) {
  RowWise m;
  auto f = compile(m, &RowWise::forward, shape_handling());
  auto call = [&](int64_t b) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < b; ++i) ids.push_back((i * 3) % 10);
    Tensor id = Tensor::from_vector_i64(ids, {b});
    Tensor x = input(b, 1.0f);
    expect_close(f(id, x).to_vector(), m.forward(id, x).to_vector(), "batch " + std::to_string(b));
  };
  call(8);
  for (int64_t b : {5, 3, 7}) {
    call(b);
    EXPECT_EQ(f.status().reason, "padded to a captured size (enable_shape_handling)") << "batch " << b;
  }
  EXPECT_EQ(f.status().captures, 1u);
}

// Threads whose calls are padded to captured sizes at once, each (size,
// bucket) pair checked by whichever threads come first: every result
// equals eager.
TEST(CallingPatterns, ConcurrentPaddedReplays) {
  constexpr int kThreads = 6;
  RowWise m;
  auto f = compile(m, &RowWise::forward, shape_handling());
  auto args = [](int64_t b) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < b; ++i) ids.push_back((i * 7 + b) % 10);
    return std::pair{Tensor::from_vector_i64(ids, {b}), input(b, b % 2 ? 1.0f : -1.0f)};
  };
  std::vector<std::vector<float>> want;
  for (int t = 0; t < kThreads; ++t) {
    auto [id, x] = args(2 + t);
    want.push_back(m.forward(id, x).to_vector());
  }
  std::atomic<int> wrong{0}, padded{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto [big_id, big_x] = args(8);
      (void)f(big_id, big_x);  // a capture of 8 (the pool is this thread's)
      start.arrive_and_wait();
      for (int i = 0; i < 4; ++i) {
        auto [id, x] = args(2 + t);
        const auto got = f(id, x).to_vector();
        if (f.status().reason == "padded to a captured size (enable_shape_handling)") ++padded;
        bool same = got.size() == want[t].size();
        for (std::size_t k = 0; same && k < got.size(); ++k) same = std::fabs(got[k] - want[t][k]) <= 1e-4f;
        if (!same) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(padded.load(), kThreads * 4);
}

namespace {
struct TwoOut {
  Tensor first, second;
  std::vector<Tensor> rest;
  template <class V>
  void visit(V& v) {
    v("first", first);
    v("second", second);
    v("rest", rest);
  }
};
struct Multi : nn::Module {
  Tensor w;
  Multi() { w = register_parameter("w", Tensor::from_vector(ramp(16 * 16, 0.01f, -0.06f), {16, 16})); }
  std::string type_name() const override { return "Multi"; }
  // Results of several pieces, returned in a struct and a vector.
  TwoOut split(const Tensor& x) {
    Tensor h = ops::matmul(x, w);
    const float s = ops::sum(h, {0, 1}).item();
    Tensor g = ops::tanh(h * (s > 0 ? 1.0f : -1.0f));
    const float t = ops::max(g, {0, 1}).item();
    return {h, g * t, {g + h, ops::argmax(g, 1)}};
  }
};
}  // namespace

// Lazy tensors returned inside a struct and a vector, from several pieces,
// are eager and right after the call.
TEST(CallingPatterns, ResultsInStructsAndVectorsFromSeveralPieces) {
  for (const char* m : {"default", "reduce-overhead"}) {
    Multi mm;
    auto f = compile(mm, &Multi::split, mode(m));
    for (float sign : {1.0f, -1.0f}) {
      Tensor x = input(4, sign);
      TwoOut got = f(x), want = mm.split(x);
      ASSERT_EQ(got.rest.size(), 2u);
      for (const Tensor* t : {&got.first, &got.second, &got.rest[0], &got.rest[1]}) EXPECT_FALSE(t->is_traced()) << m;
      expect_close(got.first.to_vector(), want.first.to_vector(), std::string(m) + " first");
      expect_close(got.second.to_vector(), want.second.to_vector(), std::string(m) + " second");
      expect_close(got.rest[0].to_vector(), want.rest[0].to_vector(), std::string(m) + " rest[0]");
      EXPECT_EQ(got.rest[1].to_vector_i64(), want.rest[1].to_vector_i64()) << m;
    }
  }
}
