// The cache layer throws npucache::CacheError (include/npucache/error.h).
#pragma once

#include <npucache/error.h>

namespace npucache::cache {
using npucache::CacheError;
}  // namespace npucache::cache
