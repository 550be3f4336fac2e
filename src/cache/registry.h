// The process-wide record (a service of the process context) of every entry (with its object) this process
// saved or loaded: what save_cache_artifacts() bundles.
#pragma once

#include "cache/uses.h"
#include "format/bundle.h"

namespace npucache::cache {

void remember(const EntryRecord& e, ObjectRecord o);  // taken: a hit moves its object in
Bundle remembered();

}  // namespace npucache::cache
