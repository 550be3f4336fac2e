// Device memory: blocks handed out by a device's caching allocator.
//
// A Block is real host memory standing in for device memory. Blocks are held
// by shared_ptr; when the last reference goes, the block returns to its
// device's cache (not to the OS) for reuse by a later allocation. Kernel
// launches hold references to their operands' blocks until they have run, so
// memory is never reused while a queued kernel still reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace npucache::runtime {

struct MemoryStats {
  std::size_t allocated = 0;       // bytes in blocks handed out now
  std::size_t reserved = 0;        // bytes obtained from the host (in use + cached)
  std::size_t peak_allocated = 0;  // high-water mark of `allocated`
  std::size_t capacity = 0;        // the device's memory capacity
  uint64_t allocations = 0;        // allocate() calls
  uint64_t cache_hits = 0;         // allocations served from the cache
};

class Block {
 public:
  Block(void* ptr, std::size_t size, int device) : ptr_(ptr), size_(size), device_(device) {}
  void* data() const { return ptr_; }
  std::size_t size() const { return size_; }
  int device() const { return device_; }

 private:
  void* ptr_;
  std::size_t size_;
  int device_;
};

using BlockPtr = std::shared_ptr<Block>;

}  // namespace npucache::runtime
