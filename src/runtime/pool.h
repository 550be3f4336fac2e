// The memory pool of captured graphs (PyTorch's cudagraph-tree pool).
//
// Every graph a thread captures on a device lays its intermediates and
// outputs out in one pool, at offsets [0, footprint): the pool is as large as
// the largest capture, not the sum of them. Replays run one at a time per
// pool (a thread's submissions are ordered), so captures may share memory;
// the price is that a replay overwrites the outputs of earlier replays that
// lie in its footprint. The pool keeps a log of what each replay wrote, and
// an output carries a ticket (ReplayTicket): reading it after a later replay
// overwrote it is an error naming both calls, never a silent wrong value.
//
// Pools are per (thread, device), as PyTorch keeps cudagraph trees per
// thread: a request thread's outputs are only ever overwritten by that same
// thread's later calls.
//
// A thread also has a scratch pool per device, for replays whose outputs
// are copied out (nothing of such a replay is read after it): the pieces
// of a method split at graph breaks before its last one. Their replays
// never overwrite results kept in the thread's pool -- the method's own
// arguments fed back from an earlier call, read again by a later piece.
//
// Growing: a capture larger than the pool replaces the pool's block with a
// larger one; outputs in the old block stay valid (no later replay writes
// it) and keep it alive until they go.
//
// Shrinking: a capture reserves with an owner token (its lifetime). When
// the captures that needed the largest footprint are gone (their method
// destroyed), the next reserve replaces the block by one as large as the
// live captures need, so memory of dead captures is reclaimed.
//
// Thread safety: all members may be called from any thread (a ticket may be
// checked on another thread than the one that replayed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <npucache/runtime/memory.h>

namespace npucache::runtime {

class MemoryPool;

// What a replay wrote, shared by the outputs it produced.
struct ReplayTicket {
  std::shared_ptr<MemoryPool> pool;
  uint64_t serial = 0;                        // which block of the pool
  uint64_t epoch = 0;                         // the replay's number in the pool
  std::shared_ptr<const std::string> method;  // "Model.decode"
  uint64_t call = 0;                          // the method's call number
};

class MemoryPool : public std::enable_shared_from_this<MemoryPool> {
 public:
  // The calling thread's pool on `device` (made on first use). The thread
  // keeps it alive; so do tickets and captured graphs' users.
  static std::shared_ptr<MemoryPool> of_this_thread(int device);
  // The calling thread's scratch pool on `device` (see above).
  static std::shared_ptr<MemoryPool> scratch_of_this_thread(int device);
  explicit MemoryPool(int device);
  // A token for reserve(): a captured graph holds it for its lifetime.
  // When a token goes, every pool looks at its owners again at its next
  // reserve (and shrinks if it can).
  static std::shared_ptr<const void> owner_token();

  int device() const { return device_; }
  // The pool's block, at least `bytes` long: a larger request replaces the
  // block by one of that size. With `owner` (a captured graph's token), the
  // request is remembered while the owner lives; a block larger than every
  // live owner's request (and `bytes`) is replaced by a smaller one. Throws
  // OutOfMemoryError from the device.
  BlockPtr reserve(std::size_t bytes, const std::shared_ptr<const void>& owner = nullptr);
  // The current block (null before the first reserve) and its size.
  BlockPtr block() const;
  std::size_t capacity() const;
  // The largest capacity the pool had.
  std::size_t peak_capacity() const;

  // Logs a replay that writes [0, footprint) of the current block and
  // returns the ticket its outputs carry.
  std::shared_ptr<const ReplayTicket> record_write(std::size_t footprint, std::shared_ptr<const std::string> method,
                                                   uint64_t call);
  // Throws DeviceError when a replay after `t` wrote any byte of
  // [begin, end) of `t`'s block: `what` names the value read ("input 0 of
  // Model.decode", "to_vector").
  void check(const ReplayTicket& t, std::size_t begin, std::size_t end, const std::string& what) const;

 private:
  struct Write {
    uint64_t epoch;
    std::size_t end;  // the replay wrote [0, end)
    std::shared_ptr<const std::string> method;
    uint64_t call;
  };
  const int device_;
  mutable std::mutex mu_;
  BlockPtr block_;
  uint64_t serial_ = 0;
  uint64_t epoch_ = 0;
  std::size_t peak_ = 0;
  // What live captures reserved, by owner token (expired owners are
  // dropped when the owners are looked at again), and the largest of them.
  std::map<const void*, std::pair<std::weak_ptr<const void>, std::size_t>> owners_;
  std::size_t owners_max_ = 0;
  uint64_t released_seen_ = 0;  // owner tokens gone when the owners were last looked at
  // Writes of the current block with strictly decreasing `end` as epochs
  // grow: the largest footprint written after any epoch is the first entry
  // past it. Bounded by the number of distinct footprints.
  std::vector<Write> writes_;
};

}  // namespace npucache::runtime
