// The process-wide record (a service of the process context) of every entry (with its object) this process
// saved or loaded, and the cache directory each object was saved to or loaded from: what
// save_cache_artifacts() bundles (that directory's regions/ vouches for the object's regions).
#pragma once

#include "cache/uses.h"
#include "format/bundle.h"

#include <map>
#include <string>

namespace npucache::cache {

// Remembers entry `e` (replacing an earlier one of its path) as naming
// object `o`, the bytes this process ran for it (`o` is taken: a hit moves
// its object in; an object of another key than the entry's is not
// remembered). An object is kept while an entry names it, with the
// directory it first came from.
void remember(const std::string& dir, const EntryRecord& e, ObjectRecord o);

// The entries and objects remembered, as a bundle can hold them: one object
// per graph key (of the key's entries, that of the latest one whose object
// holds its program, else of the latest), and every entry of the key
// naming it (as a store's commit restamps the entries of a key it holds
// other bytes of).
struct Remembered {
  Bundle bundle;                            // vouching for nothing (the caller asks the directories)
  std::map<std::string, std::string> dirs;  // graph key -> the cache directory of its object
};
Remembered remembered();

}  // namespace npucache::cache
