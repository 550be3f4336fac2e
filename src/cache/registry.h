// The process-wide record (a service of the process context) of every entry (with its object) this process
// saved or loaded, and the cache directory each object was saved to or loaded from: what
// save_cache_artifacts() bundles (that directory's regions/ vouches for the object's regions).
#pragma once

#include "cache/uses.h"
#include "format/bundle.h"

#include <map>
#include <string>

namespace npucache::cache {

// `o` is taken: a hit moves its object in. An object is remembered once
// (the first time), with the directory it came from then.
void remember(const std::string& dir, const EntryRecord& e, ObjectRecord o);
struct Remembered {
  Bundle bundle;                            // vouching for nothing (the caller asks the directories)
  std::map<std::string, std::string> dirs;  // graph key -> the cache directory
};
Remembered remembered();

}  // namespace npucache::cache
