// A device's caching allocator.
//
// Requests are rounded up (512 B granules below 1 MiB, 2 MiB above) and
// served best-fit from cached free blocks of at most twice the rounded size;
// otherwise new host memory is reserved. Freed blocks go back to the cache.
// When a reservation would exceed the capacity, the cache is released first;
// if that is not enough, OutOfMemoryError names the device, the request and
// the free memory.
//
// Thread safety: all methods may be called from any thread. The allocator's
// state is shared with every Block it handed out, so blocks may outlive the
// Device object.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <npucache/runtime/memory.h>

namespace npucache::runtime {

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  CachingAllocator(int device, std::string device_name, std::size_t capacity);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  BlockPtr allocate(std::size_t bytes);
  MemoryStats stats() const;
  void empty_cache();

  static std::size_t round_size(std::size_t bytes);

 private:
  void release(Block* block);
  void release_cache_locked();

  int device_;
  std::string device_name_;
  mutable std::mutex mu_;
  std::multimap<std::size_t, void*> free_;  // size -> host pointer
  MemoryStats stats_;
};

// "1.50 MiB"
std::string format_bytes(std::size_t bytes);

}  // namespace npucache::runtime
