// Streams: in-order execution, events across streams, sticky errors, and
// launch validation.
#include <npucache/device.h>
#include <npucache/error.h>

#include "runtime/stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>

using namespace npucache;

namespace {

runtime::TensorArg buffer(Device& d, int64_t n) {
  return runtime::TensorArg{d.allocate(static_cast<std::size_t>(n) * 4), 0, DType::f32, {n}};
}

runtime::KernelLaunch fill(const runtime::TensorArg& out, double v) {
  runtime::KernelLaunch l;
  l.op = Op::full;
  l.attrs = std::make_shared<const Attrs>(Attrs{{"value", v}, {"shape", Shape{out.dims[0]}}, {"dtype", DType::f32}});
  l.args = {out};
  return l;
}

runtime::KernelLaunch add(const runtime::TensorArg& a, const runtime::TensorArg& b, const runtime::TensorArg& out) {
  runtime::KernelLaunch l;
  l.op = Op::add;
  l.args = {a, b, out};
  return l;
}

float at(const runtime::TensorArg& a, int64_t i) { return static_cast<float*>(a.data())[i]; }

}  // namespace

TEST(Stream, InOrderExecution) {
  Device& d = Platform::get().device(0);
  runtime::Stream& s = d.create_stream();
  runtime::TensorArg x = buffer(d, 1 << 16), y = buffer(d, 1 << 16);
  s.launch(fill(x, 1.0));
  for (int i = 0; i < 50; ++i) s.launch(add(x, x, x));  // x doubles each time, in order
  s.launch(fill(y, 3.0));
  s.launch(add(x, y, y));
  s.synchronize();
  EXPECT_EQ(at(x, 123), static_cast<float>(std::pow(2.0, 50)));
  EXPECT_EQ(at(y, 7), static_cast<float>(std::pow(2.0, 50) + 3));
  EXPECT_GE(s.launches(), 53u);
}

TEST(Stream, EventsOrderWorkAcrossStreams) {
  Device& d = Platform::get().device(1);
  runtime::Stream& a = d.create_stream();
  runtime::Stream& b = d.create_stream();
  runtime::TensorArg x = buffer(d, 1 << 18), y = buffer(d, 1 << 18);
  for (int round = 0; round < 20; ++round) {
    runtime::Event ev;
    a.launch(fill(x, round));
    for (int i = 0; i < 5; ++i) a.launch(add(x, x, x));  // x = round * 32
    a.record(ev);
    b.wait(ev);
    b.launch(add(x, x, y));  // must see a's final x
    b.synchronize();
    ASSERT_EQ(at(y, (1 << 18) - 1), static_cast<float>(round * 64)) << "round " << round;
    EXPECT_TRUE(ev.query());
  }
}

TEST(Stream, KernelErrorIsStickyUntilSynchronize) {
  Device& d = Platform::get().device(0);
  runtime::Stream& s = d.create_stream();
  runtime::TensorArg buf = buffer(d, 8);
  runtime::KernelLaunch bad;
  bad.op = Op::softmax;  // missing "dim" attribute: fails on the worker
  bad.attrs = std::make_shared<const Attrs>();
  bad.args = {buf, buf};
  s.launch(bad);
  EXPECT_THROW(s.synchronize(), ShapeError);
  s.launch(fill(buf, 2.0));
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_EQ(at(buf, 0), 2.0f);
}

TEST(Stream, InvalidLaunchesAreRejected) {
  Device& d0 = Platform::get().device(0);
  Device& d1 = Platform::get().device(1);
  runtime::Stream& s = d0.default_stream();
  runtime::TensorArg foreign = buffer(d1, 4);
  try {
    s.launch(fill(foreign, 1));
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("lives on device 1"), std::string::npos) << e.what();
  }
  runtime::TensorArg small = buffer(d0, 4);
  small.dims = {1 << 20};  // claims more than its buffer holds
  try {
    s.launch(fill(small, 1));
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("but its buffer has"), std::string::npos) << e.what();
  }
  runtime::KernelLaunch composite = fill(buffer(d0, 4), 1);
  composite.op = Op::gelu;
  EXPECT_THROW(s.launch(composite), DeviceError);
  try {
    Platform::get().device(99);
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid device id 99"), std::string::npos);
  }
  EXPECT_THROW(set_current_device(-1), DeviceError);
}

TEST(Stream, CopiesAreOrdered) {
  Device& d = Platform::get().device(2);
  runtime::Stream& s = d.default_stream();
  runtime::TensorArg x = buffer(d, 1024), y = buffer(d, 1024);
  s.launch(fill(x, 5));
  s.copy(y.block, 0, x.block, 0, 1024 * 4);
  s.launch(fill(x, 1));
  s.synchronize();
  EXPECT_EQ(at(y, 1000), 5.0f);
  EXPECT_EQ(at(x, 1000), 1.0f);
  EXPECT_THROW(s.copy(y.block, 0, x.block, 8, 1024 * 4), DeviceError);
}
