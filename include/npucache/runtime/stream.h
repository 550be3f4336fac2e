// Streams, events, and stream capture into task graphs.
//
// A Stream is an in-order asynchronous queue served by its own worker
// thread. launch() validates a kernel launch on the calling thread, queues it
// and wakes the worker: that is the whole host cost of a launch. An error
// raised by a kernel on the worker is sticky: it is rethrown by the next
// synchronize() on that stream (as asynchronous device errors are).
//
// Events order work across streams: record() marks a point in one stream,
// wait() makes another stream wait for that point.
//
// Capture: between begin_capture() and end_capture() launches are recorded
// into a TaskGraph instead of run. TaskGraph::replay submits all of them to a
// stream as one queued task, after rebinding the graph's inputs to new
// buffers (InputMode::update_address, the default) or copying the new inputs
// into the captured buffers (InputMode::copy).
//
// Thread safety: one thread submits to a stream at a time; events may be
// shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <npucache/runtime/launch.h>

namespace npucache {
class Device;
}

namespace npucache::runtime {

class TaskGraph;

class Event {
 public:
  Event();
  // Blocks the calling thread until the last recorded point is reached.
  void synchronize() const;
  bool query() const;

 private:
  friend class Stream;
  struct State;
  std::shared_ptr<State> state_;
};

class Stream {
 public:
  Stream(Device& device, int index);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device& device() const;
  int index() const;

  // Validates (operands live on this stream's device, sizes match dims) and
  // queues the launch; throws DeviceError on invalid launches.
  void launch(KernelLaunch launch);
  // Queues a device-to-device (or same-device) copy of `bytes` bytes.
  void copy(BlockPtr dst, std::size_t dst_offset, BlockPtr src, std::size_t src_offset, std::size_t bytes);
  void record(Event& event);
  void wait(const Event& event);
  // Waits until all queued work ran; rethrows a kernel error raised since the
  // last synchronize.
  void synchronize();

  void begin_capture();
  std::unique_ptr<TaskGraph> end_capture();
  bool capturing() const;

  // Number of submissions since creation (captured launches excluded).
  uint64_t launches() const;
  // Seed and counter of this stream's random-number sequence.
  void set_rng_seed(uint64_t seed);

 private:
  friend class TaskGraph;
  // The queue, its worker thread and the capture state.
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TaskGraph {
 public:
  enum class InputMode { update_address, copy };

  std::size_t size() const { return launches_->size(); }
  const std::vector<KernelLaunch>& launches() const { return *launches_; }

  // Replays the captured launches on `stream` in one submission. `inputs`
  // pairs each input block the graph is bound to now (the captured one, or
  // the one given to the previous replay) with the buffer to use now; in
  // update_address mode every operand in a captured block is redirected to
  // the new one, in copy mode the new contents are copied into the captured
  // block first. Throws DeviceError when a captured block is unknown to the
  // graph or the new buffer is smaller.
  void replay(Stream& stream, const std::vector<std::pair<const Block*, BlockPtr>>& inputs = {},
              InputMode mode = InputMode::update_address);
  // Both at once: `rebind` pairs are redirected, `copy_in` pairs copied.
  void replay_with(Stream& stream, const std::vector<std::pair<const Block*, BlockPtr>>& rebind,
                   const std::vector<std::pair<const Block*, BlockPtr>>& copy_in);

 private:
  friend class Stream;
  TaskGraph() : launches_(std::make_shared<std::vector<KernelLaunch>>()) {}
  // Shared with in-flight replays; copied before rebinding while shared.
  std::shared_ptr<std::vector<KernelLaunch>> launches_;
};

}  // namespace npucache::runtime
