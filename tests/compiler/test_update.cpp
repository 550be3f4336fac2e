// The update mechanism of seed 003: an operator whose host-side parameter
// changes every step (fused attention's actual KV length, a SymInt of the
// method) is patched at each replay of one capture, never captured again,
// and equals eager at every step.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include <gtest/gtest.h>

#include <cmath>

#include "nn/bind_plan.h"
#include "support/error_message.h"
#include "support/small_models.h"

using namespace npucache;
using testing_support::ramp;

namespace {

// This file's values repeat every 11 (ramp's default is 13).
constexpr int kPeriod = 11;

constexpr int64_t kHeads = 2, kHeadDim = 4, kHidden = kHeads * kHeadDim;

// One attention layer of a decode step over a KV cache [1, S, heads, dim].
struct DecodeLayer : nn::Module {
  Tensor wq, wk, wv, wo;
  DecodeLayer() {
    wq = register_parameter("wq",
                            Tensor::from_vector(ramp(kHidden * kHidden, 0.02f, -0.1f, kPeriod), {kHidden, kHidden}));
    wk = register_parameter("wk",
                            Tensor::from_vector(ramp(kHidden * kHidden, 0.015f, -0.07f, kPeriod), {kHidden, kHidden}));
    wv = register_parameter("wv",
                            Tensor::from_vector(ramp(kHidden * kHidden, 0.01f, -0.05f, kPeriod), {kHidden, kHidden}));
    wo = register_parameter("wo",
                            Tensor::from_vector(ramp(kHidden * kHidden, 0.03f, -0.15f, kPeriod), {kHidden, kHidden}));
  }
  std::string type_name() const override { return "DecodeLayer"; }
  // x [1, 1, hidden], pos [1, 1]: writes this token's k/v at pos and
  // attends over the first kv_len = pos + 1 keys.
  Tensor step(const Tensor& x, const Tensor& pos, const Tensor& kc, const Tensor& vc, SymInt kv_len) {
    auto heads = [](const Tensor& t) { return t.reshape({1, 1, kHeads, kHeadDim}); };
    Tensor k = ops::buffer_update(kc, pos, heads(ops::matmul(x, wk)));
    Tensor v = ops::buffer_update(vc, pos, heads(ops::matmul(x, wv)));
    Tensor q = heads(ops::matmul(x, wq)).permute({0, 2, 1, 3});
    Tensor a = ops::fused_attention(q, k.permute({0, 2, 1, 3}), v.permute({0, 2, 1, 3}), kv_len);
    return ops::tanh(ops::matmul(a.permute({0, 2, 1, 3}).reshape({1, 1, kHidden}), wo)) + x;
  }
};

struct Loop {
  Tensor kc, vc;
  explicit Loop(int64_t max_seq)
      : kc(Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(max_seq * kHidden), 0.0f),
                               {1, max_seq, kHeads, kHeadDim})),
        vc(Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(max_seq * kHidden), 0.0f),
                               {1, max_seq, kHeads, kHeadDim})) {}
};

}  // namespace

// fused_attention equals the decomposed causal attention restricted to the
// first kv_len keys.
TEST(Update, FusedAttentionEqualsAttentionOverTheFirstKeys) {
  const int64_t S = 12, len = 7;
  Tensor q = Tensor::from_vector(ramp(2 * 3 * kHeadDim, 0.1f, -0.5f, kPeriod), {1, 2, 3, kHeadDim});
  Tensor k = Tensor::from_vector(ramp(2 * S * kHeadDim, 0.07f, -0.3f, kPeriod), {1, 2, S, kHeadDim});
  Tensor v = Tensor::from_vector(ramp(2 * S * kHeadDim, 0.05f, -0.2f, kPeriod), {1, 2, S, kHeadDim});
  const auto fused = ops::fused_attention(q, k, v, len).to_vector();
  const auto ref = ops::attention(q, k.slice(2, 0, len), v.slice(2, 0, len), true).to_vector();
  ASSERT_EQ(fused.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(fused[i], ref[i], 1e-5) << i;
  const std::string m = npucache::testing::error_message([&] { (void)ops::fused_attention(q, k, v, S + 1); });
  EXPECT_NE(m.find("kv_len exceeds the cache length"), std::string::npos) << m;
}

// A decode loop of 1,000 steps with a growing KV length replays one
// capture, patched each step, and equals eager at every step.
TEST(Update, ThousandStepDecodeLoopReplaysOneCapture) {
  constexpr int64_t kSteps = 1000;
  DecodeLayer layer;
  CompileOptions o;
  o.mode = "reduce-overhead";
  o.dynamic = true;  // kv_len is a symbol from the first call
  auto step = compile(layer, &DecodeLayer::step, o);
  Loop compiled(kSteps), eager(kSteps);
  Tensor x = Tensor::from_vector(ramp(kHidden, 0.1f, -0.4f, kPeriod), {1, 1, kHidden});
  Tensor xe = x;
  float worst = 0;
  for (int64_t t = 0; t < kSteps; ++t) {
    Tensor pos = Tensor::from_vector_i64({t}, {1, 1});
    x = step(x, pos, compiled.kc, compiled.vc, t + 1);  // the output fed back
    xe = layer.step(xe, pos, eager.kc, eager.vc, t + 1);
    const auto a = x.to_vector(), b = xe.to_vector();
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    ASSERT_LE(worst, 1e-4f) << "step " << t;
    ASSERT_TRUE(step.status().replayed) << "step " << t;
  }
  EXPECT_EQ(step.compiles(), 1u);
  EXPECT_EQ(step.status().captures, 1u);
}

// Automatic dynamic makes a SymInt dynamic once its value changed: two
// compiles, one capture of the dynamic program, patched afterwards.
TEST(Update, AutomaticDynamicTurnsTheSymIntDynamicOnce) {
  DecodeLayer layer;
  CompileOptions o;
  o.mode = "reduce-overhead";
  auto step = compile(layer, &DecodeLayer::step, o);
  Loop compiled(64), eager(64);
  Tensor x = Tensor::from_vector(ramp(kHidden, 0.1f, -0.4f, kPeriod), {1, 1, kHidden});
  Tensor xe = x;
  for (int64_t t = 0; t < 40; ++t) {
    Tensor pos = Tensor::from_vector_i64({t}, {1, 1});
    x = step(x, pos, compiled.kc, compiled.vc, t + 1).clone();
    xe = layer.step(xe, pos, eager.kc, eager.vc, t + 1);
    const auto a = x.to_vector(), b = xe.to_vector();
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << "step " << t;
  }
  EXPECT_EQ(step.compiles(), 2u);
  EXPECT_EQ(step.status().captures, 2u);  // the static first program's, then the dynamic one's
  ASSERT_EQ(step.status().dynamic_dims.size(), 1u);
  EXPECT_EQ(step.status().dynamic_dims[0], "arg4 dim 0");
}

// A static trace specialises the SymInt: another value is a recompile
// naming it.
TEST(Update, StaticTraceGuardsTheSymInt) {
  DecodeLayer layer;
  CompileOptions o;
  o.dynamic = false;
  auto step = compile(layer, &DecodeLayer::step, o);
  Loop l(8);
  Tensor x = Tensor::from_vector(ramp(kHidden, 0.1f, -0.4f, kPeriod), {1, 1, kHidden});
  (void)step(x, Tensor::from_vector_i64({0}, {1, 1}), l.kc, l.vc, 1);
  (void)step(x, Tensor::from_vector_i64({1}, {1, 1}), l.kc, l.vc, 2);
  EXPECT_EQ(step.compiles(), 2u);
  EXPECT_NE(step.status().reason.find("SymInt 'arg4' was 1 when traced, now 2"), std::string::npos)
      << step.status().reason;
}

namespace {
// Four attention steps over one KV cache: two alike (one patched copy of
// their attributes serves both per call), one with another scale, one over
// another SymInt: each must keep its own attributes at every replay.
struct MixedAttention : DecodeLayer {
  std::string type_name() const override { return "MixedAttention"; }
  Tensor mixed(const Tensor& x, const Tensor& pos, const Tensor& kc, const Tensor& vc, SymInt kv_len, SymInt half) {
    auto heads = [](const Tensor& t) { return t.reshape({1, 1, kHeads, kHeadDim}); };
    Tensor k = ops::buffer_update(kc, pos, heads(ops::matmul(x, wk))).permute({0, 2, 1, 3});
    Tensor v = ops::buffer_update(vc, pos, heads(ops::matmul(x, wv))).permute({0, 2, 1, 3});
    Tensor q = heads(ops::matmul(x, wq)).permute({0, 2, 1, 3});
    Tensor a = ops::fused_attention(q, k, v, kv_len);
    Tensor b = ops::fused_attention(q, k, v, kv_len, true, Tensor(), 0.25);  // not 1/sqrt(dim)
    Tensor c = ops::fused_attention(q, k, v, kv_len);
    Tensor d = ops::fused_attention(q, k, v, half);
    Tensor s = a + b * 2.0f + c * 3.0f + d * 4.0f;
    return ops::tanh(ops::matmul(s.permute({0, 2, 1, 3}).reshape({1, 1, kHidden}), wo));
  }
};
}  // namespace

TEST(Update, AttentionStepsWithOtherAttributesKeepTheirOwnPatches) {
  constexpr int64_t kSteps = 24;
  MixedAttention m;
  CompileOptions o;
  o.mode = "reduce-overhead";
  o.dynamic = true;
  auto step = compile(m, &MixedAttention::mixed, o);
  Loop compiled(kSteps), eager(kSteps);
  const Tensor x = Tensor::from_vector(ramp(kHidden, 0.1f, -0.4f, kPeriod), {1, 1, kHidden});
  for (int64_t t = 2; t < kSteps; ++t) {  // from kv_len 3, half 2: two symbols from the first call
    Tensor pos = Tensor::from_vector_i64({t}, {1, 1});
    const auto a = step(x, pos, compiled.kc, compiled.vc, t + 1, t / 2 + 1).to_vector();
    const auto b = m.mixed(x, pos, eager.kc, eager.vc, t + 1, t / 2 + 1).to_vector();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << "step " << t << " element " << i;
    ASSERT_TRUE(step.status().replayed) << "step " << t;
  }
  EXPECT_EQ(step.status().captures, 1u);
}

// The replay path binds a call with a flat table made once per entry
// (nn::BindPlan): it binds what the signature's own bind() binds and fails
// with the same message on every kind of mismatch.
TEST(BindPlan, BindsAndFailsExactlyAsTheSignature) {
  const SymExpr s0 = SymExpr::symbol("s0"), s1 = SymExpr::symbol("s1"), s10 = SymExpr::symbol("s10");
  InputSignature sig;
  sig.inputs.push_back({"x", {DType::f32, {s0, 4, s1}}});
  sig.inputs.push_back({"kv", {DType::f32, {s1, s10, s0 * 2}}});  // shared symbols, a compound dim
  sig.inputs.push_back({"pos", {DType::i64, {1, s0}}});
  sig.sym_inputs.push_back({"kv_len", SymExpr::symbol("s2")});
  sig.sym_inputs.push_back({"fixed", SymExpr(7)});
  sig.sym_inputs.push_back({"twice", s10 + s10});
  sig.dim_bounds.push_back({SymExpr::symbol("s2"), s10});
  sig.dim_bounds.push_back({SymExpr(2), s0});
  sig.dim_bounds.push_back({s0 + 1, s1 * 2});
  sig.guards.push_back({"arg0.is_prompt", "false"});
  const nn::BindPlan plan(sig);
  struct Call {
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
    std::vector<std::pair<std::string, int64_t>> symints;
    std::string guard = "false";
    DType pos_type = DType::i64;
  };
  const Call good{{{"x", {3, 4, 5}}, {"kv", {5, 9, 6}}, {"pos", {1, 3}}}, {{"kv_len", 8}, {"fixed", 7}, {"twice", 18}}};
  std::vector<Call> calls(18, good);
  calls[1].tensors[1].second[0] = 6;        // s1 differs between inputs
  calls[2].tensors[0].second[1] = 5;        // a constant dim
  calls[3].tensors[1].second[2] = 7;        // the compound dim
  calls[4].symints[0].second = 10;          // the bound s2 <= s10 broken
  calls[5].symints[1].second = 8;           // a SymInt specialised to 7
  calls[6].symints[2].second = 17;          // a compound SymInt
  calls[7].guard = "true";                  // a plain value
  calls[8].tensors.pop_back();              // a tensor missing
  calls[9].tensors[2].first = "position";   // another path
  calls[10].pos_type = DType::f32;          // another dtype
  calls[11].tensors[2].second = {3};        // another rank
  calls[12].symints.pop_back();             // a SymInt missing
  calls[13].tensors[2].second[1] = 4;       // s0 bound by x, differs in pos
  calls[14].symints[0].first = "len";       // a SymInt's path
  calls[15].tensors[0].second = {2, 4, 3};  // other sizes that bind
  calls[15].tensors[1].second = {3, 9, 4};
  calls[15].tensors[2].second = {1, 2};
  calls[16].tensors[0].second = {1, 4, 5};  // the bound 2 <= s0 broken
  calls[16].tensors[1].second = {5, 9, 2};
  calls[16].tensors[2].second = {1, 1};
  calls[17].tensors[0].second = {6, 4, 3};  // the bound s0 + 1 <= s1 * 2 broken
  calls[17].tensors[1].second = {3, 9, 12};
  calls[17].tensors[2].second = {1, 6};
  int failures = 0;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    FlatArgs args;
    for (const auto& [path, dims] : calls[c].tensors)
      args.tensors.emplace_back(path, Tensor::meta(dims, path == "pos" ? calls[c].pos_type : DType::f32));
    args.symints = calls[c].symints;
    args.values.push_back({"arg0.is_prompt", calls[c].guard});
    std::string want, got;
    SymBindings bw, bg;
    try {
      bw = sig.bind(args);
    } catch (const TraceError& e) {
      want = e.what();
    }
    try {
      bg = plan.bind(args);
    } catch (const TraceError& e) {
      got = e.what();
    }
    EXPECT_EQ(got, want) << "call " << c;
    EXPECT_EQ(bg, bw) << "call " << c;
    failures += !want.empty();
  }
  EXPECT_EQ(failures, 16);  // every call but the two that fit
}

// A parameter whose values are replaced between replays (a weight update
// in place) is read anew by the next replay: the replay binds the
// parameter's storage every call, it never keeps the values it captured.
TEST(Update, ReplaysReadParametersReplacedBetweenCalls) {
  constexpr int64_t kSteps = 6;
  DecodeLayer layer;
  CompileOptions o;
  o.mode = "reduce-overhead";
  o.dynamic = true;
  auto step = compile(layer, &DecodeLayer::step, o);
  Loop compiled(kSteps), eager(kSteps);
  const Tensor x = Tensor::from_vector(ramp(kHidden, 0.1f, -0.4f, kPeriod), {1, 1, kHidden});
  for (int64_t t = 0; t < kSteps; ++t) {
    if (t == 3) {  // replaced after the capture, between two replays
      layer.wo.copy_from(ramp(kHidden * kHidden, -0.05f, 0.2f, 7));
      layer.wq.copy_from(ramp(kHidden * kHidden, 0.04f, -0.3f, 5));
    }
    Tensor pos = Tensor::from_vector_i64({t}, {1, 1});
    const auto a = step(x, pos, compiled.kc, compiled.vc, t + 1).to_vector();
    const auto b = layer.step(x, pos, eager.kc, eager.vc, t + 1).to_vector();
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << "step " << t << " element " << i;
    ASSERT_TRUE(step.status().replayed) << "step " << t;
  }
  EXPECT_EQ(step.status().captures, 1u);
}
