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
// Capture: between begin_capture() and end_capture() the launches the
// *capturing thread* makes on the stream are recorded into a TaskGraph
// instead of run; launches of other threads on the same stream run as usual
// (so a request thread never finds its kernels inside another thread's
// capture, and two threads may capture at once, each its own graph). TaskGraph::replay submits all recorded launches to a stream as
// one queued task. Operands declared as slots (TaskGraph::set_slot) are bound
// at each replay to the blocks the caller gives, by slot number, never by
// matching addresses: so arguments that swap, repeat or alias each other
// bind exactly as the caller says.
//
// Thread safety: launch, copy, record, wait and synchronize may be called
// from several threads at once (each thread's submissions stay in its own
// order); capture state belongs to the thread that began it. A TaskGraph is
// immutable once its slots are set: several threads may replay it at once,
// each with its own bindings.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/launch.h"

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

  // Starts recording the calling thread's launches on this stream. Throws
  // DeviceError when this thread is already capturing on it; other threads
  // may capture on the same stream at once, each recording only its own
  // launches.
  void begin_capture();
  // Ends the calling thread's capture. Throws DeviceError when this thread
  // is not capturing on the stream.
  std::unique_ptr<TaskGraph> end_capture();
  // Whether the calling thread is capturing on this stream.
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
  // What a slot is bound to at a replay: a block and the base offset its
  // operands' offsets are relative to.
  struct SlotBinding {
    BlockPtr block;
    std::size_t offset = 0;
  };
  // A copy run in the replay's submission, before or after the kernels.
  struct Copy {
    BlockPtr dst;
    std::size_t dst_offset = 0;
    BlockPtr src;
    std::size_t src_offset = 0;
    std::size_t bytes = 0;
  };

  // A graph of `launches` made without a capture (a restored template);
  // the caller declares its slots. Costs the modelled instantiation
  // (PlatformConfig::instantiate_us_per_task) per launch.
  static std::unique_ptr<TaskGraph> from_launches(std::vector<KernelLaunch> launches);

  std::size_t size() const { return data_->launches.size(); }
  // The recorded launches; a slotted operand has no block and an offset
  // relative to its slot.
  const std::vector<KernelLaunch>& launches() const { return data_->launches; }
  std::size_t num_slots() const { return data_->extent.size(); }
  // Declares operand `arg` of launch `launch` as bound to `slot` at replay,
  // reading `relative_offset` bytes past the slot's base. The captured block
  // is dropped. Throws DeviceError for an out-of-range launch or operand.
  void set_slot(std::size_t launch, std::size_t arg, uint32_t slot, std::size_t relative_offset);
  // The bytes past its base a slot's block must provide (its operands'
  // furthest end), 0 for a slot no operand uses.
  std::size_t slot_extent(uint32_t slot) const;

  // A launch's attributes replaced for one replay (the update mechanism:
  // a host-side parameter such as a decode step's KV length).
  struct Patch {
    std::size_t launch = 0;
    std::shared_ptr<const Attrs> attrs;
  };

  // Submits the copies `before`, every launch with its slotted operands
  // bound to `slots` (and the attributes of patched launches replaced),
  // then the copies `after`, as one task on `stream`.
  // Throws DeviceError (nothing submitted) when a used slot is unbound, on
  // another device, or too small for its operands, or when the stream is
  // capturing on this thread.
  void replay(Stream& stream, const std::vector<SlotBinding>& slots = {}, std::vector<Copy> before = {},
              std::vector<Copy> after = {}, std::vector<Patch> patches = {}) const;

 private:
  friend class Stream;
  struct Data {
    std::vector<KernelLaunch> launches;
    // Per launch: (operand, slot) pairs; launches without slots run as
    // recorded.
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> slotted;
    std::vector<std::size_t> extent;  // per slot
  };
  TaskGraph() : data_(std::make_shared<Data>()) {}
  // Shared with in-flight replays (which never see a later set_slot: it
  // copies the data while a replay holds it).
  std::shared_ptr<Data> data_;
};

}  // namespace npucache::runtime
