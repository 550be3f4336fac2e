// Test helpers over a cache directory's store (src/cache/store.h).
#pragma once

#include "format/cache_error.h"
#include "format/names.h"
#include "storage/store.h"

#include <string>
#include <vector>

namespace npucache::testing_support {

// Every readable entry of every index in `dir` (none when there is no cache).
inline std::vector<storage::EntryRecord> entries(const std::string& dir) {
  std::vector<storage::EntryRecord> out;
  if (!storage::Dir::exists(dir)) return out;
  const storage::Store s = storage::Store::open(dir, storage::Create::no);
  for (const auto& m : s.model_infos()) {
    try {
      if (auto d = s.index(m))
        for (auto& e : d->index.entries) out.push_back(std::move(e));
    } catch (const npucache::CacheError&) {
      // An unreadable index (or a foreign .h5 file) has no readable entries.
    }
  }
  return out;
}

inline std::vector<std::string> entry_paths(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : entries(dir)) out.push_back(e.path);
  return out;
}

// Removes one entry (as a user's cleanup or a lost index would).
inline void remove_entry(const std::string& dir, const std::string& path) {
  const storage::Store s = storage::Store::open(dir, storage::Create::no);
  const std::string m = storage::names::model_info_of(path);
  auto d = s.index(m);
  s.update_index(m, d ? d->index.model : storage::Components{}, {}, {path});
}

// Replaces (or adds) one entry record.
inline void put_entry(const std::string& dir, const storage::EntryRecord& e) {
  const storage::Store s = storage::Store::open(dir, storage::Create::no);
  const std::string m = storage::names::model_info_of(e.path);
  auto d = s.index(m);
  s.update_index(m, d ? d->index.model : storage::Components{}, {e}, {});
}

}  // namespace npucache::testing_support
