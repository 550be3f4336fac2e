#include "runtime/pool.h"

#include <npucache/device.h>
#include <npucache/error.h>

#include <algorithm>
#include <atomic>
#include <map>

namespace npucache::runtime {

std::shared_ptr<MemoryPool> MemoryPool::of_this_thread(int device) {
  thread_local std::map<int, std::shared_ptr<MemoryPool>> pools;
  auto& p = pools[device];
  if (!p) p = std::make_shared<MemoryPool>(device);
  return p;
}

std::shared_ptr<MemoryPool> MemoryPool::scratch_of_this_thread(int device) {
  thread_local std::map<int, std::shared_ptr<MemoryPool>> pools;
  auto& p = pools[device];
  if (!p) p = std::make_shared<MemoryPool>(device);
  return p;
}

namespace {
// Owner tokens released so far (process-wide).
std::atomic<uint64_t> g_released{0};
}  // namespace

MemoryPool::MemoryPool(int device) : device_(device) {}

std::shared_ptr<const void> MemoryPool::owner_token() {
  return std::shared_ptr<const void>(new int(0), [](const void* p) {
    delete static_cast<const int*>(p);
    g_released.fetch_add(1);
  });
}

BlockPtr MemoryPool::reserve(std::size_t bytes, const std::shared_ptr<const void>& owner) {
  std::lock_guard lock(mu_);
  bool changed = false;
  if (owner) {
    auto& [who, size] = owners_[owner.get()];
    const bool same = !who.owner_before(owner) && !owner.owner_before(who);
    if (!same || size < bytes) {
      if (!same) size = 0;
      who = owner;
      size = std::max(size, bytes);
      changed = true;
    }
  }
  // Owners are looked at again when one changed or a token went, so a
  // replay's reserve stays a map lookup.
  bool dropped = false;
  const uint64_t released = g_released.load();
  if (changed || released != released_seen_) {
    released_seen_ = released;
    owners_max_ = 0;
    for (auto it = owners_.begin(); it != owners_.end();) {
      if (it->second.first.expired()) {
        it = owners_.erase(it);
        dropped = true;
      } else {
        owners_max_ = std::max(owners_max_, it->second.second);
        ++it;
      }
    }
  }
  const std::size_t needed = std::max(bytes, owners_max_);
  if (block_ && block_->size() >= needed && !(dropped && block_->size() > needed)) return block_;
  bytes = needed;
  // Outputs in the old block keep it alive and stay valid: no later replay
  // writes it, so its log is dropped with it.
  block_ = Platform::get().device(device_).allocate(std::max<std::size_t>(bytes, 1));
  ++serial_;
  writes_.clear();
  peak_ = std::max(peak_, block_->size());
  return block_;
}

BlockPtr MemoryPool::block() const {
  std::lock_guard lock(mu_);
  return block_;
}

std::size_t MemoryPool::capacity() const {
  std::lock_guard lock(mu_);
  return block_ ? block_->size() : 0;
}

std::size_t MemoryPool::peak_capacity() const {
  std::lock_guard lock(mu_);
  return peak_;
}

std::shared_ptr<const ReplayTicket> MemoryPool::record_write(std::size_t footprint,
                                                             std::shared_ptr<const std::string> method, uint64_t call) {
  std::lock_guard lock(mu_);
  const uint64_t epoch = ++epoch_;
  while (!writes_.empty() && writes_.back().end <= footprint) writes_.pop_back();
  writes_.push_back({epoch, footprint, method, call});
  auto t = std::make_shared<ReplayTicket>();
  t->pool = shared_from_this();
  t->serial = serial_;
  t->epoch = epoch;
  t->method = std::move(method);
  t->call = call;
  return t;
}

void MemoryPool::check(const ReplayTicket& t, std::size_t begin, std::size_t end, const std::string& what) const {
  if (end <= begin) return;
  std::lock_guard lock(mu_);
  if (t.serial != serial_) return;  // a block the pool no longer writes
  auto it =
      std::upper_bound(writes_.begin(), writes_.end(), t.epoch, [](uint64_t e, const Write& w) { return e < w.epoch; });
  if (it == writes_.end() || it->end <= begin) return;
  const std::string producer =
      (t.method ? *t.method : std::string("a captured graph")) + " (call " + std::to_string(t.call) + ")";
  const std::string writer =
      (it->method ? *it->method : std::string("a captured graph")) + " (call " + std::to_string(it->call) + ")";
  throw DeviceError(what + ": this output of " + producer + " was overwritten by a later replay, " + writer +
                    ", which reused its memory in the pool of captured graphs (reduce-overhead outputs live in the "
                    "pool until the same thread's next replay that needs the memory); keep a result across calls "
                    "with Tensor::clone(), or compile with CompileOptions::replay_outputs = ReplayOutputs::fresh");
}

}  // namespace npucache::runtime
