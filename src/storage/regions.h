// The compiled regions of a store: regions/<region key>.h5
// (format/region_file.h), each a compile region's program compiled once
// and taken by every later compile that calls the same region: other
// methods, models of other depths, other layouts, other processes.
//
// A region file is a compile's shortcut, never what a method runs from: a
// method's object holds its regions' programs itself (docs/FORMAT.md), so
// losing a region file costs one compile of the region, never an entry.
// Hence its life: written under the writing lock (the first valid file of a
// key is kept; a damaged one is replaced), marked used (its modification
// time) on every reuse, removed by gc when damaged, unused for longer than
// gc's --older-than, or the least recently used while a size limit is
// exceeded (storage/gc.h: before any layout), and by clear.
//
// Errors: CacheError for a damaged file (read_region: the caller replaces
// it by compiling) or an unusable directory; CacheRefused for a link or a
// file of another user.
#pragma once

#include "format/region_file.h"
#include "storage/store.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace npucache::storage {

// The region of `key`, checked (envelope, record, decoding, and that its
// validity hashes to `key`); nullopt when the store has none. Marks it used
// unless `mark_used` is false (a check that takes nothing: an export's).
std::optional<format::RegionRecord> read_region(const Store& s, const std::string& key, bool mark_used = true);
// The bytes of the file of `key` as stored (nothing checked: put_region
// checks them where they go), nullopt when there is none. Not marked used.
std::optional<std::string> region_file_bytes(const Store& s, const std::string& key);
// Whether regions/ has a file of `key` (a stat: nothing read, not marked
// used): what a copy of the regions an object holds checks first.
bool has_region(const Store& s, const std::string& key);
// Stores a region file (format::encode_region_file) under its key unless a
// valid one is there; a damaged one is replaced. The bytes are checked
// first: a file not named by its content's key is a CacheError.
// With `replace`, a valid one is replaced too (it did not fit its calls).
// Returns whether this call wrote the file (false: a valid one was kept).
bool put_region(const Store& s, const std::string& key, const std::string& file_bytes, const StoreLock& held,
                bool replace = false);

struct StoredRegion {
  std::string key;
  std::string path;  // for messages
  std::size_t bytes = 0;
  int64_t mtime_ns = 0;  // its last use
  bool ours = true;      // starts with the region magic (else left alone by gc and clear, reported by verify)
  std::string damage;    // empty when it decodes and is named by its content's key (decoded listings only)
  // Another cache format's file (decoded listings only; format/cache_error.h,
  // OtherFormat): not damaged, never sized out, removed by age or clear.
  std::string other_format;
  // Reading it failed (decoded listings only; dir.h, IoError): unknown, not
  // damaged; it goes only by age.
  std::string unread;
  // An earlier cache format's file (decoded listings only;
  // format/cache_error.h, StaleFormat): not damaged, no job of this build
  // uses it; sized out first, removed by age or clear.
  std::string stale;
  std::optional<format::RegionValidity> validity;  // when decoded and intact
};
// Every file of regions/ named like a region (nothing when the folder is
// missing); with `decode`, each is read and checked (`damage`).
std::vector<StoredRegion> stored_regions(const Store& s, bool decode);
// Removes one region file (verify --repair: a damaged one).
void remove_region(const Store& s, const std::string& key, const Sweeping& held);
// Of `decoded` (stored_regions(s, true), read under `held`), removes the
// region files that are damaged, and, with `max_age_s`, those unused for
// longer than it (at wall time `now_s`); returns the keys removed. Files
// named like regions that are not ours are left, and those of another
// cache format unless too old. With `held` null nothing is removed: the
// keys are those it would remove.
std::vector<std::string> sweep_regions(const Store& s, const std::vector<StoredRegion>& decoded,
                                       std::optional<double> max_age_s, double now_s, const Sweeping* held);

}  // namespace npucache::storage
