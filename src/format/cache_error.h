// The cache layer throws npucache::CacheError, and CacheRefused for files it
// will not use (include/npucache/error.h).
#pragma once

#include <npucache/error.h>

namespace npucache::format {
using npucache::CacheError;
using npucache::CacheRefused;
}  // namespace npucache::format
