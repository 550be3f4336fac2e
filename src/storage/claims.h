// A claim on compiling one graph key in a store: the rendezvous of ranks
// that reach a new shape after a method's first call, at different times
// (docs/ARCHITECTURE.md, "A new shape after the first call").
//
// The claim is an exclusive flock on locks/claim-<graph_key>.lock of the
// cache directory (docs/FORMAT.md, "Lock protocol"), taken without
// waiting. The kernel drops it when the holder's process ends in any way,
// so a claim never outlives its claimer and needs no expiry; a claim file
// nobody holds (left by a killed process, or planted) claims nothing.
// Whoever takes a claim must look for the object again before compiling:
// the previous holder may have stored it just before releasing.
//
// Errors: try_take throws CacheError when the directory cannot be used as
// a cache (absent, refused, not writable), and ConfigError for a string
// that is not a graph key.
#pragma once

#include "storage/dir.h"

#include <optional>
#include <string>
#include <utility>

namespace npucache::storage {

class Claim {
 public:
  // The claim on `graph_key` in the cache directory `dir` (which must
  // exist), or nullopt when another process or thread holds it.
  static std::optional<Claim> try_take(const std::string& dir, const std::string& graph_key);
  // Releases the claim, removing its file first when the name still refers
  // to it (a process that opened the old file meanwhile and locks it finds
  // the name no longer refers to it, and opens the name again: try_take;
  // a name removed meanwhile by clear may be another claimant's file now,
  // which stays).
  ~Claim();
  Claim(Claim&& o) noexcept
      : locks_(std::move(o.locks_)), lock_(std::move(o.lock_)), name_(std::exchange(o.name_, std::string())) {}
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  Claim& operator=(Claim&&) = delete;

  // The file name of the claim on `graph_key` in locks/.
  static std::string file_name(const std::string& graph_key);

 private:
  Claim(Dir locks, FileLock lock, std::string name)
      : locks_(std::move(locks)), lock_(std::move(lock)), name_(std::move(name)) {}
  Dir locks_;
  FileLock lock_;
  std::string name_;
};

}  // namespace npucache::storage
