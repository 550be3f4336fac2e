// The names the cache layer uses unqualified: its namespace sees the
// storage and format layers' (src/LAYERS: cache uses storage, format), so
// `cache::Store` and `cache::ObjectRecord` name storage's and format's
// types for the layers above. Every header of the layer includes this one.
#pragma once

namespace npucache::format {}
namespace npucache::storage {}
namespace npucache::cache {
using namespace npucache::storage;
using namespace npucache::format;
}  // namespace npucache::cache
