#include "runtime/allocator.h"

#include <npucache/error.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace npucache::runtime {
namespace {
constexpr std::size_t kSmallGranule = 512;        // keeps small tensors dense
constexpr std::size_t kLargeThreshold = 1 << 20;  // above this, round to large pages
constexpr std::size_t kLargeGranule = 2 << 20;    // limits fragmentation of big blocks
constexpr std::size_t kAlignment = 64;            // a cache line: SIMD-friendly
}  // namespace

std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

CachingAllocator::CachingAllocator(int device, std::string device_name, std::size_t capacity)
    : device_(device), device_name_(std::move(device_name)) {
  stats_.capacity = capacity;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mu_);
  release_cache_locked();
}

std::size_t CachingAllocator::round_size(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  std::size_t g = bytes < kLargeThreshold ? kSmallGranule : kLargeGranule;
  return (bytes + g - 1) / g * g;
}

BlockPtr CachingAllocator::allocate(std::size_t bytes) {
  std::size_t size = round_size(bytes);
  void* ptr = nullptr;
  std::size_t got = 0;
  {
    std::lock_guard lock(mu_);
    ++stats_.allocations;
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= 2 * size) {
      ptr = it->second;
      got = it->first;
      free_.erase(it);
      ++stats_.cache_hits;
    } else {
      if (stats_.reserved + size > stats_.capacity) release_cache_locked();
      if (stats_.reserved + size > stats_.capacity) {
        std::size_t free_mem = stats_.capacity - stats_.allocated;
        throw OutOfMemoryError("device " + std::to_string(device_) + " (" + device_name_ +
                               "): out of memory allocating " + format_bytes(bytes) + "; capacity " +
                               format_bytes(stats_.capacity) + ", allocated " + format_bytes(stats_.allocated) +
                               ", free " + format_bytes(free_mem) +
                               ". Free tensors, use a smaller model or batch, or raise "
                               "NPUCACHE_SIM_DEVICE_MEMORY");
      }
      ptr = std::aligned_alloc(kAlignment, size);
      if (ptr == nullptr)
        throw OutOfMemoryError("device " + std::to_string(device_) + ": host allocation of " + format_bytes(size) +
                               " failed");
      got = size;
      stats_.reserved += size;
    }
    stats_.allocated += got;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  }
  std::weak_ptr<CachingAllocator> owner = weak_from_this();
  return BlockPtr(new Block(ptr, got, device_), [owner](Block* b) {
    if (auto a = owner.lock())
      a->release(b);
    else
      std::free(b->data());
    delete b;
  });
}

void CachingAllocator::release(Block* block) {
  std::lock_guard lock(mu_);
  stats_.allocated -= block->size();
  free_.emplace(block->size(), block->data());
}

void CachingAllocator::release_cache_locked() {
  for (auto& [size, ptr] : free_) {
    std::free(ptr);
    stats_.reserved -= size;
  }
  free_.clear();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  release_cache_locked();
}

}  // namespace npucache::runtime
