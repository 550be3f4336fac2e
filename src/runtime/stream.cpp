#include "runtime/stream.h"

#include <npucache/device.h>
#include <npucache/error.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace npucache::runtime {

struct Event::State {
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  uint64_t recorded = 0;   // generations recorded so far
  uint64_t completed = 0;  // highest generation reached
};

Event::Event() : state_(std::make_shared<State>()) {}

void Event::synchronize() const {
  std::unique_lock lock(state_->mu);
  uint64_t target = state_->recorded;
  state_->cv.wait(lock, [&] { return state_->completed >= target; });
}

bool Event::query() const {
  std::lock_guard lock(state_->mu);
  return state_->completed >= state_->recorded;
}

struct Stream::Impl {
  using Task = std::function<void()>;

  Impl(Device& d, int i) : device(d), index(i), thread([this] { worker(); }) {}
  ~Impl() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv_work.notify_one();
    thread.join();
  }

  void worker() {
    std::unique_lock lock(mu);
    for (;;) {
      cv_work.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stop requested and drained
      Task task = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lock.unlock();
      try {
        task();
      } catch (...) {
        std::lock_guard elock(mu);
        if (!error) error = std::current_exception();
      }
      task = nullptr;  // drop operand references before reporting idle
      lock.lock();
      busy = false;
      if (queue.empty()) cv_idle.notify_all();
    }
  }

  // `counted`: a kernel, copy or replay (events are not counted).
  void enqueue(Task task, bool counted = true) {
    {
      std::lock_guard lock(mu);
      if (counted) ++launches;
      queue.push_back(std::move(task));
    }
    cv_work.notify_one();
  }
  // The calling thread's capture on this stream, or null (caller holds mu).
  TaskGraph* capture_here() const {
    auto it = captures.find(std::this_thread::get_id());
    return it == captures.end() ? nullptr : it->second.get();
  }
  bool capturing_here() const { return capture_here() != nullptr; }

  Device& device;
  int index;
  std::mutex mu;
  std::condition_variable cv_work;
  std::condition_variable cv_idle;
  std::deque<Task> queue;
  bool busy = false;
  bool stop = false;
  std::exception_ptr error;
  // Captures in progress, by the thread whose launches each records.
  std::map<std::thread::id, std::unique_ptr<TaskGraph>> captures;
  uint64_t launches = 0;
  uint64_t rng_seed = 0x5eed;
  uint64_t rng_offset = 0;
  std::thread thread;  // last: started once every other member exists
};

Stream::Stream(Device& device, int index) : impl_(std::make_unique<Impl>(device, index)) {}
Stream::~Stream() = default;

Device& Stream::device() const { return impl_->device; }
int Stream::index() const { return impl_->index; }
bool Stream::capturing() const {
  std::lock_guard lock(impl_->mu);
  return impl_->capturing_here();
}
uint64_t Stream::launches() const {
  std::lock_guard lock(impl_->mu);
  return impl_->launches;
}
void Stream::set_rng_seed(uint64_t seed) {
  std::lock_guard lock(impl_->mu);
  impl_->rng_seed = seed;
  impl_->rng_offset = 0;
}

namespace {

void validate_launch(const KernelLaunch& l, const Device& device) {
  if (l.args.empty()) throw DeviceError(std::string("launch of ") + std::string(op_name(l.op)) + " has no operands");
  if (op_info(l.op).composite)
    throw DeviceError("op '" + std::string(op_name(l.op)) + "' is composite and has no kernel; decompose it first");
  for (std::size_t i = 0; i < l.args.size(); ++i) {
    const TensorArg& a = l.args[i];
    if (!a.block)
      throw DeviceError("launch of " + std::string(op_name(l.op)) + ": operand " + std::to_string(i) +
                        " has no buffer");
    if (a.block->device() != device.id())
      throw DeviceError("launch of " + std::string(op_name(l.op)) + " on a stream of device " +
                        std::to_string(device.id()) + ": operand " + std::to_string(i) + " lives on device " +
                        std::to_string(a.block->device()) + "; copy it to this device first");
    for (int64_t d : a.dims)
      if (d < 0)
        throw DeviceError("launch of " + std::string(op_name(l.op)) + ": operand " + std::to_string(i) +
                          " has a negative dim");
    if (a.offset + a.bytes() > a.block->size())
      throw DeviceError("launch of " + std::string(op_name(l.op)) + ": operand " + std::to_string(i) + " needs " +
                        std::to_string(a.bytes()) + " bytes at offset " + std::to_string(a.offset) +
                        " but its buffer has " + std::to_string(a.block->size()));
  }
}

void spin_for(double us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(us * 1000));
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

void Stream::launch(KernelLaunch launch) {
  validate_launch(launch, impl_->device);
  {
    std::unique_lock lock(impl_->mu);
    if (op_info(launch.op).rng) {
      launch.rng_seed = impl_->rng_seed;
      launch.rng_offset = impl_->rng_offset;
      impl_->rng_offset += static_cast<uint64_t>(launch.args.back().numel());
    }
    if (TaskGraph* g = impl_->capture_here()) {
      g->data_->launches.push_back(std::move(launch));
      return;
    }
  }
  if (impl_->device.launch_latency_us() > 0) spin_for(impl_->device.launch_latency_us());
  impl_->enqueue([l = std::move(launch)] { run_kernel(l); });
}

void Stream::copy(BlockPtr dst, std::size_t dst_offset, BlockPtr src, std::size_t src_offset, std::size_t bytes) {
  if (!dst || !src) throw DeviceError("copy with a null buffer");
  if (dst_offset + bytes > dst->size() || src_offset + bytes > src->size())
    throw DeviceError("copy of " + std::to_string(bytes) + " bytes exceeds a buffer (source " +
                      std::to_string(src->size()) + " bytes, destination " + std::to_string(dst->size()) + " bytes)");
  if (capturing()) throw DeviceError("copies cannot be captured; copy inputs before begin_capture");
  impl_->enqueue([dst = std::move(dst), src = std::move(src), dst_offset, src_offset, bytes] {
    std::memmove(static_cast<char*>(dst->data()) + dst_offset, static_cast<const char*>(src->data()) + src_offset,
                 bytes);
  });
}

void Stream::record(Event& event) {
  if (capturing()) throw DeviceError("events cannot be recorded while capturing");
  uint64_t gen;
  {
    std::lock_guard lock(event.state_->mu);
    gen = ++event.state_->recorded;
  }
  impl_->enqueue(
      [s = event.state_, gen] {
        {
          std::lock_guard lock(s->mu);
          if (gen > s->completed) s->completed = gen;
        }
        s->cv.notify_all();
      },
      false);
}

void Stream::wait(const Event& event) {
  if (capturing()) throw DeviceError("events cannot be waited on while capturing");
  uint64_t gen;
  {
    std::lock_guard lock(event.state_->mu);
    gen = event.state_->recorded;
  }
  if (gen == 0) return;
  impl_->enqueue(
      [s = event.state_, gen] {
        std::unique_lock lock(s->mu);
        s->cv.wait(lock, [&] { return s->completed >= gen; });
      },
      false);
}

void Stream::synchronize() {
  std::unique_lock lock(impl_->mu);
  impl_->cv_idle.wait(lock, [&] { return impl_->queue.empty() && !impl_->busy; });
  if (impl_->error) {
    std::exception_ptr e = impl_->error;
    impl_->error = nullptr;
    std::rethrow_exception(e);
  }
}

void Stream::begin_capture() {
  std::lock_guard lock(impl_->mu);
  if (impl_->capturing_here()) throw DeviceError("this thread is already capturing on the stream");
  impl_->captures.emplace(std::this_thread::get_id(), std::unique_ptr<TaskGraph>(new TaskGraph()));
}

namespace {
// The capture-cost model (device.h): modelled time, slept (not spun: on
// hardware it is the driver's and the device's time).
void model_cost(double us_per_task, std::size_t tasks) {
  if (us_per_task > 0 && tasks > 0)
    std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<int64_t>(us_per_task * 1000.0 * tasks)));
}
}  // namespace

std::unique_ptr<TaskGraph> Stream::end_capture() {
  std::unique_ptr<TaskGraph> g;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->captures.find(std::this_thread::get_id());
    if (it == impl_->captures.end()) throw DeviceError("end_capture without begin_capture on this thread");
    g = std::move(it->second);
    impl_->captures.erase(it);
  }
  const PlatformConfig& c = Platform::get().config();
  model_cost(c.capture_us_per_task + c.instantiate_us_per_task, g->size());
  return g;
}

std::unique_ptr<TaskGraph> TaskGraph::from_launches(std::vector<KernelLaunch> launches) {
  std::unique_ptr<TaskGraph> g(new TaskGraph());
  g->data_->launches = std::move(launches);
  model_cost(Platform::get().config().instantiate_us_per_task, g->size());
  return g;
}

void TaskGraph::set_slot(std::size_t launch, std::size_t arg, uint32_t slot, std::size_t relative_offset) {
  if (launch >= data_->launches.size() || arg >= data_->launches[launch].args.size())
    throw DeviceError("task graph slot for launch " + std::to_string(launch) + " operand " + std::to_string(arg) +
                      ": no such operand");
  if (data_.use_count() > 1) data_ = std::make_shared<Data>(*data_);  // a replay holds the old data
  Data& d = *data_;
  if (d.slotted.size() < d.launches.size()) d.slotted.resize(d.launches.size());
  TensorArg& a = d.launches[launch].args[arg];
  a.block = nullptr;
  a.offset = relative_offset;
  auto& pairs = d.slotted[launch];
  bool replaced = false;
  for (auto& [o, s] : pairs)
    if (o == arg) {
      s = slot;
      replaced = true;
    }
  if (!replaced) pairs.emplace_back(static_cast<uint32_t>(arg), slot);
  if (d.extent.size() <= slot) d.extent.resize(slot + 1, 0);
  d.extent[slot] = std::max(d.extent[slot], relative_offset + a.bytes());
}

std::size_t TaskGraph::slot_extent(uint32_t slot) const {
  return slot < data_->extent.size() ? data_->extent[slot] : 0;
}

void TaskGraph::replay(Stream& stream, const std::vector<SlotBinding>& slots, std::vector<Copy> before,
                       std::vector<Copy> after, std::vector<Patch> patches) const {
  if (stream.capturing()) throw DeviceError("cannot replay a task graph into a capturing stream");
  const int device = stream.device().id();
  const Data& d = *data_;
  for (std::size_t s = 0; s < d.extent.size(); ++s) {
    if (d.extent[s] == 0) continue;
    if (s >= slots.size() || !slots[s].block)
      throw DeviceError("task graph slot " + std::to_string(s) + " is not bound to a buffer");
    const SlotBinding& b = slots[s];
    if (b.block->device() != device)
      throw DeviceError("task graph slot " + std::to_string(s) + " is bound to a buffer on device " +
                        std::to_string(b.block->device()) + ", the replay stream is on device " +
                        std::to_string(device));
    if (b.offset > b.block->size() || d.extent[s] > b.block->size() - b.offset)
      throw DeviceError("task graph slot " + std::to_string(s) + " needs " + std::to_string(d.extent[s]) +
                        " bytes at offset " + std::to_string(b.offset) + " of a buffer of " +
                        std::to_string(b.block->size()) + " bytes");
  }
  for (const auto* list : {&before, &after})
    for (const Copy& c : *list) {
      if (!c.dst || !c.src) throw DeviceError("task graph copy with a null buffer");
      if (c.dst->device() != device || c.src->device() != device)
        throw DeviceError("task graph copy between devices; the replay stream is on device " + std::to_string(device));
      if (c.dst_offset > c.dst->size() || c.bytes > c.dst->size() - c.dst_offset || c.src_offset > c.src->size() ||
          c.bytes > c.src->size() - c.src_offset)
        throw DeviceError("task graph copy of " + std::to_string(c.bytes) + " bytes exceeds a buffer");
    }
  // One submission: the worker binds each slotted operand as it runs the
  // launch, so the graph itself is never changed by a replay.
  for (const Patch& p : patches)
    if (p.launch >= d.launches.size() || !p.attrs)
      throw DeviceError("task graph patch of launch " + std::to_string(p.launch) + ": no such launch");
  std::sort(patches.begin(), patches.end(), [](const Patch& a, const Patch& b) { return a.launch < b.launch; });
  for (std::size_t i = 1; i < patches.size(); ++i)
    if (patches[i].launch == patches[i - 1].launch)
      throw DeviceError("task graph patches launch " + std::to_string(patches[i].launch) + " twice");
  stream.impl_->enqueue(
      [data = data_, slots, before = std::move(before), after = std::move(after), patches = std::move(patches)] {
        auto run_copies = [](const std::vector<Copy>& cs) {
          for (const Copy& c : cs)
            std::memmove(static_cast<char*>(c.dst->data()) + c.dst_offset,
                         static_cast<const char*>(c.src->data()) + c.src_offset, c.bytes);
        };
        run_copies(before);
        std::size_t next_patch = 0;
        for (std::size_t i = 0; i < data->launches.size(); ++i) {
          const bool patched = next_patch < patches.size() && patches[next_patch].launch == i;
          if (!patched && (i >= data->slotted.size() || data->slotted[i].empty())) {
            run_kernel(data->launches[i]);
            continue;
          }
          KernelLaunch l = data->launches[i];
          if (patched) l.attrs = patches[next_patch++].attrs;
          if (i >= data->slotted.size()) {
            run_kernel(l);
            continue;
          }
          for (const auto& [arg, slot] : data->slotted[i]) {
            l.args[arg].block = slots[slot].block;
            l.args[arg].offset += slots[slot].offset;
          }
          run_kernel(l);
        }
        run_copies(after);
      });
}

}  // namespace npucache::runtime
