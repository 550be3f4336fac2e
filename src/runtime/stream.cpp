#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/runtime/stream.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
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

  void enqueue(Task task) {
    {
      std::lock_guard lock(mu);
      queue.push_back(std::move(task));
    }
    cv_work.notify_one();
  }

  Device& device;
  int index;
  std::mutex mu;
  std::condition_variable cv_work;
  std::condition_variable cv_idle;
  std::deque<Task> queue;
  bool busy = false;
  bool stop = false;
  std::exception_ptr error;
  std::unique_ptr<TaskGraph> capture;
  uint64_t launches = 0;
  uint64_t rng_seed = 0x5eed;
  uint64_t rng_offset = 0;
  std::thread thread;  // last: started once every other member exists
};

Stream::Stream(Device& device, int index) : impl_(std::make_unique<Impl>(device, index)) {}
Stream::~Stream() = default;

Device& Stream::device() const { return impl_->device; }
int Stream::index() const { return impl_->index; }
bool Stream::capturing() const { return impl_->capture != nullptr; }
uint64_t Stream::launches() const { return impl_->launches; }
void Stream::set_rng_seed(uint64_t seed) {
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
  if (op_info(launch.op).rng) {
    launch.rng_seed = impl_->rng_seed;
    launch.rng_offset = impl_->rng_offset;
    impl_->rng_offset += static_cast<uint64_t>(launch.args.back().numel());
  }
  if (impl_->capture) {
    impl_->capture->launches_->push_back(std::move(launch));
    return;
  }
  if (impl_->device.launch_latency_us() > 0) spin_for(impl_->device.launch_latency_us());
  ++impl_->launches;
  impl_->enqueue([l = std::move(launch)] { run_kernel(l); });
}

void Stream::copy(BlockPtr dst, std::size_t dst_offset, BlockPtr src, std::size_t src_offset, std::size_t bytes) {
  if (!dst || !src) throw DeviceError("copy with a null buffer");
  if (dst_offset + bytes > dst->size() || src_offset + bytes > src->size())
    throw DeviceError("copy of " + std::to_string(bytes) + " bytes exceeds a buffer (source " +
                      std::to_string(src->size()) + " bytes, destination " + std::to_string(dst->size()) + " bytes)");
  if (impl_->capture) throw DeviceError("copies cannot be captured; copy inputs before begin_capture");
  ++impl_->launches;
  impl_->enqueue([dst = std::move(dst), src = std::move(src), dst_offset, src_offset, bytes] {
    std::memmove(static_cast<char*>(dst->data()) + dst_offset, static_cast<const char*>(src->data()) + src_offset,
                 bytes);
  });
}

void Stream::record(Event& event) {
  if (impl_->capture) throw DeviceError("events cannot be recorded while capturing");
  uint64_t gen;
  {
    std::lock_guard lock(event.state_->mu);
    gen = ++event.state_->recorded;
  }
  impl_->enqueue([s = event.state_, gen] {
    {
      std::lock_guard lock(s->mu);
      if (gen > s->completed) s->completed = gen;
    }
    s->cv.notify_all();
  });
}

void Stream::wait(const Event& event) {
  if (impl_->capture) throw DeviceError("events cannot be waited on while capturing");
  uint64_t gen;
  {
    std::lock_guard lock(event.state_->mu);
    gen = event.state_->recorded;
  }
  if (gen == 0) return;
  impl_->enqueue([s = event.state_, gen] {
    std::unique_lock lock(s->mu);
    s->cv.wait(lock, [&] { return s->completed >= gen; });
  });
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
  if (impl_->capture) throw DeviceError("stream is already capturing");
  impl_->capture = std::unique_ptr<TaskGraph>(new TaskGraph());
}

std::unique_ptr<TaskGraph> Stream::end_capture() {
  if (!impl_->capture) throw DeviceError("end_capture without begin_capture");
  return std::move(impl_->capture);
}

void TaskGraph::replay(Stream& stream, const std::vector<std::pair<const Block*, BlockPtr>>& inputs, InputMode mode) {
  const std::vector<std::pair<const Block*, BlockPtr>> none;
  if (mode == InputMode::update_address)
    replay_with(stream, inputs, none);
  else
    replay_with(stream, none, inputs);
}

void TaskGraph::replay_with(Stream& stream, const std::vector<std::pair<const Block*, BlockPtr>>& rebind,
                            const std::vector<std::pair<const Block*, BlockPtr>>& copy_in) {
  if (stream.capturing()) throw DeviceError("cannot replay a task graph into a capturing stream");
  if (!rebind.empty() && launches_.use_count() > 1)
    launches_ = std::make_shared<std::vector<KernelLaunch>>(*launches_);  // a replay is in flight
  std::vector<std::pair<BlockPtr, BlockPtr>> copies;                      // (bound, new contents)
  auto check = [&](const BlockPtr& fresh) {
    if (!fresh) throw DeviceError("task graph input rebound to a null buffer");
    if (fresh->device() != stream.device().id())
      throw DeviceError("task graph input lives on device " + std::to_string(fresh->device()) +
                        ", the replay stream on device " + std::to_string(stream.device().id()));
  };
  auto fits = [](const TensorArg& a, const BlockPtr& fresh) {
    if (a.offset + a.bytes() > fresh->size())
      throw DeviceError("task graph input buffer of " + std::to_string(fresh->size()) +
                        " bytes is smaller than the captured operand (" + std::to_string(a.offset + a.bytes()) +
                        " bytes)");
  };
  for (const auto& [bound, fresh] : copy_in) {
    check(fresh);
    BlockPtr target;
    for (const auto& l : *launches_)
      for (const auto& a : l.args)
        if (a.block.get() == bound) {
          fits(a, fresh);
          target = a.block;
        }
    if (!target) throw DeviceError("task graph has no captured operand in the given input buffer");
    copies.emplace_back(target, fresh);
  }
  for (const auto& [bound, fresh] : rebind) {
    check(fresh);
    bool found = false;
    for (auto& l : *launches_)
      for (auto& a : l.args)
        if (a.block.get() == bound) {
          fits(a, fresh);
          a.block = fresh;
          found = true;
        }
    if (!found) throw DeviceError("task graph has no captured operand in the given input buffer");
  }
  stream.impl_->launches += 1;
  // One submission: the worker runs the copies and every captured kernel.
  stream.impl_->enqueue([launches = launches_, copies = std::move(copies)] {
    for (const auto& [bound, fresh] : copies)
      std::memcpy(bound->data(), fresh->data(), std::min(bound->size(), fresh->size()));
    for (const auto& l : *launches) run_kernel(l);
  });
}

}  // namespace npucache::runtime
