// Graph breaks (fullgraph=false): each break kind -- a host read, a
// data-dependent branch, an op the mode cannot lower -- splits the method
// into compiled pieces with eager code between them, counted and explained
// in the call status; results equal eager on every path the data takes;
// fullgraph=true makes the same case an error giving the reason; prepare()
// obtains the pieces without running them, up to a host read it cannot
// know unless a hint gives the value.
#include <npucache/cache.h>
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include "support/error_message.h"
#include "support/expect_close.h"
#include "support/small_models.h"
#include "support/temp_dir_test.h"

using namespace npucache;
using testing_support::expect_close;
using testing_support::ramp;

namespace {

struct Branchy : nn::Module {
  Tensor w;
  // `meta`: a parameter without values (a warmup without weights).
  explicit Branchy(bool meta = false) {
    w = register_parameter("w",
                           meta ? Tensor::meta({16, 16}) : Tensor::from_vector(ramp(16 * 16, 0.01f, -0.06f), {16, 16}));
  }
  std::string type_name() const override { return "Branchy"; }
  // A host read decides the second half.
  Tensor host_read(const Tensor& x) {
    Tensor h = ops::matmul(x, w) * 2.0f;
    const float total = ops::sum(h, {0, 1}).item();
    Tensor y = total > 0 ? ops::relu(h) : ops::tanh(h) - 1.0f;
    return ops::matmul(y, w) + x;
  }
  // A tensor's truth value decides a branch.
  Tensor branch(const Tensor& x) {
    Tensor h = ops::matmul(x, w);
    if (ops::gt(ops::sum(h, {0, 1}), ops::scalar(0.0))) return ops::sigmoid(h) * 3.0f;
    return ops::exp(h * 0.1f);
  }
  // Its argument returned beside its result (a decode step's state).
  std::vector<Tensor> with_input(const Tensor& x) {
    Tensor h = ops::matmul(x, w);
    if (ops::sum(h, {0, 1}).item() > 1e30f) h = h * 0.0f;  // a host read that never changes the path
    return {ops::tanh(h), x};
  }
  // A cache updated in place by a piece, then read on the host.
  Tensor update_then_read(const Tensor& kc, const Tensor& pos, const Tensor& v) {
    Tensor upd = ops::buffer_update(kc, pos, v * 2.0f);
    float total = 0;
    for (float f : kc.to_vector()) total += f;
    return upd * total;
  }
  // Catches what a host read throws and goes on with a default.
  Tensor guarded(const Tensor& x) {
    Tensor h = ops::matmul(x, w);
    float total = 1.0f;
    try {
      total = ops::sum(h, {0, 1}).item();
    } catch (const MetaTensorError&) {
    }
    return total > 0 ? ops::relu(h) : ops::tanh(h);
  }
  // Dropout between two compiled computations.
  Tensor noisy(const Tensor& x) {
    Tensor h = ops::relu(ops::matmul(x, w)) + 1.0f;
    return ops::dropout(h, 0.5) * 2.0f;
  }
};

// Same-shaped layers with a host read after each (an early-exit check, MoE
// routing): the pieces after the first have one structure and read other
// parameters, so only the parameters they read tell them apart.
struct Routed : nn::Module {
  std::vector<Tensor> w;
  Routed() {
    for (int i = 0; i < 4; ++i)
      w.push_back(register_parameter("layer" + std::to_string(i),
                                     Tensor::from_vector(ramp(16 * 16, 0.01f * (i + 1), -0.05f * (i + 1)), {16, 16})));
  }
  std::string type_name() const override { return "Routed"; }
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const Tensor& wi : w) {
      h = ops::tanh(ops::matmul(h, wi));
      if (ops::sum(h, {0, 1}).item() > 1e9f) break;  // never taken: every layer runs
    }
    return h;
  }
};

// A decode step with a host read between its two halves (an early-exit
// check): the first half writes the step's key into a KV cache and attends
// over the first kv_len keys (kv_len: an attribute of its piece); the
// second attends over the history of hidden states, which grows by one row
// a step (a dim of its piece's input).
constexpr int64_t kDHeads = 2, kDHeadDim = 8, kDHidden = kDHeads * kDHeadDim, kDMax = 32;
struct BrokenDecoder : nn::Module {
  Tensor wq, wk, wv, wo;
  BrokenDecoder() {
    const auto n = kDHidden * kDHidden;
    wq = register_parameter("wq", Tensor::from_vector(ramp(n, 0.01f, -0.05f), {kDHidden, kDHidden}));
    wk = register_parameter("wk", Tensor::from_vector(ramp(n, 0.008f, -0.04f), {kDHidden, kDHidden}));
    wv = register_parameter("wv", Tensor::from_vector(ramp(n, 0.006f, -0.03f), {kDHidden, kDHidden}));
    wo = register_parameter("wo", Tensor::from_vector(ramp(n, 0.012f, -0.06f), {kDHidden, kDHidden}));
  }
  std::string type_name() const override { return "BrokenDecoder"; }
  // x [1, 1, H], pos [1, 1], kc/vc [1, kDMax, heads, head_dim], hist [1, n, H].
  std::vector<Tensor> step(const Tensor& x, const Tensor& pos, const Tensor& kc, const Tensor& vc, const Tensor& hist,
                           SymInt kv_len) {
    auto heads = [](const Tensor& t) { return t.reshape({1, 1, kDHeads, kDHeadDim}); };
    Tensor k = ops::buffer_update(kc, pos, heads(ops::matmul(x, wk)));
    Tensor v = ops::buffer_update(vc, pos, heads(ops::matmul(x, wv)));
    Tensor q = heads(ops::matmul(x, wq)).permute({0, 2, 1, 3});
    Tensor a = ops::fused_attention(q, k.permute({0, 2, 1, 3}), v.permute({0, 2, 1, 3}), kv_len);
    Tensor h = x + ops::tanh(ops::matmul(a.permute({0, 2, 1, 3}).reshape({1, 1, kDHidden}), wo));
    if (ops::max(h, {0, 1, 2}).item() > 1e30f) h = h * 0.0f;  // the break; never taken
    Tensor all = ops::concat({hist, h}, 1);
    Tensor scores = ops::softmax(ops::matmul(h, ops::transpose(all, 1, 2)) * 0.25f, 2);
    return {ops::matmul(scores, all) + h, all};
  }
};

// Two slices of one buffer before a break: one `n` long, one 4 long. At
// n = 4 the two ends are one value; a piece made general there must not
// take the constant for a size.
struct Coincide : nn::Module {
  std::string type_name() const override { return "Coincide"; }
  Tensor forward(const Tensor& x, SymInt n) {
    Tensor s = ops::sum(ops::slice(x, 1, 0, n), {1}) + ops::sum(ops::slice(x, 1, 0, 4), {1}) * 2.0f;
    if (ops::max(s, {0, 1}).item() > 1e30f) s = s * 0.0f;  // the break; never taken
    return ops::tanh(s);
  }
  // `x` is n + 1 long and read after a slice n long: its dim is a symbol
  // plus one, which no input dim binds alone.
  Tensor shifted(const Tensor& y, const Tensor& x, SymInt n) {
    const Tensor head = ops::sum(ops::slice(y, 1, 0, n), {1});  // recorded before x is read
    Tensor s = head + ops::sum(x, {1});
    if (ops::max(s, {0, 1}).item() > 1e30f) s = s * 0.0f;  // the break; never taken
    return ops::tanh(s);
  }
};

// Attention over one head of width 8, then a break: the attention's head
// count and head width are sizes its decomposition needs as constants. A
// general piece (dynamic=true makes every size a site) must keep them so,
// whatever value they share with a batch or a sequence length.
struct HeadsThenBreak : nn::Module {
  int64_t heads = 1;
  std::string type_name() const override { return "HeadsThenBreak"; }
  Tensor forward(const Tensor& x) {
    const Shape s = x.shape();
    Tensor q = ops::tanh(x).reshape({s[0], s[1], SymExpr(heads), SymExpr(8 / heads)}).permute({0, 2, 1, 3});
    Tensor a = ops::attention(q, q, q, false).permute({0, 2, 1, 3}).reshape(s);
    if (ops::max(a, {0, 1, 2}).item() > 1e30f) a = a * 0.0f;  // the break; never taken
    return ops::tanh(a) + x;
  }
};

// SiLU then a break, for a custom decomposition that reads a size as a
// constant: a general piece of it cannot compile.
struct SiluThenBreak : nn::Module {
  std::string type_name() const override { return "SiluThenBreak"; }
  Tensor forward(const Tensor& x) {
    Tensor h = ops::silu(x) * 2.0f;
    if (ops::max(h, {0, 1}).item() > 1e30f) h = h * 0.0f;  // the break; never taken
    return ops::tanh(h) + x;
  }
};

// `steps` decode steps from a prompt of 3 (kv_len 4, 5, ...) through
// `run` (the compiled method, or the module eagerly), from fresh caches:
// each step's output.
template <class Step>
std::vector<std::vector<float>> decode(Step&& run, int steps) {
  Tensor kc = Tensor::from_vector(std::vector<float>(kDMax * kDHidden, 0.0f), {1, kDMax, kDHeads, kDHeadDim});
  Tensor vc = Tensor::from_vector(std::vector<float>(kDMax * kDHidden, 0.0f), {1, kDMax, kDHeads, kDHeadDim});
  Tensor hist = Tensor::from_vector(ramp(3 * kDHidden, 0.02f, -0.1f), {1, 3, kDHidden});
  Tensor x = Tensor::from_vector(ramp(kDHidden, 0.05f, -0.2f), {1, 1, kDHidden});
  std::vector<std::vector<float>> outs;
  for (int t = 0; t < steps; ++t) {
    Tensor pos = Tensor::from_vector_i64({3 + t}, {1, 1});
    const std::vector<Tensor> out = run(x, pos, kc, vc, hist, SymInt(4 + t));
    outs.push_back(out[0].to_vector());
    x = Tensor::from_vector(out[0].to_vector(), {1, 1, kDHidden});
    hist = Tensor::from_vector(out[1].to_vector(), concrete_dims(out[1].shape()));
  }
  return outs;
}

std::vector<std::vector<float>> decode_eager(BrokenDecoder& m, int steps) {
  return decode([&](auto&&... a) { return m.step(a...); }, steps);
}

void expect_same_steps(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                       const std::string& what) {
  ASSERT_LE(got.size(), want.size()) << what;
  for (std::size_t t = 0; t < got.size(); ++t) expect_close(got[t], want[t], what + " step " + std::to_string(t));
}

Tensor input(float sign) { return Tensor::from_vector(ramp(4 * 16, 0.1f * sign, -0.3f * sign), {4, 16}); }

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace

TEST(GraphBreaks, HostReadSplitsTheMethodAndEqualsEagerOnBothPaths) {
  Branchy m;
  for (const char* mode : {"default", "reduce-overhead"}) {
    CompileOptions o;
    o.mode = mode;
    auto f = compile(m, &Branchy::host_read, o);
    for (int i = 0; i < 3; ++i)
      for (float sign : {1.0f, -1.0f}) {
        Tensor x = input(sign);
        expect_close(f(x).to_vector(), m.host_read(x).to_vector(), std::string(mode) + " sign " + std::to_string(sign));
        const CallStatus& s = f.status();
        ASSERT_EQ(s.graph_breaks.size(), 1u) << mode;
        EXPECT_TRUE(has(s.graph_breaks[0], "graph break in Branchy.host_read at op sum")) << s.graph_breaks[0];
        EXPECT_TRUE(has(s.graph_breaks[0], "item() reads the tensor's value on the host")) << s.graph_breaks[0];
      }
    // Pieces: before the read (1), and after it on each path (2).
    EXPECT_EQ(f.compiles(), 3u) << mode;
  }
}

// A piece's identity includes the parameters it reads: pieces of one
// structure over other layers are other programs (run with their own
// parameters, compiled once each per structure and binding).
TEST(GraphBreaks, PiecesOfOneStructureRunTheirOwnParameters) {
  Routed m;
  for (const char* mode : {"default", "reduce-overhead"}) {
    CompileOptions o;
    o.mode = mode;
    auto f = compile(m, &Routed::forward, o);
    for (int i = 0; i < 2; ++i) {
      Tensor x = input(1.0f);
      expect_close(f(x).to_vector(), m.forward(x).to_vector(), std::string(mode) + " call " + std::to_string(i));
      EXPECT_EQ(f.status().graph_breaks.size(), 4u) << mode;
    }
    // One piece per layer, all of one structure (the first reads the
    // argument, the others the previous piece's output); the method
    // returns the last piece's output, so nothing runs after it.
    EXPECT_EQ(f.compiles(), 4u) << mode;
  }
}

// The decode loop through a split method in reduce-overhead: the previous
// result fed back is returned beside the new one, and stays readable after
// the call (the last piece's replay must not reuse its memory).
TEST(GraphBreaks, AnArgumentFedBackAndReturnedStaysReadable) {
  Branchy m;
  CompileOptions o;
  o.mode = "reduce-overhead";
  auto f = compile(m, &Branchy::with_input, o);
  Tensor h = input(1.0f);
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> before = h.to_vector();
    const std::vector<Tensor> out = f(h);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].to_vector(), before) << "call " << i;
    expect_close(out[0].to_vector(), m.with_input(Tensor::from_vector(before, {4, 16}))[0].to_vector(),
                 "call " + std::to_string(i));
    h = out[0];
  }
}

TEST(GraphBreaks, DataDependentBranchIsABreak) {
  Branchy m;
  auto f = compile(m, &Branchy::branch);
  for (float sign : {1.0f, -1.0f, 1.0f}) {
    Tensor x = input(sign);
    expect_close(f(x).to_vector(), m.branch(x).to_vector(), "sign " + std::to_string(sign));
    ASSERT_EQ(f.status().graph_breaks.size(), 1u);
    EXPECT_TRUE(has(f.status().graph_breaks[0], "truth value decides a branch")) << f.status().graph_breaks[0];
  }
}

TEST(GraphBreaks, UnlowerableOpRunsEagerlyBetweenCapturedPieces) {
  Branchy m;
  CompileOptions o;
  o.mode = "reduce-overhead";
  auto f = compile(m, &Branchy::noisy, o);
  Tensor x = input(1.0f);
  const std::vector<float> h = (ops::relu(ops::matmul(x, m.w)) + 1.0f).to_vector();
  const std::vector<float> y = f(x).to_vector();
  int kept = 0, dropped = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::fabs(y[i]) < 1e-6f)
      ++dropped;
    else if (std::fabs(y[i] - 4.0f * h[i]) < 1e-3f)
      ++kept;
  }
  EXPECT_EQ(kept + dropped, static_cast<int>(y.size()));  // every element kept (x2 x2) or dropped
  EXPECT_GT(kept, 8);
  EXPECT_GT(dropped, 8);
  ASSERT_FALSE(f.status().graph_breaks.empty());
  EXPECT_TRUE(has(f.status().graph_breaks[0], "at op dropout")) << f.status().graph_breaks[0];
  EXPECT_TRUE(has(f.status().graph_breaks[0], "captured graph would repeat")) << f.status().graph_breaks[0];
  // Another call draws other numbers: nothing random was captured.
  const std::vector<float> y2 = f(x).to_vector();
  EXPECT_NE(y, y2);
}

TEST(GraphBreaks, FullgraphMakesEachBreakAnErrorGivingItsReason) {
  Branchy m;
  CompileOptions o;
  o.fullgraph = true;
  auto read = compile(m, &Branchy::host_read, o);
  std::string msg = npucache::testing::error_message([&] { (void)read(input(1.0f)); });
  EXPECT_TRUE(has(msg, "graph break in Branchy.host_read at op sum")) << msg;
  EXPECT_TRUE(has(msg, "fullgraph=true needs the method to trace to one graph")) << msg;
  auto branch = compile(m, &Branchy::branch, o);
  msg = npucache::testing::error_message([&] { (void)branch(input(1.0f)); });
  EXPECT_TRUE(has(msg, "truth value decides a branch")) << msg;
  // The method stays usable: a failed first call leaves it as it was.
  msg = npucache::testing::error_message([&] { (void)read(input(1.0f)); });
  EXPECT_TRUE(has(msg, "graph break in Branchy.host_read")) << msg;
}

// Request threads calling a split method at once: each thread's pieces run
// in its own lazy session; results equal eager.
TEST(GraphBreaks, ConcurrentCallersOfASplitMethod) {
  Branchy m;
  auto f = compile(m, &Branchy::host_read);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        Tensor x = input(((t + i) % 2) ? 1.0f : -1.0f);
        const auto a = f(x).to_vector(), b = m.host_read(x).to_vector();
        for (std::size_t k = 0; k < a.size(); ++k)
          if (std::fabs(a[k] - b[k]) > 1e-4f) ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(f.compiles(), 3u);
}

// A graph break inside a decode step: its pieces follow automatic dynamic
// as whole methods do. The sizes that change (kv_len, the history's
// length) turn symbolic after their first change, later steps reuse the
// general pieces, and a restart on the cache compiles nothing.
class GraphBreakDynamic : public testing_support::TempDirTest {};

TEST_F(GraphBreakDynamic, PiecesOfADecodeStepFollowAutomaticDynamic) {
  constexpr int kSteps = 10;
  BrokenDecoder m;
  const auto eager = decode_eager(m, kSteps);
  for (const char* mode : {"default", "reduce-overhead"}) {
    // Automatic dynamic: each piece static, then general after its change.
    CompileOptions o;
    o.mode = mode;
    auto f = compile(m, &BrokenDecoder::step, o);
    expect_same_steps(decode(f, kSteps), eager, mode);
    EXPECT_EQ(f.status().graph_breaks.size(), 1u) << mode;
    EXPECT_EQ(f.compiles(), 4u) << mode << ": 2 pieces, static then general (not one a step)";
    // dynamic=true: general from the start.
    o.dynamic = true;
    auto g = compile(m, &BrokenDecoder::step, o);
    expect_same_steps(decode(g, kSteps), eager, std::string(mode) + " dynamic=true");
    EXPECT_EQ(g.compiles(), 2u) << mode << " dynamic=true";
    // dynamic=false keeps static pieces: one a step.
    o.dynamic = false;
    auto h = compile(m, &BrokenDecoder::step, o);
    expect_same_steps(decode(h, 4), eager, std::string(mode) + " dynamic=false");
    EXPECT_EQ(h.compiles(), 8u) << mode << " dynamic=false";
  }
}

TEST_F(GraphBreakDynamic, ARestartIsWarmWithTheGeneralPieces) {
  constexpr int kSteps = 8;
  BrokenDecoder m;
  const auto eager = decode_eager(m, kSteps);
  CacheOptions o;
  o.cache_dir = dir.string();
  o.compile.dynamic = std::nullopt;  // automatic dynamic, kept in the cache's profile
  o.compile.fullgraph = false;
  o.compile.mode = "reduce-overhead";
  {
    auto f = cache_compile(m, &BrokenDecoder::step, o);
    expect_same_steps(decode(f, kSteps), eager, "first start");
    EXPECT_EQ(f.compiles(), 4u);
  }
  // A restart (a new cache_compile on the directory): every piece, the
  // general ones included, comes from the cache.
  auto f = cache_compile(m, &BrokenDecoder::step, o);
  expect_same_steps(decode(f, kSteps), eager, "restart");
  EXPECT_EQ(f.compiles(), 0u);
}

// Hostile sizes: a constant that equals a changing size at some call. A
// general piece runs only a recording it is exactly, so every call equals
// eager whatever the values and the policy.
TEST(GraphBreakDynamicMatch, AConstantEqualToASizeIsNeverTakenForIt) {
  Coincide m;
  const Tensor x = Tensor::from_vector(ramp(8 * 16, 0.03f, -0.15f), {1, 8, 16});
  for (std::optional<bool> dynamic : {std::optional<bool>{}, std::optional<bool>{true}}) {
    CompileOptions o;
    o.dynamic = dynamic;
    auto f = compile(m, &Coincide::forward, o);
    for (int64_t n : {4, 5, 6, 3, 4, 7, 4, 2})
      expect_close(f(x, n).to_vector(), m.forward(x, n).to_vector(),
                   std::string(dynamic ? "dynamic=true" : "automatic") + " n=" + std::to_string(n));
    auto g = compile(m, &Coincide::shifted, o);
    for (int64_t n : {3, 4, 5, 6, 2, 7}) {
      const Tensor xn = Tensor::from_vector(ramp((n + 1) * 16, 0.02f, -0.1f), {1, n + 1, 16});
      expect_close(g(x, xn, n).to_vector(), m.shifted(x, xn, n).to_vector(),
                   std::string(dynamic ? "dynamic=true" : "automatic") + " shifted n=" + std::to_string(n));
    }
  }
}

// dynamic=true makes every size of a piece a site, the attention's head
// width (8, the input's width) and head count among them: a general piece
// keeps both constant (the default scale reads the head width), and a call
// at other sizes (B=1, S=1 after B=2, S=3) runs as eager does, in every
// mode.
TEST(GraphBreakDynamicMatch, AnAttentionsHeadsStayConstantInAGeneralPiece) {
  for (int64_t heads : {1, 2}) {
    HeadsThenBreak m;
    m.heads = heads;
    for (const char* mode : {"default", "max-autotune", "reduce-overhead"}) {
      CompileOptions o;
      o.mode = mode;
      o.dynamic = true;
      auto f = compile(m, &HeadsThenBreak::forward, o);
      for (auto [b, s] : {std::pair<int64_t, int64_t>{2, 3}, {1, 1}, {2, 5}, {1, 4}, {3, 2}}) {
        const Tensor x = Tensor::from_vector(ramp(b * s * 8, 0.04f, -0.2f), {b, s, 8});
        const std::string what = std::string(mode) + " heads=" + std::to_string(heads) + " B=" + std::to_string(b) +
                                 " S=" + std::to_string(s);
        std::vector<float> got;
        ASSERT_NO_THROW(got = f(x).to_vector()) << what;
        expect_close(got, m.forward(x).to_vector(), what);
      }
      EXPECT_EQ(f.status().graph_breaks.size(), 1u) << mode;
    }
  }
}

// A general piece that cannot compile for a reason of its general form (a
// decomposition needs a size as a constant) never fails a call eager code
// runs: the place falls back to static pieces, that call included.
TEST(GraphBreakDynamicMatch, AGeneralPieceThatCannotCompileFallsBackToStatic) {
  SiluThenBreak m;
  for (const char* mode : {"default", "max-autotune", "reduce-overhead"}) {
    CompileOptions o;
    o.mode = mode;
    o.dynamic = true;
    o.custom_decompositions[Op::silu] = {"test.width_as_constant", [](const std::vector<Tensor>& in, const Attrs&) {
                                           const int64_t width =
                                               in[0].size(static_cast<int64_t>(in[0].rank()) - 1).constant();
                                           return in[0] * ops::sigmoid(in[0]) * (width > 0 ? 1.0f : 0.0f);
                                         }};
    auto f = compile(m, &SiluThenBreak::forward, o);
    for (auto [b, w] : {std::pair<int64_t, int64_t>{2, 8}, {3, 8}, {2, 6}, {2, 8}}) {
      const Tensor x = Tensor::from_vector(ramp(b * w, 0.05f, -0.3f), {b, w});
      const std::string what = std::string(mode) + " " + std::to_string(b) + "x" + std::to_string(w);
      std::vector<float> got;
      ASSERT_NO_THROW(got = f(x).to_vector()) << what;
      expect_close(got, m.forward(x).to_vector(), what);
    }
    EXPECT_EQ(f.status().graph_breaks.size(), 1u) << mode;
    // Static pieces: the first piece once a size (2x8 again is found), the
    // second (a tanh, general) once.
    EXPECT_EQ(f.compiles(), 4u) << mode;
  }
}

// prepare() of a split method obtains the pieces the code reaches without
// running any: at a host read of a value no piece computed it stops, and the
// status says so -- never `compiled` for what was not. A model's real
// weights are not read either: what a prepare reaches never depends on
// values it did not compute.
TEST(GraphBreaksPrepare, StopsAtAHostReadItCannotKnowAndSaysWhere) {
  Branchy meta(true), real;
  for (Branchy* m : {&meta, &real}) {
    SCOPED_TRACE(m == &meta ? "meta weights" : "real weights");
    auto f = compile(*m, &Branchy::host_read);
    EXPECT_EQ(f.status().outcome, Outcome::none);  // nothing yet
    const Tensor x = m == &meta ? Tensor::meta({4, 16}) : input(1.0f);
    const CallStatus& s = f.prepare(x);
    EXPECT_EQ(s.outcome, Outcome::partial) << s.reason;
    EXPECT_EQ(s.pieces, 1u) << s.reason;
    EXPECT_EQ(f.compiles(), 1u);
    EXPECT_TRUE(has(s.stopped_at, "graph break 1 in Branchy.host_read at op sum")) << s.stopped_at;
    EXPECT_TRUE(has(s.stopped_at, "no value for item() of sum")) << s.stopped_at;
    EXPECT_TRUE(has(s.stopped_at, "the pieces after it are not prepared")) << s.stopped_at;
    ASSERT_EQ(s.graph_breaks.size(), 1u);
    EXPECT_TRUE(has(s.reason, "prepared 1 piece without running them (1 compiled, 0 from the cache)")) << s.reason;
    // Again: the piece is found by its content, nothing compiles, and the
    // outcome is still partial.
    EXPECT_EQ(f.prepare(x).outcome, Outcome::partial);
    EXPECT_EQ(f.compiles(), 1u);
  }
  // A truth value deciding a branch stops it the same way.
  auto b = compile(meta, &Branchy::branch);
  const CallStatus& s = b.prepare(Tensor::meta({4, 16}));
  EXPECT_EQ(s.outcome, Outcome::partial);
  EXPECT_TRUE(has(s.stopped_at, "no value for bool() of gt")) << s.stopped_at;
}

// Hints give the values host reads see, so a warmup covers both sides of a
// branch; the calls after it (real weights, both sides) compile nothing.
TEST(GraphBreaksPrepare, HintsCoverBothSidesOfABranch) {
  Branchy m;
  auto f = compile(m, &Branchy::host_read);
  std::vector<HostRead> seen;
  for (double total : {1.0, -1.0}) {
    PrepareHints hints;
    hints.value = [&](const HostRead& r) -> std::optional<std::vector<double>> {
      seen.push_back(r);
      return std::vector<double>{total};
    };
    const CallStatus& s = f.prepare(hints, Tensor::meta({4, 16}));
    EXPECT_EQ(s.outcome, Outcome::compiled) << s.reason;
    EXPECT_EQ(s.pieces, 2u) << s.reason;
    EXPECT_TRUE(s.stopped_at.empty()) << s.stopped_at;
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].index, 0u);
  EXPECT_EQ(seen[0].access, "item");
  EXPECT_TRUE(has(seen[0].op, "sum")) << seen[0].op;
  EXPECT_EQ(type_str(seen[0].type), "f32[]");
  EXPECT_EQ(f.compiles(), 3u);  // before the read, and each side after it
  for (float sign : {1.0f, -1.0f}) {
    Tensor x = input(sign);
    expect_close(f(x).to_vector(), m.host_read(x).to_vector(), "sign " + std::to_string(sign));
    EXPECT_EQ(f.status().outcome, Outcome::compiled);  // programs this process compiled (in prepare)
    EXPECT_EQ(f.status().pieces, 2u);
  }
  EXPECT_EQ(f.compiles(), 3u);
  // A list of values: the i-th read sees the i-th; a truth value as a number.
  auto b = compile(m, &Branchy::branch);
  PrepareHints zero;
  zero.values = {{0.0}};
  EXPECT_EQ(b.prepare(zero, Tensor::meta({4, 16})).outcome, Outcome::compiled);
  EXPECT_EQ(b.compiles(), 2u);
}

// A hint the real calls do not see only costs them a compile: pieces are
// found by their content, so no call ever runs a piece of the other side.
// A value of the wrong size is an error saying what was expected.
TEST(GraphBreaksPrepare, AWrongHintCostsACompileNeverAWrongResult) {
  Branchy m;
  auto f = compile(m, &Branchy::host_read);
  PrepareHints positive;
  positive.values = {{1.0}};
  f.prepare(positive, Tensor::meta({4, 16}));
  ASSERT_EQ(f.compiles(), 2u);
  Tensor x = input(-1.0f);
  ASSERT_LT(ops::sum(ops::matmul(x, m.w) * 2.0f, {0, 1}).item(), 0.0f);  // the other side
  expect_close(f(x).to_vector(), m.host_read(x).to_vector(), "the side the hint did not take");
  EXPECT_EQ(f.compiles(), 3u);
  PrepareHints two;
  two.values = {{1.0, 2.0}};
  std::string msg;
  try {
    f.prepare(two, Tensor::meta({4, 16}));
  } catch (const ConfigError& e) {
    msg = e.what();
  }
  EXPECT_TRUE(has(msg, "the value given for item() of sum")) << msg;
  EXPECT_TRUE(has(msg, "has 2 element(s); the tensor has 1")) << msg;
  // The method still prepares and runs.
  EXPECT_EQ(f.prepare(positive, Tensor::meta({4, 16})).outcome, Outcome::compiled);
  expect_close(f(x).to_vector(), m.host_read(x).to_vector(), "after a bad hint");
}

// Eager code between pieces runs on meta tensors in prepare(): an op the
// mode cannot lower (dropout, captured) gives a meta result, and the pieces
// on both sides of it are prepared, their capture templates included.
TEST(GraphBreaksPrepare, AnUnlowerableOpBetweenPiecesGivesAMetaResult) {
  Branchy meta(true);
  CompileOptions o;
  o.mode = "reduce-overhead";
  auto f = compile(meta, &Branchy::noisy, o);
  const CallStatus& s = f.prepare(Tensor::meta({4, 16}));
  EXPECT_EQ(s.outcome, Outcome::compiled) << s.reason << s.stopped_at;
  EXPECT_EQ(s.pieces, 2u) << s.reason;
  EXPECT_EQ(f.compiles(), 2u);
}

// Before any call or prepare a method's status says nothing happened.
TEST(GraphBreaksPrepare, NothingIsReportedCompiledBeforeACall) {
  Branchy m;
  auto f = compile(m, &Branchy::host_read);
  EXPECT_EQ(f.status().outcome, Outcome::none);
  EXPECT_EQ(outcome_name(Outcome::none), "none");
  EXPECT_EQ(outcome_name(Outcome::partial), "partial");
}

// A real tensor a prepared piece would update in place keeps its old
// values (prepare() runs nothing): a host read of it stops the prepare, or
// sees its hint -- never the stale values.
TEST(GraphBreaksPrepare, AReadOfATensorAPreparedPieceUpdatesStops) {
  Branchy m;
  CompileOptions o;
  o.dynamic = false;
  auto f = compile(m, &Branchy::update_then_read, o);
  Tensor kc = Tensor::from_vector(std::vector<float>(32, 0.0f), {1, 4, 8});
  const Tensor pos = Tensor::from_vector_i64({1}, {1, 1});
  const Tensor v = Tensor::from_vector(ramp(8, 0.1f, 0.3f), {1, 1, 8});
  const CallStatus& s = f.prepare(kc, pos, v);
  EXPECT_EQ(s.outcome, Outcome::partial) << s.reason;
  EXPECT_EQ(s.pieces, 1u);
  EXPECT_TRUE(has(s.stopped_at, "no value for to_vector() of a tensor a prepared piece updates in place"))
      << s.stopped_at;
  EXPECT_EQ(kc.to_vector(), std::vector<float>(32, 0.0f));  // nothing was written
  PrepareHints hints;
  hints.values = {std::vector<double>(32, 1.0)};
  EXPECT_EQ(f.prepare(hints, kc, pos, v).outcome, Outcome::compiled);
  EXPECT_EQ(kc.to_vector(), std::vector<float>(32, 0.0f));
  Tensor ke = Tensor::from_vector(std::vector<float>(32, 0.0f), {1, 4, 8});
  expect_close(f(kc, pos, v).to_vector(), m.update_then_read(ke, pos, v).to_vector(), "after prepare");
  expect_close(kc.to_vector(), ke.to_vector(), "the cache after the call");
}

// A method that catches the stop and goes on with a value of its own is
// still reported as stopped: what it prepared after the read followed a
// value nobody knew.
TEST(GraphBreaksPrepare, AStopTheMethodCatchesIsStillReported) {
  Branchy meta(true);
  auto f = compile(meta, &Branchy::guarded);
  const CallStatus& s = f.prepare(Tensor::meta({4, 16}));
  EXPECT_EQ(s.outcome, Outcome::partial) << s.reason;
  EXPECT_TRUE(has(s.stopped_at, "no value for item() of sum")) << s.stopped_at;
}
