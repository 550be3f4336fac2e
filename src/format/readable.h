// Readable text of a stored entry: its ModelCacheMeta, key components,
// input signature, the traced graph, the optimized graph and, when stored,
// the compiled program's steps.
#pragma once

#include "format/records.h"

#include <string>
#include <utility>

namespace npucache::format {

std::string readable_entry(const EntryRecord& e, const ObjectRecord& o);

// Splits the seed's path ${cache_dir}/${model_info}/.../${func}, with or
// without a final /compiled_module, into the cache directory (the nearest
// ancestor holding the index of the path's model) and the entry path.
// Throws CacheError when no ancestor does.
std::pair<std::string, std::string> split_cache_path(const std::string& path);

}  // namespace npucache::format
