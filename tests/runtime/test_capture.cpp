// runtime::Stream capture and task-graph replay equal the eager launches they record.
#include <npucache/device.h>
#include <npucache/error.h>

#include "runtime/stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <latch>
#include <thread>

using namespace npucache;

namespace {

struct Chain {
  Device& d = Platform::get().device(4);
  runtime::TensorArg in, tmp, out;
  explicit Chain(int64_t n)
      : in{d.allocate(static_cast<std::size_t>(n) * 4), 0, DType::f32, {n}},
        tmp{d.allocate(static_cast<std::size_t>(n) * 4), 0, DType::f32, {n}},
        out{d.allocate(static_cast<std::size_t>(n) * 4), 0, DType::f32, {n}} {}

  // out = relu(in * in - in) repeated into a chain of 3 * reps kernels.
  void launch_all(runtime::Stream& s, int reps) {
    for (int r = 0; r < reps; ++r) {
      s.launch(op(Op::mul, {r == 0 ? in : out, in, tmp}));
      s.launch(op(Op::sub, {tmp, in, tmp}));
      s.launch(op(Op::relu, {tmp, out}));
    }
  }
  static runtime::KernelLaunch op(Op o, std::vector<runtime::TensorArg> args) {
    runtime::KernelLaunch l;
    l.op = o;
    l.args = std::move(args);
    return l;
  }
};

void write(const runtime::TensorArg& a, const std::vector<float>& v) { std::memcpy(a.data(), v.data(), v.size() * 4); }
std::vector<float> read_back(const runtime::TensorArg& a) {
  auto* p = static_cast<const float*>(a.data());
  return {p, p + a.numel()};
}

}  // namespace

TEST(Capture, ReplayEqualsEager) {
  Chain c(256);
  runtime::Stream& s = c.d.create_stream();
  std::vector<float> input(256);
  for (int i = 0; i < 256; ++i) input[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) * 0.3f - 0.5f;
  write(c.in, input);
  c.launch_all(s, 40);
  s.synchronize();
  std::vector<float> eager = read_back(c.out);

  std::fill(static_cast<float*>(c.out.data()), static_cast<float*>(c.out.data()) + 256, -1.0f);
  s.begin_capture();
  c.launch_all(s, 40);
  auto graph = s.end_capture();
  s.synchronize();
  EXPECT_EQ(graph->size(), 120u);
  EXPECT_EQ(read_back(c.out)[0], -1.0f);  // capture ran nothing
  uint64_t before = s.launches();
  graph->replay(s);
  s.synchronize();
  EXPECT_EQ(s.launches(), before + 1);  // one submission
  EXPECT_EQ(read_back(c.out), eager);
}

// Declares every operand in `block` as bound to `slot` (at its offset).
void slot_all(runtime::TaskGraph& g, const runtime::Block* block, uint32_t slot) {
  for (std::size_t i = 0; i < g.size(); ++i)
    for (std::size_t a = 0; a < g.launches()[i].args.size(); ++a)
      if (g.launches()[i].args[a].block.get() == block) g.set_slot(i, a, slot, g.launches()[i].args[a].offset);
}

TEST(Capture, SlotsBindEachReplayToTheGivenBuffers) {
  Chain c(1024);
  runtime::Stream& s = c.d.create_stream();
  write(c.in, std::vector<float>(1024, 2.0f));
  s.begin_capture();
  c.launch_all(s, 1);  // out = relu(in*in - in)
  auto graph = s.end_capture();
  slot_all(*graph, c.in.block.get(), 0);
  slot_all(*graph, c.out.block.get(), 1);
  EXPECT_EQ(graph->num_slots(), 2u);
  EXPECT_EQ(graph->slot_extent(0), 1024u * 4);

  runtime::BlockPtr fresh = c.d.allocate(1024 * 4), out2 = c.d.allocate(1024 * 4);
  std::vector<float> three(1024, 3.0f);
  std::memcpy(fresh->data(), three.data(), 1024 * 4);
  graph->replay(s, {{fresh, 0}, {out2, 0}});
  s.synchronize();
  EXPECT_EQ(static_cast<float*>(out2->data())[5], 6.0f);  // 3*3 - 3
  EXPECT_EQ(read_back(c.in)[5], 2.0f);                    // the captured buffers are untouched
  EXPECT_NE(read_back(c.out)[5], 6.0f);

  // The same buffer for input and output (in place): still by slot.
  graph->replay(s, {{fresh, 0}, {fresh, 0}});
  s.synchronize();
  EXPECT_EQ(static_cast<float*>(fresh->data())[5], 6.0f);

  // Copies before and after the kernels run in the same submission.
  runtime::BlockPtr staged = c.d.allocate(1024 * 4), src = c.d.allocate(1024 * 4), back = c.d.allocate(1024 * 4);
  std::vector<float> four(1024, 4.0f);
  std::memcpy(src->data(), four.data(), 1024 * 4);
  const uint64_t before = s.launches();
  graph->replay(s, {{staged, 0}, {out2, 0}}, {{staged, 0, src, 0, 1024 * 4}}, {{back, 0, out2, 0, 1024 * 4}});
  s.synchronize();
  EXPECT_EQ(s.launches(), before + 1);
  EXPECT_EQ(static_cast<float*>(back->data())[5], 12.0f);  // 4*4 - 4

  runtime::BlockPtr tiny = c.d.allocate(16);
  EXPECT_THROW(graph->replay(s, {{tiny, 0}, {out2, 0}}), DeviceError);    // too small for its operands
  EXPECT_THROW(graph->replay(s, {{fresh, 64}, {out2, 0}}), DeviceError);  // the base offset counts
  EXPECT_THROW(graph->replay(s, {{fresh, 0}}), DeviceError);              // a slot unbound
  runtime::BlockPtr elsewhere = Platform::get().device(5).allocate(1024 * 4);
  EXPECT_THROW(graph->replay(s, {{elsewhere, 0}, {out2, 0}}), DeviceError);  // another device
}

// A launch from another thread while this thread captures runs at once and
// is not recorded (before: it landed in the capture and never ran).
TEST(Capture, OtherThreadsLaunchesAreNotCaptured) {
  Chain c(256);
  runtime::Stream& s = c.d.create_stream();
  write(c.in, std::vector<float>(256, 2.0f));
  s.begin_capture();
  c.launch_all(s, 1);
  runtime::TensorArg other{c.d.allocate(256 * 4), 0, DType::f32, {256}};
  std::thread t([&] {
    EXPECT_FALSE(s.capturing());
    s.launch(Chain::op(Op::relu, {c.in, other}));  // runs now: 2
    s.synchronize();
  });
  t.join();
  auto graph = s.end_capture();
  EXPECT_EQ(graph->size(), 3u);
  EXPECT_EQ(read_back(other)[7], 2.0f);
  EXPECT_THROW(s.end_capture(), DeviceError);
}

// Two threads capturing on one stream at once (two compiled methods'
// first calls on the same device): each graph holds exactly its own
// thread's launches, and each replays to what eager launches compute.
TEST(Capture, ThreadsCaptureOnOneStreamAtOnce) {
  Chain a(128), b(128);
  runtime::Stream& s = a.d.create_stream();
  write(a.in, std::vector<float>(128, 3.0f));
  write(b.in, std::vector<float>(128, -2.0f));
  std::unique_ptr<runtime::TaskGraph> ga, gb;
  std::latch both_capturing(2), both_recorded(2);
  auto capture = [&](Chain& c, int reps, std::unique_ptr<runtime::TaskGraph>& g) {
    s.begin_capture();
    both_capturing.arrive_and_wait();  // both captures are open now
    c.launch_all(s, reps);
    both_recorded.arrive_and_wait();
    g = s.end_capture();
  };
  std::thread ta([&] { capture(a, 2, ga); }), tb([&] { capture(b, 5, gb); });
  ta.join();
  tb.join();
  ASSERT_TRUE(ga && gb);
  EXPECT_EQ(ga->size(), 6u);
  EXPECT_EQ(gb->size(), 15u);
  EXPECT_FALSE(s.capturing());
  std::fill(static_cast<float*>(a.out.data()), static_cast<float*>(a.out.data()) + 128, -1.0f);
  std::fill(static_cast<float*>(b.out.data()), static_cast<float*>(b.out.data()) + 128, -1.0f);
  s.synchronize();
  EXPECT_EQ(read_back(a.out)[0], -1.0f);  // the captures ran nothing
  ga->replay(s);
  gb->replay(s);
  s.synchronize();
  // The same launches run eagerly on chains of their own.
  Chain ea(128), eb(128);
  write(ea.in, std::vector<float>(128, 3.0f));
  write(eb.in, std::vector<float>(128, -2.0f));
  ea.launch_all(s, 2);
  eb.launch_all(s, 5);
  s.synchronize();
  EXPECT_EQ(read_back(a.out), read_back(ea.out));
  EXPECT_EQ(read_back(b.out), read_back(eb.out));
  EXPECT_EQ(read_back(a.out)[0], 15.0f);  // relu(relu(3 * 3 - 3) * 3 - 3)
}

TEST(Capture, MisuseIsAnError) {
  Chain c(4);
  runtime::Stream& s = c.d.create_stream();
  EXPECT_THROW(s.end_capture(), DeviceError);
  s.begin_capture();
  EXPECT_THROW(s.begin_capture(), DeviceError);
  runtime::Event e;
  EXPECT_THROW(s.record(e), DeviceError);
  EXPECT_THROW(s.copy(c.in.block, 0, c.out.block, 0, 16), DeviceError);
  s.end_capture();
}
