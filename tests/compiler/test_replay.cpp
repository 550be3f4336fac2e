// reduce-overhead replays are right in every calling pattern users write:
// outputs fed back as inputs, swapped and repeated arguments, copy input
// mode, outputs kept across calls (detected, or fresh copies), other threads
// running eager work while a capture is recorded.
#include <npucache/compile.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/ops.h>

#include "compiler/compiled_graph.h"
#include "runtime/pool.h"
#include "support/expect_close.h"
#include "support/small_models.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

using namespace npucache;
using testing_support::expect_close;
using testing_support::ramp;

namespace {

// A recurrent step, an asymmetric binary function and an in-place update.
struct Cell : nn::Module {
  Tensor w, bias;
  Cell() {
    w = register_parameter("w", Tensor::from_vector(ramp(16 * 16, 0.01f, -0.05f), {16, 16}));
    bias = register_parameter("bias", Tensor::from_vector(ramp(16, 0.02f, -0.1f), {16}));
  }
  std::string type_name() const override { return "Cell"; }
  // h [4, 16] -> tanh(h w^T + b): the decode loop's shape.
  Tensor step(const Tensor& h) { return ops::tanh(ops::linear(h, w, bias)); }
  // The step and its input, returned as it came.
  std::vector<Tensor> step_and_input(const Tensor& h) { return {step(h), h}; }
  // The step of g, and h returned untouched (no kernel reads it).
  std::vector<Tensor> step_and_other(const Tensor& g, const Tensor& h) { return {step(g), h}; }
  // a - 2 b, then mixed through the weights: swapping a and b changes it.
  Tensor combine(const Tensor& a, const Tensor& b) { return ops::linear(a - b * 2.0f, w, bias); }
  // Writes `v` at `pos` of `cache` in place and returns cache * 2.
  Tensor write(const Tensor& cache, const Tensor& pos, const Tensor& v) {
    Tensor c = ops::buffer_update(cache, pos, v);
    return c * 2.0f;
  }
};

CompileOptions replay_options(InputHandling handling = InputHandling::update_address, bool dynamic = false) {
  CompileOptions o;
  CompilerConfig c;
  c.mode = CompileMode::reduce_overhead;
  c.input_handling = handling;
  o.config = c;
  o.dynamic = dynamic;
  return o;
}

class Handling : public ::testing::TestWithParam<InputHandling> {};

}  // namespace

// h = step(h): the output of one replay is the next replay's input.
TEST_P(Handling, OutputFedBackAsNextInput) {
  Cell cell;
  auto step = compile(cell, &Cell::step, replay_options(GetParam()));
  Tensor h = Tensor::from_vector(ramp(64, 0.1f, -0.6f), {4, 16});
  Tensor e = h;
  for (int i = 0; i < 40; ++i) {
    h = step(h);
    e = cell.step(e);
    expect_close(h.to_vector(), e.to_vector(), "step " + std::to_string(i));
  }
  EXPECT_EQ(step.compiles(), 1u);
}

// A result that is the call's own input, in the decode loop: the input is
// the previous output, in the memory this replay overwrites, and the result
// still reads as the input's values (it once raised "overwritten by a later
// replay" on the very call that returned it; found by the differential
// hunt).
TEST_P(Handling, AnInputReturnedAsAResultInTheDecodeLoop) {
  Cell cell;
  for (bool dynamic : {false, true}) {
    auto f = compile(cell, &Cell::step_and_input, replay_options(GetParam(), dynamic));
    Tensor h = Tensor::from_vector(ramp(64, 0.1f, -0.6f), {4, 16});
    for (int i = 0; i < 6; ++i) {
      const auto before = h.to_vector();
      const auto want = cell.step_and_input(h);
      const auto want0 = want[0].to_vector();
      std::vector<Tensor> got = f(h);
      ASSERT_EQ(got.size(), 2u);
      expect_close(got[0].to_vector(), want0, "step " + std::to_string(i));
      EXPECT_EQ(got[1].to_vector(), before) << "the input returned by call " << i << (dynamic ? " (dynamic)" : "");
      h = got[0];
    }
    // An input returned untouched, which no kernel reads.
    auto g = compile(cell, &Cell::step_and_other, replay_options(GetParam(), dynamic));
    const Tensor x = Tensor::from_vector(ramp(64, 0.05f, -0.2f), {4, 16});
    for (int i = 0; i < 6; ++i) {
      const auto before = h.to_vector();
      std::vector<Tensor> got = g(x, h);
      ASSERT_EQ(got.size(), 2u);
      expect_close(got[0].to_vector(), cell.step(x).to_vector(), "step of x " + std::to_string(i));
      EXPECT_EQ(got[1].to_vector(), before) << "the untouched input returned by call " << i;
      h = got[0];
    }
  }
}

TEST_P(Handling, SwappedAndRepeatedArguments) {
  Cell cell;
  auto f = compile(cell, &Cell::combine, replay_options(GetParam()));
  Tensor A = Tensor::from_vector(ramp(64, 0.1f, -0.3f), {4, 16});
  Tensor B = Tensor::from_vector(ramp(64, -0.07f, 0.2f), {4, 16});
  Tensor C = Tensor::from_vector(ramp(64, 0.03f, 0.5f), {4, 16});
  const auto a0 = A.to_vector(), b0 = B.to_vector(), c0 = C.to_vector();
  expect_close(f(A, B).to_vector(), cell.combine(A, B).to_vector(), "f(A, B)");
  expect_close(f(B, A).to_vector(), cell.combine(B, A).to_vector(), "f(B, A)");
  expect_close(f(A, A).to_vector(), cell.combine(A, A).to_vector(), "f(A, A)");
  expect_close(f(B, C).to_vector(), cell.combine(B, C).to_vector(), "f(B, C)");
  expect_close(f(C, C).to_vector(), cell.combine(C, C).to_vector(), "f(C, C)");
  expect_close(f(A, B).to_vector(), cell.combine(A, B).to_vector(), "f(A, B) again");
  // The caller's tensors are never written (copy mode copied into the
  // first input before).
  EXPECT_EQ(A.to_vector(), a0);
  EXPECT_EQ(B.to_vector(), b0);
  EXPECT_EQ(C.to_vector(), c0);
}

// An input the program updates in place (a KV cache) receives the update in
// both modes, and only that input is written.
TEST_P(Handling, InPlaceUpdatesReachTheCallersTensor) {
  Cell cell;
  auto f = compile(cell, &Cell::write, replay_options(GetParam()));
  Tensor cache1 = Tensor::from_vector(std::vector<float>(8 * 16, 0.0f), {1, 8, 16});
  Tensor cache2 = Tensor::from_vector(std::vector<float>(8 * 16, 1.0f), {1, 8, 16});
  Tensor e1 = Tensor::from_vector(std::vector<float>(8 * 16, 0.0f), {1, 8, 16});
  Tensor e2 = Tensor::from_vector(std::vector<float>(8 * 16, 1.0f), {1, 8, 16});
  for (int64_t p = 0; p < 6; ++p) {
    Tensor pos = Tensor::from_vector_i64({p}, {1, 1});
    Tensor v = Tensor::from_vector(ramp(16, 0.1f, static_cast<float>(p)), {1, 1, 16});
    Tensor& c = p % 2 == 0 ? cache1 : cache2;
    Tensor& e = p % 2 == 0 ? e1 : e2;
    Tensor out = f(c, pos, v);
    Tensor eout = cell.write(e, pos, v);
    expect_close(out.to_vector(), eout.to_vector(), "result at " + std::to_string(p));
    expect_close(c.to_vector(), e.to_vector(), "cache at " + std::to_string(p));
  }
  expect_close(cache1.to_vector(), e1.to_vector(), "cache1");
  expect_close(cache2.to_vector(), e2.to_vector(), "cache2");
}

INSTANTIATE_TEST_SUITE_P(Replay, Handling, ::testing::Values(InputHandling::update_address, InputHandling::copy),
                         [](const auto& param_info) {
                           return param_info.param == InputHandling::copy ? std::string("Copy") : std::string("Update");
                         });

// An output that a later replay overwrote is an error on access naming both
// calls; the fresh option keeps every result.
TEST(Replay, OverwrittenOutputIsDetectedOnAccess) {
  Cell cell;
  auto step = compile(cell, &Cell::step, replay_options());
  Tensor x = Tensor::from_vector(ramp(64, 0.1f, -0.6f), {4, 16});
  Tensor y1 = step(x);
  const auto expect1 = cell.step(x).to_vector();
  expect_close(y1.to_vector(), expect1, "before the next call");
  Tensor view = y1.reshape({64});  // a view carries the same check
  Tensor y2 = step(x * 0.5f);
  for (auto read : std::vector<std::function<void()>>{[&] { (void)y1.to_vector(); }, [&] { (void)(y1 + y2); },
                                                      [&] { (void)view.to_vector(); }, [&] { (void)step(y1); }}) {
    try {
      read();
      FAIL() << "reading an overwritten output did not throw";
    } catch (const DeviceError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("Cell.step (call 1)"), std::string::npos) << m;
      EXPECT_NE(m.find("Cell.step (call 2)"), std::string::npos) << m;
      EXPECT_NE(m.find("clone()"), std::string::npos) << m;
    }
  }
  // The latest output is valid; a clone survives later calls.
  Tensor kept = y2.clone();
  const auto expect2 = cell.step(x * 0.5f).to_vector();
  (void)step(x);
  expect_close(kept.to_vector(), expect2, "clone");

  CompileOptions o = replay_options();
  o.replay_outputs = ReplayOutputs::fresh;
  auto fresh = compile(cell, &Cell::step, o);
  Tensor f1 = fresh(x);
  Tensor f2 = fresh(x * 0.5f);
  (void)step(x);  // another method's replay on this thread's pool
  expect_close(f1.to_vector(), expect1, "fresh 1");
  expect_close(f2.to_vector(), expect2, "fresh 2");
}

// Outputs of one thread's replays are not overwritten by another thread's.
TEST(Replay, PoolsArePerThread) {
  Cell cell;
  auto step = compile(cell, &Cell::step, replay_options());
  Tensor x = Tensor::from_vector(ramp(64, 0.1f, -0.6f), {4, 16});
  Tensor y = step(x);
  std::thread([&] { (void)step(x * 2.0f).to_vector(); }).join();
  expect_close(y.to_vector(), cell.step(x).to_vector(), "after another thread's call");
  EXPECT_NE(runtime::MemoryPool::of_this_thread(0)->capacity(), 0u);
}

// Captures of different shapes share one pool: it is as large as the
// largest capture, not their sum.
TEST(Replay, CapturesOfManyShapesShareOnePool) {
  Cell cell;
  auto step = compile(cell, &Cell::step, replay_options());
  auto capture = [&](std::vector<int64_t> batches) {
    std::size_t capacity = 0, peak = 0;
    std::thread([&] {  // a thread of its own: a fresh pool
      for (int64_t b : batches) {
        Tensor x = Tensor::from_vector(ramp(b * 16, 0.1f, -0.6f), {b, 16});
        expect_close(step(x).to_vector(), cell.step(x).to_vector(), "batch " + std::to_string(b));
      }
      const auto pool = runtime::MemoryPool::of_this_thread(0);
      capacity = pool->capacity();
      peak = pool->peak_capacity();
    })
        .join();
    return std::pair{capacity, peak};
  };
  const auto largest = capture({64});
  const auto all = capture({1, 2, 4, 8, 16, 32, 64, 3, 5});
  EXPECT_EQ(step.compiles(), 9u);  // static: one program per batch size
  EXPECT_GT(largest.first, 0u);
  EXPECT_EQ(all.first, largest.first);
  EXPECT_EQ(all.second, largest.first);
}

// Another thread running eager kernels on the same device while this
// thread captures: its kernels run (not recorded into the capture) and both
// get their right values.
TEST(Replay, EagerWorkOfOtherThreadsDuringCapture) {
  Cell cell;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, done{0};
  std::thread eager([&] {
    Tensor a = Tensor::from_vector(std::vector<float>(256, 1.5f), {256});
    while (!stop) {
      Tensor b = a * 2.0f + 1.0f;
      if (b.to_vector()[17] != 4.0f) ++wrong;
      ++done;
    }
  });
  Tensor x = Tensor::from_vector(ramp(64, 0.1f, -0.6f), {4, 16});
  const auto expect = cell.step(x).to_vector();
  for (int i = 0; i < 30; ++i) {
    auto step = compile(cell, &Cell::step, replay_options());  // each first call captures
    expect_close(step(x).to_vector(), expect, "capture " + std::to_string(i));
  }
  stop = true;
  eager.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(done.load(), 0);
}

namespace {

// A plain floating argument, a slice with a fixed end, a gather.
struct Guarded : nn::Module {
  std::string type_name() const override { return "Guarded"; }
  Tensor scaled(const Tensor& x, double t) { return x * t; }
  Tensor head(const Tensor& x) { return x.slice(1, 0, 4) * 2.0f; }
  Tensor pick(const Tensor& x, const Tensor& index) { return ops::gather(x, index, 1); }
  // The same beside a composite op (gelu), which the compiler re-traces
  // into primitives: the re-trace has no sizes to check the bounds with.
  Tensor head_gelu(const Tensor& x) { return ops::gelu(x.slice(1, 0, 4)); }
  Tensor rotate_gelu(const Tensor& x) {
    return ops::gelu(ops::concat({x.slice(1, 1, x.size(1)), x.slice(1, 0, 1)}, 1));
  }
  Tensor pick_gelu(const Tensor& x, const Tensor& index) { return ops::gelu(ops::gather(x, index, 1)); }
};

CompileOptions mode_options(CompileMode m, bool dynamic) {
  CompileOptions o;
  CompilerConfig c;
  c.mode = m;
  c.autotune_candidates = 1;
  c.autotune_min_time_us = 0;
  o.config = c;
  o.dynamic = dynamic;
  return o;
}

class GuardModes : public ::testing::TestWithParam<CompileMode> {};

}  // namespace

// 1e-7 then 1e-9: the second call runs its own program (the guard compares
// every bit; six-digit text made them one guard).
TEST_P(GuardModes, FloatArgumentsAreGuardedExactly) {
  Guarded g;
  auto f = compile(g, &Guarded::scaled, mode_options(GetParam(), true));
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  std::set<uint64_t> distinct;
  for (double t : {1e-7, 1e-9, 1e-7, 0.1, 0.1 + 1e-17, 0.1 + 1e-18, -0.0, 0.0, 3.0}) {
    const auto got = f(x, t).to_vector(), want = g.scaled(x, t).to_vector();
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "t=" << t << " at " << i;
    uint64_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    distinct.insert(bits);
  }
  // One program per distinct double (0.1 + 1e-18 rounds to 0.1; 0.1 +
  // 1e-17 is the next double; -0 and 0 differ in their sign bit).
  EXPECT_EQ(f.compiles(), distinct.size());
  EXPECT_EQ(distinct.size(), 7u);
}

// A slice with a fixed end on a dynamic dim guards the dim: a shorter
// input is not served the program (it is traced again, and fails as eager
// does); a long enough one is.
TEST_P(GuardModes, SliceGuardsItsInputSize) {
  Guarded g;
  auto f = compile(g, &Guarded::head, mode_options(GetParam(), true));
  auto input = [](int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(2 * n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    return Tensor::from_vector(v, {2, n});
  };
  EXPECT_EQ(f(input(6)).to_vector(), g.head(input(6)).to_vector());
  EXPECT_EQ(f(input(5)).to_vector(), g.head(input(5)).to_vector());
  EXPECT_EQ(f.compiles(), 1u);  // 5 >= 4: the same program
  EXPECT_THROW(g.head(input(3)), ShapeError);
  try {
    (void)f(input(3)).to_vector();
    FAIL() << "a 3-wide input was served a program slicing 4";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
  EXPECT_EQ(f(input(4)).to_vector(), g.head(input(4)).to_vector());
}

// gather reads the input in place beside the gathered dim: an index wider
// there than the input is an error, traced or eager, never a read past it.
TEST_P(GuardModes, GatherGuardsTheIndexAgainstTheInput) {
  Guarded g;
  auto f = compile(g, &Guarded::pick, mode_options(GetParam(), true));
  auto x = [](int64_t rows) {
    std::vector<float> v(static_cast<std::size_t>(rows * 3));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    return Tensor::from_vector(v, {rows, 3});
  };
  auto idx = [](int64_t rows) {
    std::vector<int64_t> v(static_cast<std::size_t>(rows * 2), 1);
    return Tensor::from_vector_i64(v, {rows, 2});
  };
  EXPECT_EQ(f(x(4), idx(3)).to_vector(), g.pick(x(4), idx(3)).to_vector());
  EXPECT_EQ(f(x(5), idx(2)).to_vector(), g.pick(x(5), idx(2)).to_vector());
  EXPECT_THROW(g.pick(x(2), idx(3)), ShapeError);
  EXPECT_THROW((void)f(x(2), idx(3)).to_vector(), ShapeError);
}

// A dynamic graph with a composite op and a slice to a constant or
// symbolic end, or a gather whose index has sizes of its own, compiles
// (the compiler's re-trace once refused every such bound, "slice [1, s0)
// out of range for dim of size s0", found by the differential hunt) and
// runs as eager code does.
TEST_P(GuardModes, BoundsSurviveTheCompilersRetrace) {
  Guarded g;
  auto head = compile(g, &Guarded::head_gelu, mode_options(GetParam(), true));
  auto rotate = compile(g, &Guarded::rotate_gelu, mode_options(GetParam(), true));
  auto pick = compile(g, &Guarded::pick_gelu, mode_options(GetParam(), true));
  auto input = [](int64_t rows, int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(rows * n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(i) - 1.0f;
    return Tensor::from_vector(v, {rows, n});
  };
  const Tensor index = Tensor::from_vector_i64({2, 0, 1, 1, 0, 2}, {3, 2});
  for (int64_t n : {6, 5}) {
    expect_close(head(input(2, n)).to_vector(), g.head_gelu(input(2, n)).to_vector(), "head");
    expect_close(rotate(input(2, n)).to_vector(), g.rotate_gelu(input(2, n)).to_vector(), "rotate");
    expect_close(pick(input(4, 3), index).to_vector(), g.pick_gelu(input(4, 3), index).to_vector(), "pick");
  }
  EXPECT_EQ(head.compiles(), 1u);
  EXPECT_EQ(rotate.compiles(), 1u);
  EXPECT_EQ(pick.compiles(), 1u);
  EXPECT_THROW((void)head(input(2, 3)).to_vector(), ShapeError);
  EXPECT_THROW((void)pick(input(2, 3), index).to_vector(), ShapeError);
}

INSTANTIATE_TEST_SUITE_P(Modes, GuardModes, ::testing::Values(CompileMode::max_autotune, CompileMode::reduce_overhead),
                         [](const auto& param_info) {
                           return param_info.param == CompileMode::reduce_overhead ? std::string("ReduceOverhead")
                                                                                   : std::string("MaxAutotune");
                         });
